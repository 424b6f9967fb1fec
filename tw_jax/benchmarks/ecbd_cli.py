"""``tw-jax ecbd``: build Entity Cloze By Date from dumps, evaluate a model on it, print its tables.

    tw-jax ecbd build --wikidata wikidata-all.json.bz2 --wikipedia enwiki-pages-articles.xml.bz2 \\
        --out DIR [--years 2017-2021] [--min-words 500] [--spacy-model en_core_web_sm] [--seed 0]
    tw-jax ecbd eval --data ECBD_DIR --out OUT_DIR --model HF_FOLDER [--recall-k 10]
    tw-jax ecbd eval --data ECBD_DIR --out OUT_DIR --model-dir MODEL_DIR \\
        --gin_file=models/t5_tiny.gin --vocab spiece.model
    tw-jax ecbd report OUT_DIR [OUT_DIR ...]

``eval`` reads a built or a released ECBD folder, scores the model (a Hugging Face folder, or an
orbax MODEL_DIR with the gin files it was trained with), appends ``OUT_DIR/ecbd_results.jsonl``,
writes per-example scores (``ecbd_examples.NAME.jsonl``), ``ecbd_report.md`` and one CSV per table
(``ecbd_tables/``), and prints the tables: ECBD Table 3 (groups), 5 (per subset), 6 (per span
type), and with ``--recall-k`` Tables 7 and 8 (T5 only).

There is no ``train``: ECBD is an evaluation benchmark of frozen models (the paper fine-tunes
nothing), and continuing to train on the entities' articles would train on the very sentences
the cloze spans come from. Train with ``tw-jax train``/``lifelong`` and evaluate the checkpoints.

Every path may be local or a ``gs://`` URL, resolved once here (``type=input_path`` /
``type=output_path``): a missing input is argparse's one-line error, exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import posixpath
import sys
from collections.abc import Sequence
from typing import Any

from tw_jax.cli_parser import add_gin_flags, gin_search_paths
from tw_jax.io import paths
from tw_jax.io.cli_paths import input_path, output_path

_SPLITS = ("dev", "test")


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ecbd", help="Entity Cloze By Date: build from dumps, evaluate, report",
        description="Entity Cloze By Date (Onoe et al., 2022): build the benchmark from a "
                    "Wikidata and a Wikipedia dump, evaluate a model on it, print its tables.")
    commands = parser.add_subparsers(dest="ecbd_command", required=True, metavar="SUBCOMMAND")

    build = commands.add_parser("build", help="build an ECBD folder from dumps",
                                description="Writes OUT/{year}/{np,random}_spans_{dev,test}.json, "
                                            "entities.jsonl and stats.json (last).")
    build.add_argument("--wikidata", required=True, type=input_path,
                       help="Wikidata JSON dump (.json[.bz2|.gz]), local or gs://")
    build.add_argument("--wikipedia", required=True, type=input_path,
                       help="Wikipedia dump (XML or WikiExtractor), local or gs://")
    build.add_argument("--out", required=True, type=output_path,
                       help="output folder, local or gs://")
    build.add_argument("--years", default="2017-2021",
                       help="origination years kept: FIRST-LAST, YEAR or 'all' (default 2017-2021)")
    build.add_argument("--min-words", type=int, default=500,
                       help="articles shorter than this are dropped (paper: 500)")
    build.add_argument("--min-sentence-words", type=int, default=5)
    build.add_argument("--max-spans-per-entity", type=int, default=100)
    build.add_argument("--random-spans", type=int, default=5,
                       help="random spans drawn per sentence (default 5)")
    build.add_argument("--dev-fraction", type=float, default=0.5,
                       help="share of each subset's entities in dev (the rest: test)")
    build.add_argument("--spacy-model", default="en_core_web_sm",
                       help="spaCy pipeline with a parser (package name or folder)")
    build.add_argument("--seed", type=int, default=0)
    build.set_defaults(func=run_build)

    evaluate = commands.add_parser("eval", help="score a model on an ECBD folder",
                                   description="Span perplexity (and recall@k) under ORIGINAL / "
                                               "NO ENT / RANDOM DEF. / DEFINITION inputs.")
    evaluate.add_argument("--data", required=True, type=input_path,
                          help="ECBD folder (built or released)")
    evaluate.add_argument("--out", required=True, type=output_path,
                          help="results and tables go here")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", type=input_path,
                        help="a Hugging Face folder (config.json + safetensors)")
    source.add_argument("--model-dir", type=input_path,
                        help="an orbax MODEL_DIR (needs --gin_file and --vocab)")
    add_gin_flags(evaluate, file_help="gin file of the --model-dir run (repeatable)")
    evaluate.add_argument("--vocab", default=None, type=input_path,
                          help="vocabulary (default: the --model folder): spiece.model, or a "
                               "GPT-2 or BART folder (vocab.json + merges.txt)")
    evaluate.add_argument("--name", default=None, help="model name in results (default: folder)")
    evaluate.add_argument("--subsets", type=_csv, default=None, metavar="S,S")
    evaluate.add_argument("--splits", type=_csv, default=["test"], metavar="dev,test",
                          help="splits to score (default test)")
    evaluate.add_argument("--inputs", type=_csv, default=None, metavar="T,T",
                          help="input types (default original,no_ent,random_def,definition)")
    evaluate.add_argument("--definition-sentences", type=int, default=1,
                          help="definition sentences prepended (0: the whole first paragraph)")
    evaluate.add_argument("--recall-k", type=int, default=0,
                          help="recall@k from beam search, T5 only (paper: 10; 0: off)")
    evaluate.add_argument("--beam-size", type=int, default=100)
    evaluate.add_argument("--max-new-tokens", type=int, default=16)
    evaluate.add_argument("--batch-size", type=int, default=32)
    evaluate.add_argument("--seed", type=int, default=0, help="seed of RANDOM DEF. draws")
    evaluate.set_defaults(func=run_eval)

    report = commands.add_parser("report", help="tables from ecbd_results.jsonl files")
    report.add_argument("results", nargs="+", type=input_path,
                        help="OUT_DIRs or ecbd_results.jsonl files")
    report.add_argument("--out", default=None, type=output_path,
                        help="write ecbd_report.md and CSVs here")
    report.set_defaults(func=run_report)


def _error(message: str) -> int:
    print(f"tw-jax ecbd: error: {message}", file=sys.stderr)
    return 2


def run_build(args: argparse.Namespace) -> int:
    from tw_jax.preprocess.ecbd.build import BuildOptions, build_ecbd
    from tw_jax.preprocess.ecbd.entities import parse_years
    from tw_jax.text.spacy_pipeline import SpacyModelError

    for flag in ("wikidata", "wikipedia"):
        if not paths.isfile(getattr(args, flag)):
            return _error(f"--{flag} {getattr(args, flag)}: not a file")
    try:
        options = BuildOptions(
            years=parse_years(args.years), min_words=args.min_words,
            min_sentence_words=args.min_sentence_words,
            max_spans_per_entity=args.max_spans_per_entity, random_per_sentence=args.random_spans,
            dev_fraction=args.dev_fraction, seed=args.seed, spacy_model=args.spacy_model)
        options.check()
        stats = build_ecbd(args.wikidata, args.wikipedia, args.out, options)
    except (ValueError, SpacyModelError) as error:
        return _error(str(error))
    summary = {"out": args.out, "seconds": stats["seconds"], "entities": stats["entities"],
               "examples": stats["examples"],
               "subsets": {s: {k: v["entities"] for k, v in splits.items()}
                           for s, splits in stats["subsets"].items()}}
    print(json.dumps(summary))
    return 0


def _model_source(args: argparse.Namespace) -> Any:
    """The checkpoint to score: ``--model`` (a Hugging Face folder) or ``--model-dir`` with the
    gin files that built its model; loaded like every evaluator's (``evaluate.runs``)."""
    from tw_jax.evaluate.runs import ModelSource

    if args.model:
        return ModelSource(hf_dir=args.model)
    if not args.gin_file or not args.vocab:
        raise ValueError("--model-dir needs --gin_file (the model's) and --vocab")
    return ModelSource(model_dir=args.model_dir, gin_files=list(args.gin_file),
                       gin_bindings=list(args.gin_bindings),
                       gin_search_paths=list(gin_search_paths(args)))


def _run_name(args: argparse.Namespace) -> str:
    return args.name or posixpath.basename(args.model or args.model_dir)


def _evaluate(args: argparse.Namespace, data: Any, loaded: Any, vocabulary: Any) -> Any:
    from tw_jax.evaluate import ecbd
    from tw_jax.tasks.ecbd import INPUTS

    options = ecbd.EcbdOptions(
        input_types=tuple(args.inputs or INPUTS), n_definition=args.definition_sentences,
        seed=args.seed, batch_size=args.batch_size, recall_k=args.recall_k,
        beam_size=args.beam_size, max_new_tokens=args.max_new_tokens)
    return ecbd.evaluate_ecbd(loaded.module, loaded.params, vocabulary, data, _run_name(args),
                              options)


def run_eval(args: argparse.Namespace) -> int:
    from tw_jax.evaluate import ecbd
    from tw_jax.evaluate.runs import loaded_run
    from tw_jax.io.jsonl import write_records
    from tw_jax.runtime.checkpoints import CheckpointError
    from tw_jax.runtime.gin_setup import GinConfigError
    from tw_jax.tasks.ecbd import INPUTS, read_ecbd

    unknown = [t for t in args.inputs or () if t not in INPUTS]
    if unknown:
        return _error(f"unknown --inputs {unknown}; known: {', '.join(INPUTS)}")
    if any(s not in _SPLITS for s in args.splits):
        return _error(f"--splits takes {' / '.join(_SPLITS)}, got {args.splits}")
    data = read_ecbd(args.data, args.subsets, args.splits)  # DumpError: file and line
    if not any(data.values()):
        return _error(f"{args.data}: no examples for splits {args.splits}"
                      + (f" and subsets {args.subsets}" if args.subsets else ""))
    with contextlib.ExitStack() as stack:
        try:
            loaded = stack.enter_context(loaded_run(_model_source(args)))
        except (ValueError, FileNotFoundError, GinConfigError, CheckpointError) as error:
            return _error(str(error))
        vocabulary = loaded.model.load_vocabulary(args.vocab or args.model)
        run = _evaluate(args, data, loaded, vocabulary)
    out, name = args.out, _run_name(args)
    results_file = ecbd.append_results(out, run.results)
    write_records(paths.join(out, f"ecbd_examples.{name}.jsonl"), run.records)
    print(f"ecbd {name}: {len(run.records)} scored examples; {len(run.results)} results "
          f"appended to {results_file}")
    for what, count in sorted(run.notes.items()):
        print(f"  note: {what}: {count}")
    _render(ecbd.read_results(results_file), out)
    return 0


def run_report(args: argparse.Namespace) -> int:
    from tw_jax.evaluate.ecbd import latest, read_results

    results = latest(r for path in args.results for r in read_results(path))
    _render(results, args.out)
    return 0


# --- tables (ECBD Tables 3, 5, 6, 7, 8) ----------------------------------------------------


def _columns(results: Sequence[Any], split: str, groups: bool) -> list[str]:
    from tw_jax.evaluate.ecbd import GROUPS
    from tw_jax.tasks.ecbd import subset_order

    found = {r.subset for r in results if r.split == split}
    if groups:
        return [s for s in ("popular", *GROUPS) if s in found]
    return sorted((s for s in found if s not in GROUPS), key=subset_order)


def _table(results: Sequence[Any], split: str, metric: str, columns: Sequence[str],
           span_types: Sequence[str], name: str, title: str) -> Any:
    from tw_jax.evaluate.ecbd import INPUT_LABELS
    from tw_jax.evaluate.report import Table, fmt

    values = {(r.model, r.subset, r.input, r.span_type): r.value
              for r in results if r.split == split and r.metric == metric}
    cells = [(c, t) for c in columns for t in span_types]
    short = {"all": "", "NP": " NP", "RANDOM": " RAND"}
    headers = ["model", "input"] + [f"{c.upper() if c == 'popular' else c}{short[t]}"
                                    for c, t in cells]
    rows = []
    digits = 1 if metric.startswith("recall") else 2
    for model in sorted({k[0] for k in values}):
        inputs = [i for i in INPUT_LABELS if any(k[0] == model and k[2] == i for k in values)]
        for input_type in inputs:
            rows.append([model, INPUT_LABELS[input_type]] + [
                fmt(values.get((model, c, input_type, t)), digits) for c, t in cells])
        for other in ("random_def", "definition"):
            if other in inputs and "original" in inputs:
                deltas = []
                for c, t in cells:
                    a, b = values.get((model, c, "original", t)), values.get((model, c, other, t))
                    deltas.append("-" if a is None or b is None else f"{b - a:+.{digits}f}")
                label = "RAND." if other == "random_def" else "DEF."
                rows.append([model, f"Δ(ORIG. → {label})"] + deltas)
    return Table(name, title, headers, rows) if rows else None


def ecbd_tables(results: Sequence[Any]) -> list[Any]:
    """The paper's tables for every split and metric present in ``results``."""
    from tw_jax.evaluate.ecbd import PPL, PPL_ENTITY

    tables = []
    for split in _SPLITS:
        metrics = {r.metric for r in results if r.split == split}
        groups, subsets = _columns(results, split, True), _columns(results, split, False)
        recalls = sorted(m for m in metrics if m.startswith("recall_at_"))
        specs = [
            ("table3", PPL_ENTITY, groups, ("all",), "entity-averaged perplexity by group "
             "(ECBD Table 3)"),
            ("table5", PPL_ENTITY, subsets, ("all",), "entity-averaged perplexity per subset "
             "(ECBD Table 5)"),
            ("table5_micro", PPL, subsets, ("all",), "micro perplexity per subset"),
            ("table6", PPL_ENTITY, subsets, ("NP", "RANDOM"), "entity-averaged perplexity per "
             "span type (ECBD Table 6)"),
        ]
        for metric in recalls:
            k = metric.rsplit("_", 1)[1]
            specs += [("table7", metric, subsets, ("all",), f"recall@{k} (%) (ECBD Table 7)"),
                      ("table8", metric, subsets, ("NP", "RANDOM"),
                       f"recall@{k} (%) per span type (ECBD Table 8)")]
        for name, metric, columns, span_types, title in specs:
            if metric in metrics and columns:
                table = _table(results, split, metric, columns, span_types,
                               f"ecbd_{name}_{split}", f"{title}, {split}")
                if table is not None:
                    tables.append(table)
    return tables


def _render(results: Sequence[Any], out: str | None) -> None:
    from tw_jax.io.atomic import atomic_open

    tables = ecbd_tables(results)
    text = "\n".join(t.markdown() for t in tables) or "no ECBD results to tabulate\n"
    print(text, end="")
    if out is None:
        return
    with atomic_open(paths.join(out, "ecbd_report.md"), "w", encoding="utf-8") as handle:
        handle.write(text)
    for table in tables:
        with atomic_open(paths.join(out, "ecbd_tables", f"{table.name}.csv"), "w",
                         encoding="utf-8") as handle:
            handle.write(table.csv())
