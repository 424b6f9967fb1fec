"""The ``tw-jax`` command line: one subcommand per stage.

Each stage module exposes ``add_parser(subparsers)``, which registers its arguments and sets
``func``; this file only wires them together, so stages stay importable and testable alone.
Errors that name a file and a record (:class:`DumpError`), an output that cannot be written
(:class:`OutputError`: a full disk, a read-only folder, a folder another run holds) or a path
that cannot be used (:class:`StorageError`: a missing bucket or object, refused credentials)
are printed plainly,
without a traceback, and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from tw_jax.cli_parser import OneLineErrorParser

# (module, attribute) of each stage's add_parser, imported lazily so `tw-jax --help` stays fast
# and a stage's heavy dependencies (TensorFlow, Beam, JAX) load only when that stage runs.
_STAGES: tuple[str, ...] = (
    "tw_jax.sample_world.cli",
    "tw_jax.preprocess.diffset.cli",
    "tw_jax.preprocess.probes.cli",
    "tw_jax.preprocess.ssm.cli",
    "tw_jax.evaluate.report_cli",
    "tw_jax.evaluate.lifelong_cli",
    "tw_jax.train.cli",
    "tw_jax.evaluate.eval_cli",
    "tw_jax.benchmarks.ckl_cli",
    "tw_jax.benchmarks.ecbd_cli",
    "tw_jax.benchmarks.evolvingqa_cli",
    "tw_jax.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="tw-jax",
        description="TemporalWiki and its siblings in JAX: corpora, probes, training, evaluation.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in _STAGES:
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from tw_jax.errors import DumpError, OutputError
    from tw_jax.io.paths import StorageError
    from tw_jax.text.spacy_pipeline import SpacyModelError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except (DumpError, OutputError, SpacyModelError, StorageError) as error:
        print(f"tw-jax {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"tw-jax {args.command}: interrupted; no partial output was left behind.",
            file=sys.stderr,
        )
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
