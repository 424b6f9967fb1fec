"""The ``tw-jax`` command line: one subcommand per stage.

Each stage module exposes ``add_parser(subparsers)``, which registers its arguments and sets
``func``; this file only wires them together, so stages stay importable and testable alone.
Errors that name a file and a record (:class:`DumpError`), an output that cannot be written
(:class:`OutputError`: a full disk, a read-only folder, a folder another run holds) or a path
that cannot be used (:class:`StorageError`: a missing bucket or object, refused credentials)
are printed plainly, without a traceback, and exit with status 2.

A command's output folder (``--out``, ``--model-dir``) is held for the run
(:func:`tw_jax.io.output_claim.claimed`): it must be writable, a second run on it refuses, and
temporaries that dead runs left in it are removed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from tw_jax.cli_parser import OneLineErrorParser, without_gin_trail

# (module, attribute) of each stage's add_parser, imported lazily so `tw-jax --help` stays fast
# and a stage's heavy dependencies (TensorFlow, Beam, JAX) load only when that stage runs.
_STAGES: tuple[str, ...] = (
    "tw_jax.sample_world.cli",
    "tw_jax.preprocess.diffset.cli",
    "tw_jax.preprocess.probes.cli",
    "tw_jax.preprocess.ssm.cli",
    "tw_jax.preprocess.build.cli",
    "tw_jax.tasks_cli",
    "tw_jax.cache_cli",
    "tw_jax.evaluate.report_cli",
    "tw_jax.lifelong_cli",
    "tw_jax.train.cli",
    "tw_jax.evaluate.eval_cli",
    "tw_jax.evaluate.probe_contexts_cli",
    "tw_jax.benchmarks.ckl_cli",
    "tw_jax.benchmarks.ecbd_cli",
    "tw_jax.benchmarks.evolvingqa_cli",
    "tw_jax.t5x.cli",
    "tw_jax.lm_eval.cli",
    "tw_jax.demo",
)


# One example line per command, shown at the end of its --help (kept here, in one table, so
# every command has one and they read alike). They run on what the examples before them write
# (tests/test_examples.py checks it): world/ is what `tw-jax sample-world --out world/` writes,
# demo_out/ what `tw-jax demo` writes, runs/t5 what the `train` example trains; only ckl/ (CKL's
# released files) is downloaded.
_WP, _XML = "world/wikipedia/enwiki-", "-pages-articles.xml.bz2"
_WD, _JSON = "world/wikidata/wikidata-", "-all.json.bz2"
_T5_VOCAB = "demo_out/data/vocab/t5/spiece.model"
_TINY_T5 = "--gin_file=kadapter.gin --gin_file=models/t5_tiny.gin --gin_file=runs/cpu_smoke.gin"
EXAMPLES: dict[str, str] = {
    "sample-world": "tw-jax sample-world --out world/ --seed 0",
    "diffset": f"tw-jax diffset --old {_WP}20210801{_XML} --new {_WP}20210901{_XML} "
               "--out data/0809/diffset --workers 0",
    "probes": f"tw-jax probes --old {_WD}20210801{_JSON} --new {_WD}20210901{_JSON} "
              f"--wikipedia {_WP}20210901{_XML} --diffset data/0809/diffset "
              "--out data/0809/probes --unchanged-rate 1",
    "ssm": "tw-jax ssm --in data/0809/diffset --out data/0809/ssm --inputs diffset,full",
    "build": "tw-jax build --dumps world/ --data data/ --unchanged-rate 1 --workers 0",
    "tasks": "tw-jax tasks --data demo_out/data --match 0809_lm",
    "cache": "tw-jax cache --data demo_out/data --tasks twiki_diffset_0809_ssm,twiki_probes_0809",
    "report": "tw-jax report runs/kadapter --out report/",
    "lifelong": "tw-jax lifelong --gin_file=kadapter.gin --gin_file=models/gpt2_tiny.gin "
                "--gin_file=runs/cpu_smoke.gin --months 0809,0910 --data demo_out/data "
                "--out runs/kadapter",
    "train": f"tw-jax train {_TINY_T5} --gin.MODEL_DIR=runs/t5 --gin.DATA_DIR=demo_out/data",
    "compile": "tw-jax compile --topology v5e:4x4 --gin_file=kadapter.gin",
    "eval": "tw-jax eval --gin.MODEL_DIR=demo_out/runs/checkpoints/diff/0809 "
            "--task twiki_probes_0809_updated --split validation",
    "infer": "tw-jax infer --gin.MODEL_DIR=demo_out/runs/checkpoints/diff/0809 "
             "--task twiki_probes_0809_updated_object "
             "--split validation --gin.TASK_FEATURE_LENGTHS=\"{'inputs': 32, 'targets': 8}\"",
    "ckl build-lama": f"tw-jax ckl build-lama --wikidata {_WD}20210901{_JSON} --out il/",
    "ckl eval": "tw-jax ckl eval --data il/ --out results/ --model-dir runs/t5 "
                f"--gin_file=runs/t5/config.gin --method kadapter --vocab {_T5_VOCAB}",
    "ckl train": "tw-jax ckl train --data ckl/ --task ckl_recent_news_ssm --gin_file=ckl.gin "
                 "--gin.MODEL_DIR=runs/ckl --epochs 4",
    "ckl phases": "tw-jax ckl phases --data ckl/ --out phases/ --corpus p1.csv,p2.csv "
                  "--new p1_new.csv,p2_new.csv",
    "ckl eval-phases": "tw-jax ckl eval-phases --data phases/ --lifelong runs/phases "
                       "--method vanilla --gin_file=vanilla.gin",
    "ecbd build": f"tw-jax ecbd build --wikidata {_WD}20211101{_JSON} --wikipedia "
                  f"{_WP}20211101{_XML} --out ecbd/ --years all --min-words 100",
    "ecbd eval": "tw-jax ecbd eval --data ecbd/ --out ecbd_eval/ --model-dir runs/t5 "
                 f"--gin_file=runs/t5/config.gin --vocab {_T5_VOCAB}",
    "ecbd report": "tw-jax ecbd report ecbd_eval/",
    "evolvingqa build": f"tw-jax evolvingqa build --dumps {_WP}2021*{_XML} --out eqa/ "
                        "--min-changed-chars 100",
    "evolvingqa generate": "tw-jax evolvingqa generate --data eqa/ --probes demo_out/data",
    "evolvingqa train": "tw-jax evolvingqa train --stage continual --data eqa/ --month 0809 "
                        "--model-dir m/0809 --gin_file=models/t5_tiny.gin "
                        f"--gin_file=runs/cpu_smoke.gin --t5-vocab {_T5_VOCAB}",
    "evolvingqa eval": "tw-jax evolvingqa eval --qa eqa/qa --checkpoint m/0809-qa --month 0809 "
                       f"--method full --out results/ --t5-vocab {_T5_VOCAB}",
    "evolvingqa retrieve": "tw-jax evolvingqa retrieve --data eqa/ --month 0809 --retriever bm25 "
                           "--k 20 --out retrieved/",
    "probe-contexts": "tw-jax probe-contexts --data demo_out/data --month 0809 --retriever bm25 "
                      "--k 5 --context-words 100",
    "t5x-checkpoint to-t5x": "tw-jax t5x-checkpoint to-t5x --from runs/t5 --out t5x_runs/start",
    "t5x-checkpoint from-t5x": "tw-jax t5x-checkpoint from-t5x --from "
                               "t5x_runs/kadapter/checkpoint_4 --out runs/kadapter-t5x",
    "lm-eval-tasks": "tw-jax lm-eval-tasks --data demo_out/data --out lm_eval_tasks",
    "lm-eval": "tw-jax lm-eval --model tw_jax --model_args pretrained=demo_out/hf_gpt2 "
               "--include_path lm_eval_tasks --tasks twiki_probes_0809 --limit 8",
    "demo": "tw-jax demo --out demo_out",
}


def _add_examples(parser: argparse.ArgumentParser, name: str = "") -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.metavar = "COMMAND" if not name else "SUBCOMMAND"
            for command, sub in action.choices.items():
                _add_examples(sub, f"{name} {command}".strip())
    if name in EXAMPLES and not parser.epilog:
        parser.epilog = f"example: {EXAMPLES[name]}"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="tw-jax",
        description="TemporalWiki and its siblings in JAX: corpora, probes, training, evaluation.",
    )
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback behind a one-line error (also TW_JAX_DEBUG=1); "
                        "may come after the command too")
    parser.add_argument("--verbose", action="store_true",
                        help="keep the INFO logging of absl, orbax and TensorFlow (off by default)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in _STAGES:
        importlib.import_module(module_name).add_parser(subparsers)
    _add_examples(parser)
    return parser


def _option_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """``{dest: how the command line spells it}`` over the parser and its subcommands."""
    names: dict[str, str] = {}
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its actions only there
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                for dest, name in _option_names(sub).items():
                    names.setdefault(dest, name)
        elif action.option_strings:
            names.setdefault(action.dest, max(action.option_strings, key=len))
        else:
            names.setdefault(action.dest, str(action.metavar or action.dest))
    return names


def _output_folders_claimed(args: argparse.Namespace,
                            names: dict[str, str] | None = None) -> contextlib.ExitStack:
    from tw_jax.errors import UsageError
    from tw_jax.io.cli_paths import overlap
    from tw_jax.io.output_claim import claimed

    names = names or {}
    problem = overlap({names.get(dest, f"--{dest}"): value for dest, value in vars(args).items()})
    if problem:  # before the claim: nothing is written into an output that is an input
        raise UsageError(problem)
    stack = contextlib.ExitStack()
    sub = getattr(args, f"{args.command}_command", None)  # ckl build, evolvingqa train, ...
    command = " ".join(["tw-jax", args.command, *([sub] if sub else [])])
    with stack:
        for name in ("out", "model_dir"):
            folder = getattr(args, name, None)
            if isinstance(folder, str):
                stack.enter_context(claimed(folder, command))
        return stack.pop_all()


_GLOBAL_FLAGS = ("--debug", "--verbose")


def _global_flags_first(argv: Sequence[str]) -> list[str]:
    """``--debug`` / ``--verbose`` anywhere on the line, as if given before the command."""
    flags = [arg for arg in argv if arg in _GLOBAL_FLAGS]
    return [*flags, *(arg for arg in argv if arg not in _GLOBAL_FLAGS)]


def _quiet_logs() -> None:
    """tw_jax's own lines only: absl (orbax logs through it) and TensorFlow's Python logging
    at WARNING. ``--verbose`` keeps their INFO lines."""
    import logging

    for name in ("absl", "tensorflow", "orbax"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _import_tensorflow_quietly() -> None:
    """TensorFlow's C++ start-up lines ("All log messages before absl::InitializeLog()...",
    the CUDA probes of a CPU machine, CPU features) go straight to file descriptor 2 while it loads,
    before any logging setting applies (TF_CPP_MIN_LOG_LEVEL no longer covers them). Load it
    once with descriptor 2 on /dev/null; an import error still raises (its Python traceback is
    printed after the descriptor is restored). ``--verbose`` keeps the lines."""
    import importlib.util

    if "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is None:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # later INFO lines of TensorFlow's own
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w", encoding="utf-8") as null:
            os.dup2(null.fileno(), 2)
            try:
                import tensorflow

                # Its first look for devices (a tf.data pipeline's) tries CUDA and logs the
                # failure on a CPU machine ("failed call to cuInit"): look now. It lists
                # devices only; no GPU memory is taken.
                tensorflow.config.list_physical_devices("GPU")
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


class _QuietTensorFlow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """TensorFlow imported quietly (:func:`_import_tensorflow_quietly`) the first time anything
    imports it, wherever that is: a command that never uses it (``diffset``, ``probes``,
    ``build``, ``sample-world``, ``report``) never pays its 8-10 CPU-seconds and 850 MB, and one
    that does still starts without TensorFlow's C++ lines."""

    def __init__(self) -> None:
        self._spec: Any = None

    def install(self) -> None:
        if "tensorflow" not in sys.modules and self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        """A spec whose loading is the quiet import; a mere look (``importlib.util.find_spec``,
        as etils asks whether TensorFlow is installed) imports nothing."""
        if name != "tensorflow":
            return None
        found = importlib.machinery.PathFinder.find_spec(name, path)
        if found is None:
            return None  # not installed: the import machinery says so as it would have
        return importlib.util.spec_from_loader(name, self, origin=found.origin)

    def create_module(self, spec: Any) -> Any:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        _import_tensorflow_quietly()  # the real import, with descriptor 2 on /dev/null
        self._spec = sys.modules["tensorflow"].__spec__
        return sys.modules["tensorflow"]  # already imported: hand the machinery the module

    def exec_module(self, module: Any) -> None:
        module.__spec__ = self._spec  # the machinery set ours; TensorFlow's own stays


_quiet_tensorflow = _QuietTensorFlow()


def _verbose_logs() -> None:
    """Every library's INFO lines on stderr (absl's handler is only installed by absl.app)."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for name in ("absl", "tensorflow", "orbax"):
        logging.getLogger(name).setLevel(logging.INFO)


# Commands a rerun continues: a signal outside the training loop (which saves a checkpoint on
# its own) stops them cleanly, exit 0, like a signal inside it.
_RESUMABLE = ("train", "lifelong")


@contextlib.contextmanager
def _stopping_on_signals(command: str) -> Iterator[None]:
    """For the resumable commands, from their start: SIGTERM / SIGINT unwind the command
    (locks released, nothing half-written: outputs are written atomically) instead of killing
    it; the training loop's own handler (:mod:`tw_jax.train.preemption`) takes over inside."""
    if command not in _RESUMABLE or threading.current_thread() is not threading.main_thread():
        yield
        return

    from tw_jax.train.preemption import request_stop

    def stop(number: int, _frame: object) -> None:
        raise request_stop(signal.Signals(number).name)

    previous = {number: signal.signal(number, stop) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def main(argv: Sequence[str] | None = None) -> int:
    from tw_jax.errors import DumpError, OutputError, UsageError, tensorflow_message
    from tw_jax.io.paths import StorageError
    from tw_jax.text.spacy_pipeline import SpacyModelError

    parser = build_parser()
    args = parser.parse_args(_global_flags_first(sys.argv[1:] if argv is None else argv))
    debug = args.debug or os.environ.get("TW_JAX_DEBUG", "") not in ("", "0")
    if args.verbose:
        _verbose_logs()
    else:
        _quiet_logs()
        _quiet_tensorflow.install()
    from tw_jax.train.preemption import StopRequested, requested_stop

    try:
        with _stopping_on_signals(args.command), _output_folders_claimed(
                args, _option_names(parser)):
            result = args.func(args)
    except StopRequested as stopped:
        _print_stopped(args.command, stopped.signal_name)
        return 0
    except (DumpError, OutputError, SpacyModelError, StorageError, UsageError) as error:
        if debug:
            raise
        print(f"tw-jax {args.command}: error: {without_gin_trail(error)}", file=sys.stderr)
        return 2
    except Exception as error:
        if debug or not _is_data_loss(error):
            raise
        # a read this command does not name (tw_jax.tasks.damaged names the file where it can)
        print(f"tw-jax {args.command}: error: an input file is damaged or cut "
              f"({tensorflow_message(error)}); run again with --debug to see where it was read",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"tw-jax {args.command}: interrupted; no partial output was left behind.",
            file=sys.stderr,
        )
        return 130
    if requested_stop() is not None:
        # the signal's exception was dropped (it came during a garbage-collection callback)
        # and the command ran to its end: say so rather than pass the signal over in silence
        _print_stopped(args.command, requested_stop())
    return int(result or 0)


def _is_data_loss(error: BaseException) -> bool:
    """TensorFlow's ``DataLossError`` (a damaged TFRecord), told apart without importing it."""
    kind = type(error)
    return kind.__name__ == "DataLossError" and kind.__module__.startswith("tensorflow")


def _print_stopped(command: str, signal_name: str) -> None:
    print(f"tw-jax {command}: stopped by {signal_name}; what finished is kept and nothing is "
          "half-written: run the same command again to go on", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
