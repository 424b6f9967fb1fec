"""``tw-jax train``, ``tw-jax eval`` and ``tw-jax infer``: gin files and bindings, T5X style.

    tw-jax train --gin_file=kadapter.gin --gin_file=models/t5_tiny.gin \\
        --gin_file=runs/cpu_smoke.gin --gin.MODEL_DIR=/tmp/run --gin.TRAIN_STEPS=20

``--gin_file`` may repeat (later files override earlier ones); ``--gin.KEY=VALUE`` binds one
key after all files (``--gin_bindings='KEY = VALUE'`` is the same); ``--gin_search_paths``
adds folders to look for gin files in. A configuration error (a missing file, a misspelt
binding, an unset macro) is reported in one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from tw_jax.cli_parser import OneLineErrorParser

_GIN_PREFIX = "--gin."


class _GinArgumentParser(OneLineErrorParser):
    """Rewrites ``--gin.KEY=VALUE`` (and ``--gin.KEY VALUE``) into ``--gin_bindings KEY=VALUE``
    before parsing, as T5X's absl flags accept them."""

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        rewritten: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            if arg.startswith(_GIN_PREFIX):
                key_value = arg[len(_GIN_PREFIX):]
                if "=" not in key_value and index + 1 < len(args):
                    index += 1
                    key_value = f"{key_value}={args[index]}"
                rewritten += ["--gin_bindings", key_value]
            else:
                rewritten.append(arg)
            index += 1
        return super().parse_known_args(rewritten, namespace)


def _add_command(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    parser.__class__ = _GinArgumentParser
    parser.add_argument("--gin_file", action="append", default=[], metavar="FILE",
                        help="gin file (repeatable; found as given, in --gin_search_paths, or "
                             "among the shipped files, e.g. kadapter.gin, models/t5_tiny.gin)")
    parser.add_argument("--gin_bindings", action="append", default=[], metavar="KEY=VALUE",
                        help="one gin binding, after the files (also --gin.KEY=VALUE)")
    parser.add_argument("--gin_search_paths", action="append", default=[], metavar="DIR",
                        help="folder to look for gin files in (repeatable, comma-separated ok)")
    parser.set_defaults(func=_run, command_name=name)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    _add_command(subparsers, "train", "train a model with a gin configuration (T5X style)")
    _add_command(subparsers, "eval", "evaluate a checkpoint on a task (loss, perplexity, metrics)")
    _add_command(subparsers, "infer", "write greedy predictions of a checkpoint as JSONL")


def _run(args: argparse.Namespace) -> int:
    from tw_jax.train import gin_setup

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    search = [p for item in args.gin_search_paths for p in item.split(",") if p]
    command = args.command_name
    required = gin_setup.MACROS_TRAIN if command == "train" else gin_setup.MACROS_EVAL
    if not args.gin_file:
        print(f"tw-jax {command}: error: pass at least one --gin_file", file=sys.stderr)
        return 2
    try:
        gin_setup.parse(args.gin_file, args.gin_bindings, search, required)
    except gin_setup.GinConfigError as error:
        print(f"tw-jax {command}: error: {error}", file=sys.stderr)
        return 2
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
