"""A command configured by gin files and bindings, T5X style: its flags and its parse step.

``tw-jax train``, ``compile``, ``eval`` and ``infer`` share them: ``--gin_file`` may repeat
(later files override earlier ones), ``--gin.KEY=VALUE`` binds one key after all files, and a
configuration error (a missing file, a misspelt binding, an unset macro) is one line and exit
status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from tw_jax.cli_parser import add_gin_flags, gin_search_paths


def add_gin_command(
    subparsers: argparse._SubParsersAction, name: str, help_text: str,
    run: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """A subcommand configured by gin files and bindings (``tw-jax train``, ``eval`` …)."""
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    add_gin_flags(parser)
    parser.set_defaults(func=run, command_name=name)
    return parser


def parse_gin(args: argparse.Namespace, required: Sequence[str]) -> int | None:
    """Parses the command's gin files and bindings; an exit status (2, one line) on error."""
    from tw_jax.runtime import gin_setup  # jax and the models: not for ``tw-jax --help``

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    command = args.command_name
    if not args.gin_file:
        print(f"tw-jax {command}: error: pass at least one --gin_file", file=sys.stderr)
        return 2
    try:
        gin_setup.parse(args.gin_file, args.gin_bindings, gin_search_paths(args), required)
    except gin_setup.GinConfigError as error:
        print(f"tw-jax {command}: error: {error}", file=sys.stderr)
        return 2
    return None
