"""The argument parser every ``tw-jax`` command uses: a usage error is one line, and gin flags
are spelt as T5X spells them.

argparse prints the whole usage block above its error; a command with twenty options buries
the one thing that went wrong (``--in gs://b/x: no such object or folder``). Here the error is
the line (``--help`` still shows the usage); the exit status stays argparse's 2.

A command configured by gin calls :func:`add_gin_flags` on its parser: ``--gin_file``
(repeatable), ``--gin_bindings KEY=VALUE`` and ``--gin_search_paths``, and T5X's
``--gin.KEY=VALUE`` (or ``--gin.KEY VALUE``), which the parser rewrites into
``--gin_bindings KEY=VALUE`` before parsing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tw_jax.time import Period, Snapshot, TimeError, parse_chain

GIN_PREFIX = "--gin."


class OneLineErrorParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors are one line on stderr, exit status 2.

    Subcommand parsers inherit it (``add_subparsers`` makes parsers of the parent's class).
    """

    gin_flags = False  # set by add_gin_flags: this parser reads --gin.KEY=VALUE

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        if self.gin_flags:
            args = expand_gin_flags(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)


def expand_gin_flags(args: Sequence[str]) -> list[str]:
    """``--gin.KEY=VALUE`` and ``--gin.KEY VALUE`` → ``--gin_bindings KEY=VALUE``; the rest as is."""
    args = list(args)
    rewritten: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg.startswith(GIN_PREFIX):
            key_value = arg[len(GIN_PREFIX):]
            if "=" not in key_value and index + 1 < len(args):
                index += 1
                key_value = f"{key_value}={args[index]}"
            rewritten += ["--gin_bindings", key_value]
        else:
            rewritten.append(arg)
        index += 1
    return rewritten


def add_gin_flags(
    parser: argparse.ArgumentParser,
    *,
    file_help: str = "gin file (repeatable; found as given, in --gin_search_paths, or among "
                     "the shipped files, e.g. kadapter.gin, models/t5_tiny.gin)",
    required: bool = False,
) -> None:
    """Gives ``parser`` (a :class:`OneLineErrorParser`) the gin flags of ``tw-jax train``:
    ``args.gin_file``, ``args.gin_bindings`` and ``args.gin_search_paths`` are lists."""
    if not isinstance(parser, OneLineErrorParser):
        raise TypeError(f"{parser.prog}: gin flags need a OneLineErrorParser, not "
                        f"{type(parser).__name__}")
    parser.gin_flags = True
    parser.add_argument("--gin_file", action="append", default=[], metavar="FILE",
                        required=required, help=file_help)
    parser.add_argument("--gin_bindings", action="append", default=[], metavar="KEY=VALUE",
                        help="one gin binding, after the files (also --gin.KEY=VALUE)")
    parser.add_argument("--gin_search_paths", action="append", default=[], metavar="DIR",
                        help="folder to look for gin files in (repeatable, comma-separated ok)")


def gin_search_paths(args: argparse.Namespace) -> list[str]:
    """The folders of every ``--gin_search_paths`` (each may list several, comma-separated)."""
    return [path for item in args.gin_search_paths for path in item.split(",") if path]


def without_gin_trail(error: BaseException) -> str:
    """The error's own message: gin adds "In call to configurable ..." lines to what a
    configurable (``tw_jax.evaluate.evaluate``, ``tw_jax.train.train``) raises."""
    return "\n".join(line for line in str(error).splitlines()
                     if not line.strip().startswith("In call to configurable"))


REBUILD_FLAG = "--rebuild"


class _DeprecatedRebuild(argparse.Action):
    """An old spelling of ``--rebuild`` (``--force``, ``--rebuild-index``): it still works,
    says once on stderr which flag replaces it, and is hidden from ``--help``."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, help=argparse.SUPPRESS,
                         **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"{parser.prog}: {option_string} is deprecated: use {REBUILD_FLAG}",
              file=sys.stderr)
        setattr(namespace, self.dest, True)


def add_rebuild_flag(parser: Any, help_text: str, *, old: Sequence[str] = ()) -> None:
    """``--rebuild`` (``args.rebuild``): the one name every command gives to "do again what a
    previous run left complete" (an index, a stage folder); ``old`` spellings stay as hidden,
    deprecated aliases so scripts written for them keep working. ``parser`` may be an argument
    group."""
    parser.add_argument(REBUILD_FLAG, action="store_true", dest="rebuild", help=help_text)
    if old:
        parser.add_argument(*old, action=_DeprecatedRebuild, dest="rebuild")


def period_argument(text: str) -> Period:
    """``type=period_argument``: a period in any spelling (``2024-12_2025-01``, ``0809``), or
    argparse's one-line error saying the forms."""
    try:
        return Period.parse(text)
    except TimeError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def snapshot_argument(text: str) -> Snapshot:
    """``type=snapshot_argument``: a snapshot in any spelling (``2024-12``, ``20241220``,
    ``08``), or argparse's one-line error saying the forms."""
    try:
        return Snapshot.parse(text)
    except TimeError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def chain_argument(text: str) -> list[Period]:
    """``type=chain_argument``: a lifelong chain, comma-separated periods (``0809,0910``) or
    snapshots (``2024-12,2025-01,2025-02``: the periods between them), in order."""
    try:
        return parse_chain(text.split(","))
    except TimeError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
