"""``tw-jax lifelong``: train period after period and score every update on the probes.

    tw-jax lifelong --gin_file=kadapter.gin --gin_file=models/gpt2_tiny.gin \\
        --gin_file=runs/cpu_smoke.gin --months 2024-11,2024-12,2025-01 --data DATA_DIR \\
        --out OUT_DIR [--eval-matrix] [--trainer t5x] [--xla-cache DIR]

``--months`` is the chain of periods (:func:`tw_jax.time.parse_chain`): the snapshots it runs
through (``2024-11,2024-12,2025-01``: two periods), or the periods themselves
(``2024-11_2024-12,2024-12_2025-01``; in the 2021 layout ``0809,0910,1011``). Gin files and
bindings work as for ``tw-jax train`` (``--gin.KEY=VALUE`` too); the runner sets MODEL_DIR,
MIXTURE_OR_TASK_NAME, INITIAL_CHECKPOINT_PATH and DATA_DIR for each update itself. Writes
``OUT_DIR/results.jsonl`` (read it with ``tw-jax report OUT_DIR``), checkpoints under
``OUT_DIR/checkpoints/<method>/<period>/`` and progress under ``OUT_DIR/state/``; a rerun skips
finished periods. ``--data``, ``--out`` and ``--initial-checkpoint`` may be local or in a bucket
(``gs://``); they are resolved and checked here, once. See :mod:`tw_jax.lifelong.runner` for
the schedule and INITIAL. ``--trainer t5x`` trains every update with the real ``python -m
t5x.train`` (:mod:`tw_jax.t5x.lifelong`; ``bash tools/setup.sh t5x`` installs it), months chained
on T5X's checkpoints, scored by tw_jax's evaluators as with ``tw-jax train``. Compilations go
to JAX's persistent cache (``--xla-cache``, :mod:`tw_jax.runtime.compile_cache`): every month
after the first loads its train and scoring steps instead of compiling them.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from typing import Any

from tw_jax.cli_parser import add_gin_flags, chain_argument, gin_search_paths
from tw_jax.evaluate.groups import METRIC_GROUPS, TRAINS_ON
from tw_jax.io.cli_paths import input_path, output_path


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lifelong",
        help="train a method period after period and evaluate every update on the probes",
        description="Train a method period after period (INITIAL first) and score every update "
                    "on the probes; writes OUT_DIR/results.jsonl. A rerun skips finished "
                    "periods.",
    )
    add_gin_flags(parser, file_help="gin file (repeatable); the first names the method "
                                    "(kadapter.gin)")
    parser.add_argument("--months", required=True, type=chain_argument, metavar="P,P,...",
                        help="the chain of periods, in order: the snapshots it runs through "
                             "(2024-11,2024-12,2025-01), or the periods (2024-11_2024-12,"
                             "2024-12_2025-01; in the 2021 layout 0809,0910,1011)")
    parser.add_argument("--data", default=None, metavar="DATA_DIR", type=input_path,
                        help="the data folder, local or gs:// (default: gin DATA_DIR or "
                             "$TW_JAX_DATA_DIR)")
    parser.add_argument("--out", required=True, metavar="OUT_DIR", type=output_path,
                        help="results.jsonl, checkpoints/ and state/ go here (local or gs://)")
    parser.add_argument("--trainer", choices=("tw_jax", "t5x"), default="tw_jax",
                        help="who trains the updates: tw-jax train in this process (default), "
                             "or the real python -m t5x.train with gin/t5x/<method>.gin, "
                             "months chained on its checkpoints (needs setup.sh t5x)")
    parser.add_argument("--t5x-binding", action="append", default=[], metavar="KEY=VALUE",
                        help="with --trainer t5x: a gin binding for T5X's runs only, after the "
                             "--gin ones (train/utils.DatasetConfig.pack=False)")
    parser.add_argument("--eval-matrix", action="store_true",
                        help="score every checkpoint on every period's probes (Fig. 5)")
    parser.add_argument("--method", default=None,
                        help="method name in the results (default: the first gin file's stem); "
                             "bm25 or dpr: open book, INITIAL reading the passages tw-jax "
                             "probe-contexts retrieved for each month's probes")
    parser.add_argument("--train-on", choices=sorted(set(TRAINS_ON.values())), default=None,
                        help="training data of a method the runner does not know by name")
    parser.add_argument("--initial-checkpoint", default=None, metavar="PATH", type=input_path,
                        help="use this checkpoint as INITIAL instead of training one on the "
                             "first month's snapshot (orbax MODEL_DIR or Hugging Face folder)")
    parser.add_argument("--initial-gin-file", action="append", default=None, metavar="FILE",
                        help="gin files of INITIAL (default: initial.gin + the method's files "
                             "after the first)")
    parser.add_argument("--metrics", type=_csv, default=["ppl"], metavar="M,M",
                        help=f"metric groups, of {', '.join(METRIC_GROUPS)} (default ppl): "
                             "probe perplexities, EM/F1 of decoded objects, rank "
                             "classification, proper-noun perplexity, light-tuning")
    parser.add_argument("--eval-batch-size", type=int, default=32,
                        help="probes scored per batch (default 32)")
    parser.add_argument("--max-probes", type=int, default=None, metavar="N",
                        help="score only the first N probes of each category (smoke runs; CHANGED: "
                        "the first N of UPDATED then NEW, seqio's num_examples)")
    parser.add_argument("--beam-size", type=int, default=1,
                        help="qa: 1 decodes greedily, more runs beam search (default 1)")
    parser.add_argument("--max-new-tokens", type=int, default=10,
                        help="qa: longest decoded answer in tokens (default 10)")
    parser.add_argument("--propn-instances", type=int, default=10_000, metavar="N",
                        help="propn: blocks sampled per corpus and month (default 10000)")
    parser.add_argument("--propn-length", type=int, default=512, metavar="L",
                        help="propn: tokens per block (default 512)")
    parser.add_argument("--spacy-model", default="en_core_web_sm",
                        help="propn: spaCy pipeline that tags proper nouns")
    parser.add_argument("--xla-cache", default=None, metavar="DIR",
                        help="JAX's persistent compilation cache, so each month's update and "
                             "scoring load the first month's compiled steps (default: the "
                             "folder JAX is set to, else OUT_DIR/xla_cache; none: off)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tw_jax.lifelong.runner import LifelongError, LifelongOptions, run_lifelong
    from tw_jax.runtime import checkpoints, compile_cache, gin_setup
    from tw_jax.train import trainer as training
    from tw_jax.train.preemption import TrainingPreempted
    from tw_jax.train.resume_check import ResumeMismatchError

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not args.gin_file:
        print("tw-jax lifelong: error: pass at least one --gin_file", file=sys.stderr)
        return 2
    trainer = _trainer(args)
    if trainer is None:
        return 2
    compile_cache.choose(args.xla_cache, args.out)
    options = LifelongOptions(
        trainer=trainer,
        gin_files=args.gin_file,
        months=args.months,
        out_dir=args.out,
        data_dir=args.data,
        gin_bindings=args.gin_bindings,
        gin_search_paths=gin_search_paths(args),
        method=args.method,
        train_on=args.train_on,
        eval_matrix=args.eval_matrix,
        initial_checkpoint=args.initial_checkpoint,
        initial_gin_files=args.initial_gin_file,
        metrics=args.metrics,
        eval_batch_size=args.eval_batch_size,
        max_probes=args.max_probes,
        max_new_tokens=args.max_new_tokens,
        beam_size=args.beam_size,
        propn_instances=args.propn_instances,
        propn_length=args.propn_length,
        spacy_model=args.spacy_model,
    )
    try:
        summary = run_lifelong(options)
    except (LifelongError, gin_setup.GinConfigError, ResumeMismatchError) as error:
        print(f"tw-jax lifelong: error: {error}", file=sys.stderr)
        return 2
    except (training.TrainingDivergedError, checkpoints.CheckpointError,
            *_trainer_errors(args)) as error:
        print(f"tw-jax lifelong: error: {error}", file=sys.stderr)
        return 1
    except TrainingPreempted as stopped:
        print(f"lifelong: {stopped}")
        return 0
    trained = summary.trained_text() or "nothing (all finished)"
    print(f"lifelong {summary.method}: trained {trained}; scored {len(summary.evaluated)} "
          f"checkpoint x period pairs; {summary.appended} results appended to {summary.results}")
    for where, reason in sorted(summary.skipped.items()):
        print(f"  skipped {where}: {reason}")
    return 0


def _trainer(args: argparse.Namespace) -> Any:
    """The trainer ``--trainer`` names; None (after one line on stderr) when T5X is missing."""
    from tw_jax.lifelong.updates import TwJaxTrainer

    if args.trainer != "t5x":
        if args.t5x_binding:
            print("tw-jax lifelong: error: --t5x-binding is for --trainer t5x", file=sys.stderr)
            return None
        return TwJaxTrainer()
    if importlib.util.find_spec("t5x") is None:
        print("tw-jax lifelong: error: --trainer t5x needs T5X installed (bash tools/setup.sh "
              "t5x; docs/t5x.md)", file=sys.stderr)
        return None
    from tw_jax.runtime.gin_setup import GinConfigError
    from tw_jax.t5x.lifelong import T5XTrainer, t5x_gin_files

    try:  # the method has a T5X gin file: known before INITIAL trains
        t5x_gin_files(args.gin_file, gin_search_paths(args))
    except GinConfigError as error:
        print(f"tw-jax lifelong: error: {error}", file=sys.stderr)
        return None
    return T5XTrainer(gin_search_paths=gin_search_paths(args),
                      gin_bindings=[*args.gin_bindings, *args.t5x_binding])


def _trainer_errors(args: argparse.Namespace) -> tuple[type[Exception], ...]:
    if args.trainer != "t5x":
        return ()
    from tw_jax.t5x.checkpoints import T5XCheckpointError
    from tw_jax.t5x.lifelong import T5XTrainingError

    return (T5XTrainingError, T5XCheckpointError)
