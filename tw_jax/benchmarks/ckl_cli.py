"""``tw-jax ckl``: CKL (Jang et al., 2022) — build probes, train, evaluate, run phases.

    tw-jax ckl build-lama --wikidata wikidata-all.json.bz2 --out DIR [--seed 0] \\
        [--max-per-relation 1000]
    tw-jax ckl eval --data CKL_DIR --out OUT_DIR --model t5-large-ssm/ [--method initial]
    tw-jax ckl eval --data CKL_DIR --out OUT_DIR --model-dir MODEL_DIR --gin_file=ckl.gin \\
        --method vanilla
    tw-jax ckl train --data CKL_DIR --gin_file=ckl.gin --gin.MODEL_DIR=DIR \\
        --gin.INITIAL_CHECKPOINT_PATH=t5-large-ssm/ [--epochs 4]
    tw-jax ckl phases --data CKL_DIR --out DATA --corpus recent_news_small1.csv,recent_news_small2.csv \\
        --new newLAMA_easy_small_split1.csv,newLAMA_easy_small_split2.csv --vocab spiece.model
    tw-jax lifelong --gin_file=vanilla.gin --gin.TRAIN_STEPS=2500 --months 0001,0102 \\
        --data DATA --out /abs/OUT --initial-checkpoint t5-large-ssm/ --metrics ppl_cloze
    tw-jax ckl eval-phases --gin_file=vanilla.gin --data DATA --lifelong /abs/OUT
    tw-jax report /abs/OUT

``CKL_DIR`` is a folder or zip of CKL's released files or of ``build-lama``'s output (formats in
:mod:`tw_jax.preprocess.ckl.release`). ``eval`` scores zero-shot EM/F1 on each probe set at CKL's
lengths, appends ``OUT_DIR/results.jsonl`` and prints CKL Table 2 with FUAR; ``eval-phases`` does
the same for every checkpoint of a lifelong run over a ``phases`` folder (give the runner an
absolute ``--out``: it hands each phase's checkpoint folder on as INITIAL_CHECKPOINT_PATH, which
orbax refuses relative). Errors in the input name the file and the line.

Every path may be local or a ``gs://`` URL; each is resolved once here (``type=input_path``:
it must exist; ``type=output_path``: its bucket must), so a missing input is argparse's
one-line error, exit status 2, before any work starts.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from typing import Any

from tw_jax.cli_parser import add_gin_flags, gin_search_paths
from tw_jax.io import paths
from tw_jax.io.cli_paths import input_path, output_path

PREFIX = "tw-jax ckl"


def _csv(text: str) -> list[str | None]:
    """``a,b,-`` → ``["a", "b", None]`` (``-`` or empty: nothing for that phase)."""
    return [None if p.strip() in ("", "-") else p.strip() for p in text.split(",")]


def _gin_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    add_gin_flags(parser, required=required, file_help="gin file (repeatable; e.g. ckl.gin, "
                  "methods/kadapter.gin, models/t5_tiny.gin)")


def _decode_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--beam-size", type=int, default=1,
                        help="1 decodes greedily (default); CKL's code used 2 beams")
    parser.add_argument("--batch-size", type=int, default=32, help="probes decoded per batch")
    parser.add_argument("--max-probes", type=int, default=None, metavar="N",
                        help="score only the first N probes of each set (smoke runs)")
    parser.add_argument("--vocab", default=None, type=input_path,
                        help="T5 SentencePiece model (default: the --model folder's "
                             "spiece.model, $TW_JAX_T5_VOCAB, DATA/vocab/t5/)")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ckl", help="CKL: InvariantLAMA-style probes, continual SSM training, EM + FUAR",
        description="Continual Knowledge Learning (Jang et al., 2022): build InvariantLAMA-style "
                    "probes, train on CC-RecentNews, evaluate zero-shot EM, run phases.")
    commands = parser.add_subparsers(dest="ckl_command", required=True, metavar="SUBCOMMAND")

    build = commands.add_parser(
        "build-lama", help="InvariantLAMA-style probes from a Wikidata dump",
        description="Facts of the 28 time-invariant relations of CKL Table 4 as cloze probes: "
                    "OUT/invariantLAMA.csv (id,input,output), invariantLAMA_answers.json, "
                    "invariantLAMA_facts.csv and stats.json (last).")
    build.add_argument("--wikidata", required=True, type=input_path,
                       help="Wikidata JSON dump (.json[.bz2|.gz]), local or gs://")
    build.add_argument("--out", required=True, type=output_path,
                       help="output folder, local or gs://")
    build.add_argument("--seed", type=int, default=0, help="seed of the per-relation sample")
    build.add_argument("--max-per-relation", type=int, default=1000,
                       help="facts kept per relation (LAMA T-REx: 1000; 0 keeps all)")
    build.add_argument("--max-subject-frac", type=float, default=1.0)
    build.add_argument("--max-object-frac", type=float, default=1.0)
    build.add_argument("--max-relation-frac", type=float, default=1.0)
    build.add_argument("--progress", action="store_true", help="show a progress bar")
    build.set_defaults(func=run_build)

    evaluate = commands.add_parser(
        "eval", help="zero-shot EM/F1 of a model on CKL's probe sets",
        description="Appends OUT/results.jsonl and prints CKL Table 2 (EM, FUAR).")
    _gin_arguments(evaluate)
    evaluate.add_argument("--data", required=True, type=input_path,
                          help="CKL folder or zip (released or built)")
    evaluate.add_argument("--out", required=True, type=output_path,
                          help="results.jsonl goes here")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", type=input_path,
                        help="a Hugging Face folder (config.json + safetensors)")
    source.add_argument("--model-dir", type=input_path,
                        help="an orbax MODEL_DIR (needs --gin_file)")
    evaluate.add_argument("--method", default="initial",
                          help="method name in the results (default initial: the base model)")
    evaluate.add_argument("--trained-through", default=None, metavar="base|MMMM",
                          help="default: base for --method initial, else --phase")
    evaluate.add_argument("--phase", default="0001", metavar="MMMM",
                          help="the phase (eval month) these sets belong to (default 0001)")
    evaluate.add_argument("--tasks", default=None, metavar="T[:CAT],...",
                          help="probe tasks (default: IL, UL, NL, NLE where present), each "
                               "optionally with its results category, e.g. "
                               "ckl_new_lama_easy:new to count NLE as the acquired set (FUAR's "
                               "T^A, as CKL Tables 3 and 7)")
    evaluate.add_argument("--predictions", default=None, metavar="DIR", type=output_path,
                          help="also write each set's predictions as JSONL here")
    _decode_arguments(evaluate)
    evaluate.set_defaults(func=run_eval)

    train = commands.add_parser(
        "train", help="continual SSM pretraining on CC-RecentNews (the trainer, gin)",
        description="Registers the CKL tasks of --data and runs the trainer (tw-jax train) on "
                    "MIXTURE_OR_TASK_NAME, by default ckl_recent_news_ssm (gin/ckl.gin).")
    _gin_arguments(train, required=True)
    train.add_argument("--data", required=True, type=input_path,
                       help="CKL folder or zip with recent_news_*.csv")
    train.add_argument("--task", default=None,
                       help="task or mixture to train on (e.g. ckl_recent_news_small_ssm, "
                            "ckl_mixreview_ssm); default: the gin MIXTURE_OR_TASK_NAME")
    train.add_argument("--epochs", type=float, default=None,
                       help="set TRAIN_STEPS to this many passes over the corpus at BATCH_SIZE "
                            "(CKL: 4)")
    train.add_argument("--vocab", default=None, type=input_path, help="T5 SentencePiece model")
    train.set_defaults(func=run_train)

    phases = commands.add_parser(
        "phases", help="lay out CKL phases as a data folder for tw-jax lifelong",
        description="Phase i becomes the month pair {i-1:02d}{i:02d} (0001, 0102, ...): its SSM "
                    "corpus, its probes and its sets in CKL's format (see "
                    "tw_jax.preprocess.ckl.phases). Lists are comma-separated, one item per "
                    "phase, '-' for none.")
    phases.add_argument("--data", required=True, type=input_path, help="CKL folder or zip")
    phases.add_argument("--out", required=True, type=output_path,
                        help="the data folder to write (DATA), local or gs://")
    phases.add_argument("--corpus", required=True, type=_csv, metavar="CSV,CSV",
                        help="each phase's SSM corpus, e.g. recent_news_small1.csv,...")
    phases.add_argument("--new", type=_csv, default=None, metavar="CSV,CSV",
                        help="each phase's acquisition set (results category new)")
    phases.add_argument("--updated", type=_csv, default=None, metavar="CSV,CSV")
    phases.add_argument("--new-easy", type=_csv, default=None, metavar="CSV,CSV")
    phases.add_argument("--invariant", default="invariantLAMA.csv",
                        help="the forgetting set of every phase (default invariantLAMA.csv)")
    phases.add_argument("--initial-corpus", default=None, metavar="CSV",
                        help="D_0's SSM corpus for Mix-Review (wikipedia_pretrain_*.csv)")
    phases.add_argument("--vocab", default=None, type=input_path,
                        help="copied to DATA/vocab/t5/spiece.model")
    phases.set_defaults(func=run_phases)

    phase_eval = commands.add_parser(
        "eval-phases", help="EM of every checkpoint of a lifelong run over a phases folder",
        description="Scores INITIAL and each phase's checkpoint (from LIFELONG/state) on every "
                    "phase's sets, appends LIFELONG/results.jsonl, prints CKL Table 2 (FUAR).")
    _gin_arguments(phase_eval, required=True)
    phase_eval.add_argument("--data", required=True, type=input_path,
                            help="the phases data folder")
    phase_eval.add_argument("--lifelong", required=True, metavar="OUT", type=input_path,
                            help="the tw-jax lifelong --out folder")
    phase_eval.add_argument("--method", default=None,
                            help="method of the run (default: the first gin file's stem)")
    phase_eval.add_argument("--initial-gin-file", action="append", default=None,
                            metavar="FILE", help="gin files of INITIAL (as tw-jax lifelong)")
    _decode_arguments(phase_eval)
    phase_eval.set_defaults(func=run_eval_phases)


def _error(command: str, message: Any) -> int:
    print(f"{PREFIX} {command}: error: {message}", file=sys.stderr)
    return 2


def run_build(args: argparse.Namespace) -> int:
    from tw_jax.preprocess.ckl.lama import LamaOptions, build_invariant_lama

    if not paths.isfile(args.wikidata):
        return _error("build-lama", f"--wikidata {args.wikidata}: not a file")
    options = LamaOptions(seed=args.seed, max_per_relation=args.max_per_relation or None,
                          max_subject_frac=args.max_subject_frac,
                          max_object_frac=args.max_object_frac,
                          max_relation_frac=args.max_relation_frac)
    try:
        options.check()
    except ValueError as error:
        return _error("build-lama", error)
    stats = build_invariant_lama(args.wikidata, args.out, options, progress=args.progress)
    summary = {"out": args.out, "probes": stats["facts"]["final"],
               "per_relation": {r: v["final"] for r, v in stats["per_relation"].items()},
               "dropped": stats["facts"]["dropped_by_reason"]}
    print(json.dumps(summary))
    return 0


def _task_categories(text: str) -> dict[str, str]:
    """``--tasks IL,NLE:new`` → task → results category ("": the task's own)."""
    chosen = {}
    for item in _csv(text):
        if item:
            task, _, category = item.partition(":")
            chosen[task.strip()] = category.strip()
    return chosen


def eval_config(args: argparse.Namespace) -> Any:
    """The :class:`~tw_jax.benchmarks.ckl_eval.CklEvalConfig` of ``eval``'s arguments."""
    from tw_jax.benchmarks.ckl_eval import CklEvalConfig

    return CklEvalConfig(
        data=args.data, out=args.out, model=args.model, model_dir=args.model_dir,
        gin_files=tuple(args.gin_file), gin_bindings=tuple(args.gin_bindings),
        gin_search_paths=tuple(gin_search_paths(args)), vocab=args.vocab, method=args.method,
        phase=args.phase, trained_through=args.trained_through,
        tasks=_task_categories(args.tasks) if args.tasks else None,
        predictions=args.predictions, beam_size=args.beam_size, batch_size=args.batch_size,
        max_probes=args.max_probes)


def run_eval(args: argparse.Namespace) -> int:
    from tw_jax.benchmarks.ckl_eval import evaluate
    from tw_jax.evaluate import ckl
    from tw_jax.runtime import checkpoints, gin_setup

    logging.basicConfig(level=logging.WARNING)
    try:
        outcome = evaluate(eval_config(args))
    except (gin_setup.GinConfigError, checkpoints.CheckpointError, ValueError, OSError) as error:
        return _error("eval", error)
    print(f"{len(outcome.results)} results appended to {outcome.results_path}\n")
    print(ckl.ckl_table_text(args.out))
    return 0


def run_train(args: argparse.Namespace) -> int:
    from tw_jax.preprocess.ckl.release_files import corpus_files, count_ssm_examples, find_files
    from tw_jax.runtime import checkpoints, gin_setup
    from tw_jax.tasks.ckl import register_ckl
    from tw_jax.train import trainer
    from tw_jax.train.gin_config import train_config

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    names = register_ckl(args.data, args.vocab)
    search = gin_search_paths(args)
    try:
        gin_setup.parse(args.gin_file, args.gin_bindings, search, gin_setup.MACROS_TRAIN)
        config = train_config()
        if args.task:
            config = config.replace(mixture_or_task_name=args.task)
        task = config.mixture_or_task_name
        if task not in names:
            return _error("train", f"{task!r} is not a CKL task of {args.data} "
                          f"(found: {', '.join(names)})")
        if args.epochs is not None:
            corpora = corpus_files(find_files(args.data))
            corpus_task = "ckl_recent_news_ssm" if task == "ckl_mixreview_ssm" else task
            if corpus_task not in corpora:
                return _error("train", f"--epochs needs a corpus task, not {task!r}")
            batch = config.batch_size
            examples = count_ssm_examples(corpora[corpus_task])
            total = _epoch_examples(args.epochs, examples, task == "ckl_mixreview_ssm")
            steps = max(1, math.ceil(total / batch))
            mixed = f" ({total:g} with the old data)" if total != args.epochs * examples else ""
            print(f"{args.epochs:g} epochs of {examples} examples{mixed} at batch {batch}: "
                  f"{steps} steps")
            config = config.replace(train_steps=steps)
        result = trainer.train(config)
    except gin_setup.GinConfigError as error:
        return _error("train", error)
    except (trainer.TrainingDivergedError, checkpoints.CheckpointError) as error:
        print(f"{PREFIX} train: error: {error}", file=sys.stderr)
        return 1
    print(f"trained {task} to step {result.step} (started at step {result.start_step})")
    return 0


def _epoch_examples(epochs: float, examples: int, mixreview: bool) -> float:
    """Examples in ``epochs`` passes over the new data, Mix-Review's old data included (its
    schedule as gin configures it, by default CKL's preset: N·4·0.7^e old examples in epoch e)."""
    if not mixreview:
        return epochs * examples
    from tw_jax.tasks import MixReviewSchedule

    return MixReviewSchedule().resolve("ckl").mixed_examples(epochs, examples)


def _per_phase(values: list[str | None] | None, count: int, flag: str) -> list[str | None]:
    values = values or [None] * count
    if len(values) != count:
        raise ValueError(f"--{flag} names {len(values)} phases, --corpus {count}")
    return values


def run_phases(args: argparse.Namespace) -> int:
    from tw_jax.preprocess.ckl.phases import PhaseSpec, layout_phases, phase_summary

    corpora = args.corpus
    try:
        if any(c is None for c in corpora):
            raise ValueError("every phase needs a --corpus file")
        columns = [_per_phase(getattr(args, flag), len(corpora), flag.replace("_", "-"))
                   for flag in ("updated", "new", "new_easy")]
        specs = [PhaseSpec(c, u, n, e) for c, u, n, e in zip(corpora, *columns, strict=True)]
        manifest = layout_phases(args.data, args.out, specs, invariant=args.invariant,
                                 initial_corpus=args.initial_corpus, t5_vocab=args.vocab)
    except ValueError as error:
        return _error("phases", error)
    for line in phase_summary(manifest):
        print(line)
    months = ",".join(p["pair"] for p in manifest["phases"])
    print(f"next: tw-jax lifelong ... --months {months} --data {args.out} --initial-checkpoint "
          f"T5_FOLDER, then tw-jax ckl eval-phases ... --data {args.out} --lifelong OUT")
    return 0


def run_eval_phases(args: argparse.Namespace) -> int:
    from tw_jax.benchmarks import ckl_phases
    from tw_jax.evaluate import ckl
    from tw_jax.evaluate.results import results_path
    from tw_jax.lifelong.runner import LifelongError
    from tw_jax.runtime import checkpoints, gin_setup

    logging.basicConfig(level=logging.WARNING)
    options = ckl_phases.PhasesOptions(
        data_dir=args.data, lifelong_dir=args.lifelong, gin_files=args.gin_file,
        gin_bindings=args.gin_bindings,
        gin_search_paths=gin_search_paths(args),
        method=args.method, initial_gin_files=args.initial_gin_file, t5_vocab=args.vocab,
        beam_size=args.beam_size, batch_size=args.batch_size, limit=args.max_probes)
    try:
        results = ckl_phases.evaluate_phases(options)
    except (LifelongError, gin_setup.GinConfigError, checkpoints.CheckpointError) as error:
        return _error("eval-phases", error)
    print(f"{len(results)} results appended to {results_path(args.lifelong)}\n")
    print(ckl.ckl_table_text(args.lifelong))
    return 0
