"""``tw-jax tasks``: the SeqIO tasks and mixtures a data folder registers, and where they read.

A name given to ``--gin.MIXTURE_OR_TASK_NAME`` (or ``tw-jax eval``) comes from this list; with
no data folder set nothing is registered, and the command says so instead of printing nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from tw_jax.io.cli_paths import input_path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tasks",
        help="list the SeqIO tasks and mixtures of a data folder and the files they read",
        description="Registers the tasks of DATA (default $TW_JAX_DATA_DIR) and, with "
        "--published, of the released TemporalWiki files, then lists each task's splits and "
        "file patterns and each mixture's tasks and rates.",
    )
    parser.add_argument("--data", type=input_path, default=None, metavar="DIR",
                        help="a tw_jax data folder, local or gs:// (default: $TW_JAX_DATA_DIR)")
    parser.add_argument("--published", type=input_path, default=None, metavar="PATH",
                        help="the released TemporalWiki files (a folder or the .zip)")
    parser.add_argument("--match", default="", metavar="TEXT",
                        help="only names containing TEXT")
    parser.set_defaults(func=run)


def _source(task: object) -> str:
    source = getattr(task, "source", None)
    patterns = getattr(source, "_split_to_filepattern", None)
    if not patterns:  # rows read from CSV files when the dataset is built
        return "splits: " + ", ".join(getattr(source, "splits", ()) or ("?",))
    return "; ".join(f"{split}: {pattern}" for split, pattern in patterns.items())


def describe(names: Iterable[str]) -> list[str]:
    """One line per registered name: a task's splits and files, a mixture's tasks and rates."""
    import seqio

    lines = []
    for name in sorted(names):
        if name in seqio.MixtureRegistry.names():
            mixture = seqio.get_mixture_or_task(name)
            parts = ", ".join(
                f"{task.name} ({mixture.get_rate(task):g})" for task in mixture.tasks
            )
            lines.append(f"{name}  mixture of {parts}")
        elif name in seqio.TaskRegistry.names():
            lines.append(f"{name}  task  {_source(seqio.get_mixture_or_task(name))}")
    return lines


def run(args: argparse.Namespace) -> int:
    import tw_jax.tasks as tasks
    from tw_jax.tasks.layout import DATA_DIR_ENV, resolve_data_dir

    data_dir = resolve_data_dir(args.data)
    if data_dir is None and args.published is None:
        print(f"tw-jax tasks: error: no data folder: pass --data DIR or set ${DATA_DIR_ENV} "
              "(and/or --published for the released files)", file=sys.stderr)
        return 2
    names = tasks.register_all(data_dir) if data_dir else []
    if args.published:
        names += tasks.register_published(args.published)
    shown = [name for name in names if args.match in name]
    for line in describe(shown):
        print(line)
    where = ", ".join(filter(None, (data_dir, args.published)))
    print(f"{len(shown)} of {len(names)} tasks and mixtures registered from {where}",
          file=sys.stderr)
    return 0
