"""``tw-jax train`` and ``compile``: gin files and bindings, T5X style (``eval`` and ``infer``,
built the same way, are :mod:`tw_jax.evaluate.eval_cli`).

    tw-jax train --gin_file=kadapter.gin --gin_file=models/t5_tiny.gin \\
        --gin_file=runs/cpu_smoke.gin --gin.MODEL_DIR=/tmp/run --gin.TRAIN_STEPS=20
    tw-jax compile --topology v5e:4x4 --gin_file=kadapter.gin     # fits? how fast? (no TPU)

``--gin_file`` may repeat (later files override earlier ones); ``--gin.KEY=VALUE`` binds one
key after all files (``--gin_bindings='KEY = VALUE'`` is the same); ``--gin_search_paths``
adds folders to look for gin files in. A configuration error (a missing file, a misspelt
binding, an unset macro) is reported in one line and exits with status 2; so is a checkpoint
that cannot be written (a full disk: training stops at that save) or another output (metrics).
A diverged run or a checkpoint that cannot be read exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys

from tw_jax.cli_parser import without_gin_trail
from tw_jax.runtime.gin_command import add_gin_command, parse_gin


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    add_gin_command(subparsers, "train", "train a model with a gin configuration (T5X style)",
                    _run)
    compile_parser = add_gin_command(
        subparsers, "compile",
        "compile a run's train, score or decode step for a TPU topology ahead of time, on any "
        "machine: memory per chip against its HBM, XLA's FLOPs and estimated step time; the "
        "last line of stdout is JSON; exit 1 when it does not fit",
        _run,
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
    from tw_jax.runtime import checkpoints, distributed, gin_setup
    from tw_jax.train import trainer
    from tw_jax.train.gin_config import train_config
    from tw_jax.train.resume_check import ResumeMismatchError

    command = args.command_name
    required = gin_setup.MACROS_COMPILE if command == "compile" else gin_setup.MACROS_TRAIN
    failed = parse_gin(args, required)
    if failed is not None:
        return failed
    if command == "compile":
        return _compile(args)
    try:
        config = train_config()
    except gin_setup.GinConfigError as error:
        print(f"tw-jax {command}: error: {error}", file=sys.stderr)
        return 2
    try:
        result = trainer.train(config)
    except (trainer.TrainingDivergedError, checkpoints.CheckpointError) as error:
        print(f"tw-jax {command}: error: {error}", file=sys.stderr)
        return 1
    except checkpoints.CheckpointSaveError as error:  # a full disk: an output, like OutputError
        print(f"tw-jax {command}: error: {error}", file=sys.stderr)
        return 2
    except (distributed.DistributedStartError, ResumeMismatchError) as error:
        print(f"tw-jax {command}: error: {error}", file=sys.stderr)
        return 2
    if result.preempted:
        print(f"{result.preempted}: stopped at step {result.step} with a checkpoint "
              f"(started at step {result.start_step}); run again to resume")
    else:
        print(f"trained to step {result.step} (started at step {result.start_step})")
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
        print(f"tw-jax compile: error: {without_gin_trail(error)}", file=sys.stderr)
        return 2
    print("\n".join(aot.summary_lines(report)))
    print(json.dumps(report, sort_keys=True))
    if not report["fits"]:
        print(f"tw-jax compile: {report['advice']}", file=sys.stderr)
        return 1
    return 0
