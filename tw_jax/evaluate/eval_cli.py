"""``tw-jax eval`` and ``tw-jax infer``: a checkpoint on a task, with the run's own gin files.

    tw-jax eval  --gin_file=diff.gin --gin_file=models/gpt2_tiny.gin --gin.MODEL_DIR=/tmp/run
    tw-jax infer --gin_file=diff.gin --gin.MODEL_DIR=gs://b/run --gin.tw_jax.evaluate.infer.max_examples=5

The flags are ``tw-jax train``'s (:func:`tw_jax.runtime.gin_command.add_gin_command`); what runs is
:mod:`tw_jax.evaluate.task_eval`. ``eval`` runs ``seqio.Evaluator`` on a task or mixture and
prints one line per task with its metrics: ``perplexity`` (the mean of per-example
perplexities: on a probe task, the lifelong report's probe perplexity), ``token_perplexity``
(``exp`` of the mean token loss), ``examples``, ``tokens``, and ``em``/``f1`` where the task
scores generated answers; ``docs/metrics.md`` defines them.
"""

from __future__ import annotations

import argparse
import sys

from tw_jax.runtime.gin_command import add_gin_command, parse_gin


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    add_gin_command(subparsers, "eval", "evaluate a checkpoint on a task (perplexity per "
                    "example and per token, loss, task metrics)", _run)
    add_gin_command(subparsers, "infer", "write greedy predictions of a checkpoint as JSONL",
                    _run)


def _run(args: argparse.Namespace) -> int:
    from tw_jax.evaluate import task_eval
    from tw_jax.runtime import checkpoints, distributed, gin_setup

    failed = parse_gin(args, gin_setup.MACROS_EVAL)
    if failed is not None:
        return failed
    try:
        if args.command_name == "eval":
            summary = task_eval.evaluate()
            for task, values in summary["tasks"].items():
                print(f"{task} step={summary['step']} "
                      + " ".join(f"{k}={v:g}" for k, v in values.items()))
        else:
            print(f"predictions: {task_eval.infer()}")
    except checkpoints.CheckpointError as error:
        print(f"tw-jax {args.command_name}: error: {error}", file=sys.stderr)
        return 1
    except distributed.DistributedStartError as error:
        print(f"tw-jax {args.command_name}: error: {error}", file=sys.stderr)
        return 2
    return 0
