"""``tw-jax ecbd``: build Entity Cloze By Date from dumps, evaluate a model on it, print its tables.

    tw-jax ecbd build --wikidata wikidata-all.json.bz2 --wikipedia enwiki-pages-articles.xml.bz2 \\
        --out DIR [--years 2017-2021] [--min-words 500] [--spacy-model en_core_web_sm] [--seed 0]
    tw-jax ecbd eval --data ECBD_DIR --out OUT_DIR --model HF_FOLDER [--recall-k 10]
    tw-jax ecbd eval --data ECBD_DIR --out OUT_DIR --model-dir MODEL_DIR \\
        --gin_file=models/t5_tiny.gin --vocab spiece.model
    tw-jax ecbd report OUT_DIR [OUT_DIR ...]

``eval`` reads a built or a released ECBD folder, scores the model (a Hugging Face folder, or an
orbax MODEL_DIR with the gin files it was trained with), appends its cells to
``OUT_DIR/results.jsonl`` (the results file of every benchmark; ``tw-jax report`` leaves ECBD's
lines to ``ecbd report``), writes per-example scores (``ecbd_examples.NAME.jsonl``),
``ecbd_report.md`` and one CSV per table (``ecbd_tables/``), and prints the tables: ECBD Table 3 (groups), 5 (per subset), 6 (per span
type), and with ``--recall-k`` Tables 7 and 8 (T5 only). ``report`` prints the same tables from
OUT_DIRs; an OUT_DIR of an earlier version, whose ECBD numbers are in ``ecbd_results.jsonl``,
still reports.

There is no ``train``: ECBD is an evaluation benchmark of frozen models (the paper fine-tunes
nothing), and continuing to train on the entities' articles would train on the very sentences
the cloze spans come from. Train with ``tw-jax train``/``lifelong`` and evaluate the checkpoints.

Every path may be local or a ``gs://`` URL, resolved once here (``type=input_path`` /
``type=output_path``): a missing input is argparse's one-line error, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tw_jax.cli_parser import add_gin_flags, gin_search_paths
from tw_jax.io import paths
from tw_jax.io.cli_paths import input_path, output_path


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
    evaluate.add_argument("--name", default=None,
                          help="model name in results, lower-cased (default: the folder's)")
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

    report = commands.add_parser("report", help="ECBD's tables from results.jsonl files")
    report.add_argument("results", nargs="+", type=input_path,
                        help="OUT_DIRs, or their results.jsonl (or an earlier version's "
                             "ecbd_results.jsonl)")
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


def eval_config(args: argparse.Namespace) -> Any:
    """The :class:`~tw_jax.benchmarks.ecbd_eval.EcbdEvalConfig` of ``eval``'s arguments."""
    from tw_jax.benchmarks.ecbd_eval import EcbdEvalConfig
    from tw_jax.evaluate.ecbd import EcbdOptions
    from tw_jax.tasks.ecbd import INPUTS

    options = EcbdOptions(
        input_types=tuple(args.inputs or INPUTS), n_definition=args.definition_sentences,
        seed=args.seed, batch_size=args.batch_size, recall_k=args.recall_k,
        beam_size=args.beam_size, max_new_tokens=args.max_new_tokens)
    return EcbdEvalConfig(
        data=args.data, out=args.out, model=args.model, model_dir=args.model_dir,
        gin_files=tuple(args.gin_file), gin_bindings=tuple(args.gin_bindings),
        gin_search_paths=tuple(gin_search_paths(args)), vocab=args.vocab, name=args.name,
        subsets=None if args.subsets is None else tuple(args.subsets),
        splits=tuple(args.splits), options=options)


def run_eval(args: argparse.Namespace) -> int:
    from tw_jax.benchmarks.ecbd_eval import evaluate, render
    from tw_jax.errors import UsageError
    from tw_jax.evaluate import ecbd
    from tw_jax.runtime.checkpoints import CheckpointError
    from tw_jax.runtime.gin_setup import GinConfigError

    try:
        outcome = evaluate(eval_config(args))  # DumpError (file and line) goes to main
    except (UsageError, ValueError, FileNotFoundError, GinConfigError, CheckpointError) as error:
        return _error(str(error))
    print(f"ecbd {outcome.name}: {len(outcome.run.records)} scored examples; "
          f"{len(outcome.run.results)} results appended to {outcome.results_file}")
    for what, count in sorted(outcome.run.notes.items()):
        print(f"  note: {what}: {count}")
    print(render(ecbd.read_results(args.out), args.out), end="")
    return 0


def run_report(args: argparse.Namespace) -> int:
    from tw_jax.benchmarks.ecbd_eval import render
    from tw_jax.evaluate.ecbd import latest, read_results

    results = latest(r for path in args.results for r in read_results(path))
    print(render(results, args.out), end="")
    return 0
