"""Command-line options every preprocessing stage shares: where it runs and how it reports."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from tw_jax.preprocess.runners.beam_options import BeamOptionsError, check_flags

BEAM_OPTIONS = "--beam-options"


def _joined_beam_options(args: Sequence[str]) -> list[str]:
    """``--beam-options VALUE`` as ``--beam-options=VALUE``.

    Beam's flags start with ``--``, so argparse would take a separate value for an option of its
    own (``--runner=DataflowRunner`` for the stage's ``--runner``) and report ``--beam-options``
    as missing its argument; glued to the option by ``=``, the value is never parsed as flags.
    """
    joined: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--" or not isinstance(arg, str):
            joined += args[index:]
            break
        if arg == BEAM_OPTIONS and index + 1 < len(args):
            joined.append(f"{BEAM_OPTIONS}={args[index + 1]}")
            index += 2
            continue
        joined.append(arg)
        index += 1
    return joined


class _BeamOptionsParsing:
    """Mixed into a stage's parser: accepts ``--beam-options "--runner=… --x=y"`` as well as
    ``--beam-options="--runner=… --x=y"`` (see :func:`_joined_beam_options`)."""

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(_joined_beam_options(args), namespace)  # type: ignore[misc]


def beam_flags(text: str) -> list[str]:
    """argparse type of ``--beam-options``: the Beam flags, with what a cluster runner needs
    added (:func:`tw_jax.preprocess.runners.beam_options.check_flags`); an unusable set is
    argparse's one-line error, before any dump is opened."""
    if not text.strip():
        return []

    try:
        return check_flags(text)
    except BeamOptionsError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    except ImportError:
        raise argparse.ArgumentTypeError(
            "Apache Beam is not installed: pip install 'tw-jax[beam]'"
        ) from None


BEAM_OPTIONS_HELP = (
    'Beam pipeline flags in one argument, e.g. --beam-options "--runner=DataflowRunner '
    '--project=P --region=R --temp_location=gs://B/tmp" (docs/beam.md); cluster runners '
    "get --setup_file=CHECKOUT/setup.py unless given --setup_file, --extra_package or "
    "--sdk_container_image"
)


def add_beam_options(parser: argparse.ArgumentParser, help: str = BEAM_OPTIONS_HELP) -> None:
    """``--beam-options "FLAGS"``, checked by :func:`beam_flags`, its value taken whole even
    though it starts with ``--``."""
    if not isinstance(parser, _BeamOptionsParsing):
        parser.__class__ = type(
            f"BeamOptions{type(parser).__name__}", (_BeamOptionsParsing, type(parser)), {}
        )
    parser.add_argument(BEAM_OPTIONS, type=beam_flags, default=[], metavar='"FLAGS"', help=help)


def add_runner_arguments(parser: argparse.ArgumentParser, workers_help: str) -> None:
    """``--workers``, ``--runner local|beam``, ``--beam-options`` and ``--progress``."""
    parser.add_argument("--workers", type=int, default=1, help=workers_help)
    parser.add_argument("--runner", choices=("local", "beam"), default="local")
    add_beam_options(parser)
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: when stderr is a terminal)",
    )
