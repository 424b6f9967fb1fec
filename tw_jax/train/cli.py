"""``tw-jax train``, ``eval``, ``infer`` and ``compile``: gin files and bindings, T5X style.

    tw-jax train --gin_file=kadapter.gin --gin_file=models/t5_tiny.gin \\
        --gin_file=runs/cpu_smoke.gin --gin.MODEL_DIR=/tmp/run --gin.TRAIN_STEPS=20
    tw-jax compile --topology v5e:4x4 --gin_file=kadapter.gin     # fits? how fast? (no TPU)

``--gin_file`` may repeat (later files override earlier ones); ``--gin.KEY=VALUE`` binds one
key after all files (``--gin_bindings='KEY = VALUE'`` is the same); ``--gin_search_paths``
adds folders to look for gin files in. A configuration error (a missing file, a misspelt
binding, an unset macro) is reported in one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from tw_jax.cli_parser import add_gin_flags, gin_search_paths


def _add_command(
    subparsers: argparse._SubParsersAction, name: str, help_text: str
) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    add_gin_flags(parser)
    parser.set_defaults(func=_run, command_name=name)
    return parser


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    _add_command(subparsers, "train", "train a model with a gin configuration (T5X style)")
    _add_command(subparsers, "eval", "evaluate a checkpoint on a task (loss, perplexity, metrics)")
    _add_command(subparsers, "infer", "write greedy predictions of a checkpoint as JSONL")
    compile_parser = _add_command(
        subparsers, "compile",
        "compile a run's train, score or decode step for a TPU topology ahead of time, on any "
        "machine: memory per chip against its HBM, XLA's FLOPs and estimated step time; the "
        "last line of stdout is JSON; exit 1 when it does not fit",
    )
    compile_parser.add_argument("--topology", required=True, metavar="TOPO",
                                help="TPU slice as GENERATION:AxB[xC], e.g. v5e:4x4, v4:2x2x1, "
                                     "v5p:2x2x1, v6e:4x4")
    compile_parser.add_argument("--num-slices", "--num_slices", dest="num_slices", type=int, default=1, metavar="N",
                                help="slices joined by the data-centre network (default 1)")
    compile_parser.add_argument("--step", default="train", choices=("train", "score", "decode"),
                                help="the trainer's step, tw-jax eval's scoring step or tw-jax "
                                     "infer's greedy decoding (default train)")
    compile_parser.add_argument("--hbm-gib", "--hbm_gib", dest="hbm_gib", type=float, default=None, metavar="GIB",
                                help="HBM per chip in GiB (default: the generation's)")
    compile_parser.add_argument("--effort", default="fast", choices=("fast", "full"),
                                help="XLA's optimisation effort: fast (default; gives XLA's "
                                     "time estimate) or full (exactly as tw-jax train compiles)")
    compile_parser.add_argument("--prompt-length", "--prompt_length", dest="prompt_length", type=int, default=None, metavar="N",
                                help="decode: prompt length (default: the inputs length, else "
                                     "the targets length)")
    compile_parser.add_argument("--max-new-tokens", "--max_new_tokens", dest="max_new_tokens", type=int, default=None, metavar="N",
                                help="decode: tokens to generate (default: the targets length)")


def _run(args: argparse.Namespace) -> int:
    from tw_jax.train import gin_setup

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    search = gin_search_paths(args)
    command = args.command_name
    required = {"train": gin_setup.MACROS_TRAIN, "compile": gin_setup.MACROS_COMPILE}.get(
        command, gin_setup.MACROS_EVAL
    )
    if not args.gin_file:
        print(f"tw-jax {command}: error: pass at least one --gin_file", file=sys.stderr)
        return 2
    try:
        gin_setup.parse(args.gin_file, args.gin_bindings, search, required)
    except gin_setup.GinConfigError as error:
        print(f"tw-jax {command}: error: {error}", file=sys.stderr)
        return 2
    if command == "compile":
        return _compile(args)
    from tw_jax.train import checkpoints, distributed, evaluation, trainer

    try:
        if command == "train":
            result = trainer.train()
            if result["preempted"]:
                print(f"{result['preempted']}: stopped at step {result['step']} with a checkpoint "
                      f"(started at step {result['start_step']}); run again to resume")
            else:
                print(f"trained to step {result['step']} (started at step {result['start_step']})")
        elif command == "eval":
            metrics = evaluation.evaluate()
            print(" ".join(f"{k}={v}" for k, v in metrics.items()))
        else:
            print(f"predictions: {evaluation.infer()}")
    except (trainer.TrainingDivergedError, checkpoints.CheckpointError) as error:
        print(f"tw-jax {command}: error: {error}", file=sys.stderr)
        return 1
    except distributed.DistributedStartError as error:
        print(f"tw-jax {command}: error: {error}", file=sys.stderr)
        return 2
    return 0


def _compile(args: argparse.Namespace) -> int:
    import jax

    from tw_jax.train import aot

    # A persistent compilation cache is for this machine's programs, not another chip's.
    jax.config.update("jax_enable_compilation_cache", False)

    try:
        report = aot.compile_for_topology(
            topology=args.topology, num_slices=args.num_slices, step=args.step,
            hbm_bytes=int(args.hbm_gib * aot.GIB) if args.hbm_gib else None,
            effort=args.effort, prompt_length=args.prompt_length,
            max_new_tokens=args.max_new_tokens,
        )
    except aot.CompileError as error:
        # gin appends "In call to configurable ..." on a line of its own.
        print(f"tw-jax compile: error: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    print("\n".join(aot.summary_lines(report)))
    print(json.dumps(report, sort_keys=True))
    if not report["fits"]:
        print(f"tw-jax compile: {report['advice']}", file=sys.stderr)
        return 1
    return 0
