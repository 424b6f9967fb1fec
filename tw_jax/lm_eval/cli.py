"""``tw-jax lm-eval-tasks`` (the probes as lm-eval tasks) and ``tw-jax lm-eval`` (lm-eval's own
command line with ``--model tw_jax`` registered).

    tw-jax lm-eval-tasks --data demo_out/data --out lm_eval_tasks
    tw-jax lm-eval --model tw_jax --model_args pretrained=HF_FOLDER \
        --tasks twiki_probes_0809 --include_path lm_eval_tasks --limit 8

Everything after ``lm-eval`` goes to lm-eval's entry point as it is (``lm-eval --help`` lists
it); lm-eval is imported only when that command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    tasks = subparsers.add_parser(
        "lm-eval-tasks", help="write every period's probes as lm-evaluation-harness tasks",
        description="Write lm-eval task configs (YAML) and documents (JSONL) for every period "
        "and probe category of a data folder: loglikelihood (the object after subject and "
        "relation), loglikelihood_rolling (the probe text) and generate_until (EM/F1) tasks "
        "named after the SeqIO tasks, with a group per period and twiki_probes for all; and "
        "the CKL LAMA sets, ECBD spans and EvolvingQA questions of DATA/ckl, DATA/ecbd and "
        "DATA/qa (or --ckl/--ecbd/--evolvingqa) where present. "
        "Use them with --include_path DIR (docs/lm_eval.md).")
    tasks.add_argument("--data", required=True, metavar="DATA",
                       help="data folder (DATA/<period>/probes/*.csv, as tw-jax build writes)")
    tasks.add_argument("--out", required=True, metavar="DIR", help="folder for the tasks")
    tasks.add_argument("--formats", default="text,object,object_gen",
                       help="comma-separated formats to write (default: all three)")
    tasks.add_argument("--max-gen-toks", type=int, default=16, dest="max_gen_toks",
                       help="tokens a generate_until task may write (default 16)")
    for benchmark, where in (("ckl", "ckl"), ("ecbd", "ecbd"), ("evolvingqa", "qa")):
        tasks.add_argument(f"--{benchmark}", default=None, metavar="DIR",
                           help=f"{benchmark} folder or zip to export instead of DATA/{where} "
                                "(an error if it holds none of its sets)")
    tasks.add_argument("--no-siblings", action="store_false", dest="siblings",
                       help="export the probes only (no CKL, ECBD, EvolvingQA tasks)")
    tasks.set_defaults(func=_export)

    run = subparsers.add_parser(
        "lm-eval", help="run lm-evaluation-harness with tw_jax models (--model tw_jax)",
        description="lm-evaluation-harness's command line (every argument passed through) "
        "with --model tw_jax registered: --model_args pretrained=HF_FOLDER or "
        "model_dir=MODEL_DIR[,step=N][,vocab=DIR][,batch_size=N]. Needs the lm-eval extra.",
        # every word is lm-eval's, --help included: no option of this parser starts with "-"
        add_help=False, prefix_chars="+")
    run.add_argument("lm_eval_args", nargs="*",
                     help="lm-eval's arguments (lm-eval --help)")
    run.set_defaults(func=_run)


def _export(args: argparse.Namespace) -> int:
    from tw_jax.lm_eval.export import export_all

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    folders = {"ckl": args.ckl, "ecbd": args.ecbd, "evolvingqa": args.evolvingqa}
    result = export_all(args.data, args.out, formats=formats, max_gen_toks=args.max_gen_toks,
                        folders=folders, siblings=args.siblings)
    exported = result.probes
    periods = sorted({t.period.name for t in exported})
    if exported:
        print(f"{len(exported)} lm-eval tasks of {len(periods)} periods in {Path(args.out)}: "
              f"--include_path {Path(args.out)} --tasks twiki_probes (or twiki_probes_<period>, "
              "a task name)")
    from tw_jax.lm_eval.siblings import BENCHMARKS, GROUPS

    for benchmark in BENCHMARKS:
        tasks = [t for t in result.siblings.tasks if t.benchmark == benchmark]
        if tasks:
            skipped = sum({(t.source, t.output_type == "multiple_choice"):
                           sum(t.skipped.values()) for t in tasks}.values())
            left_out = f", {skipped} rows left out (siblings.json)" if skipped else ""
            print(f"{len(tasks)} {benchmark} tasks: --tasks {GROUPS[benchmark]}{left_out}")
    return 0


def run_lm_eval(argv: list[str]) -> None:
    """lm-eval's CLI on ``argv`` (its arguments), with the tw_jax model registered."""
    try:
        from lm_eval.__main__ import cli_evaluate
    except ImportError as error:
        from tw_jax.errors import UsageError

        raise UsageError("lm-evaluation-harness is not installed: pip install "
                         "'tw-jax[lm-eval]' (or bash tools/setup.sh test)") from error
    import tw_jax.lm_eval.model  # noqa: F401  (registers --model tw_jax)

    _log_to_this_stderr()
    saved = sys.argv
    sys.argv = ["lm-eval", *argv]
    try:
        cli_evaluate()
    finally:
        sys.argv = saved


def _log_to_this_stderr() -> None:
    """lm-eval attaches its console handler once per process, to the ``sys.stderr`` of its first
    run; a later run in the same process (a notebook cell, a test) whose stderr was replaced
    since (and the old one closed) would print '--- Logging error ---' tracebacks instead of its
    log lines. Its handlers write to this run's stderr."""
    import logging

    for handler in logging.getLogger("lm_eval").handlers:
        if type(handler) is logging.StreamHandler and handler.stream is not sys.stderr:
            with handler.lock:  # not setStream: it flushes the old stream, which may be closed
                handler.stream = sys.stderr


def _run(args: argparse.Namespace) -> int:
    argv = list(args.lm_eval_args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        run_lm_eval(argv)
    except SystemExit as done:  # argparse's --help and usage errors
        return int(done.code or 0) if not isinstance(done.code, str) else 2
    return 0
