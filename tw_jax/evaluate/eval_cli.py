"""``tw-jax eval`` and ``tw-jax infer``: a checkpoint on a task, with the run's own configuration.

    tw-jax eval  --gin.MODEL_DIR=demo_out/runs/checkpoints/diff/0809 \
        --task twiki_probes_0809_updated --split validation
    tw-jax eval  --gin_file=diff.gin --gin_file=models/gpt2_tiny.gin --gin.MODEL_DIR=/tmp/run

With ``--gin.MODEL_DIR=DIR`` and no ``--gin_file``, the run's own ``DIR/config.gin`` (which the
trainer writes) is the configuration (:mod:`tw_jax.evaluate.run_config`), as T5X's
``--gin_file=MODEL_DIR/config.gin``; a checkpoint that does not fit the configured model is
one line saying so. ``--task`` and ``--split`` pick what is evaluated. The flags are otherwise
``tw-jax train``'s (:func:`tw_jax.runtime.gin_command.add_gin_command`); what runs is
:mod:`tw_jax.evaluate.task_eval`. ``eval`` runs ``seqio.Evaluator`` on a task or mixture and
prints one line per task with its metrics: ``perplexity`` (the mean of per-example
perplexities: on a probe task, the lifelong report's probe perplexity), ``token_perplexity``
(``exp`` of the mean token loss), ``examples``, ``tokens``, and ``em``/``f1`` where the task
scores generated answers; ``docs/metrics.md`` defines them.
"""

from __future__ import annotations

import argparse
import json
import sys

from tw_jax.cli_parser import without_gin_trail
from tw_jax.runtime.gin_command import add_gin_command, parse_gin

_RUN_NOTE = ("A trained run is one flag: --gin.MODEL_DIR=DIR with no --gin_file reads the "
             "configuration it was trained with, DIR/config.gin (tw-jax demo writes runs under "
             "OUT/runs/checkpoints/METHOD/MONTH; its tasks are under OUT/data: "
             "--gin.DATA_DIR=OUT/data, listed by tw-jax tasks --data OUT/data).")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    for name, help_text, task_help in (
        ("eval", "evaluate a checkpoint on a task (perplexity per example and per token, loss, "
         "task metrics)", "e.g. twiki_probes_0809_updated: the report's UPDATED perplexity"),
        ("infer", "write greedy predictions of a checkpoint as JSONL",
         "one with inputs (a prompt), e.g. twiki_probes_0809_updated_object: subject and "
         "relation, the object to write"),
    ):
        parser = add_gin_command(subparsers, name, help_text, _run)
        parser.description = f"{help_text}. {_RUN_NOTE}"
        parser.add_argument("--task", metavar="NAME",
                            help=f"task or mixture (sets MIXTURE_OR_TASK_NAME), {task_help}")
        parser.add_argument("--split", metavar="SPLIT",
                            help="split to read: validation (the run's EVAL_SPLIT by default) "
                            "or test")
        if name == "eval":
            parser.add_argument("--per-probe", metavar="FILE.jsonl", dest="per_probe",
                                help="also write each example's id, category, text, "
                                "log-likelihood, scored tokens and whether greedy decoding "
                                "gives the target, one JSON line each")


def _run(args: argparse.Namespace) -> int:
    from tw_jax.evaluate import run_config, task_eval
    from tw_jax.runtime import checkpoints, distributed, gin_setup

    given_files = list(args.gin_file)
    args.gin_file = run_config.gin_files(args.command_name, given_files, args.gin_bindings)
    if not given_files:
        print(f"tw-jax {args.command_name}: using the run's own configuration, "
              f"{args.gin_file[0]}", file=sys.stderr)
    args.gin_bindings = [*args.gin_bindings,
                         *run_config.shortcut_bindings(args.command_name, args.task, args.split)]
    if getattr(args, "per_probe", None):
        args.gin_bindings.append(
            f"tw_jax.evaluate.evaluate.per_probe_path={json.dumps(args.per_probe)}")
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
    except checkpoints.CheckpointMismatchError as error:
        hint = run_config.mismatch_hint(args.command_name, given_files, args.gin_bindings)
        print(f"tw-jax {args.command_name}: error: {without_gin_trail(error)}; {hint}",
              file=sys.stderr)
        return 2
    except checkpoints.CheckpointError as error:
        print(f"tw-jax {args.command_name}: error: {without_gin_trail(error)}", file=sys.stderr)
        return 1
    except distributed.DistributedStartError as error:
        print(f"tw-jax {args.command_name}: error: {error}", file=sys.stderr)
        return 2
    return 0
