"""Command-line options every preprocessing stage shares: where it runs and how it reports."""

from __future__ import annotations

import argparse


def add_runner_arguments(parser: argparse.ArgumentParser, workers_help: str) -> None:
    """``--workers``, ``--runner local|beam``, ``--beam-options`` and ``--progress``."""
    parser.add_argument("--workers", type=int, default=1, help=workers_help)
    parser.add_argument("--runner", choices=("local", "beam"), default="local")
    parser.add_argument(
        "--beam-options",
        default="",
        help='Beam pipeline flags, e.g. "--runner=DirectRunner --direct_num_workers=2"',
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: when stderr is a terminal)",
    )
