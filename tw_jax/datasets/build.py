"""``python -m tw_jax.datasets.build``: TFDS's ``tfds build`` command, without the rest of
the ``tfds`` CLI.

TFDS 4.9.10's ``tfds`` entry point imports every subcommand, ``build_croissant`` included, and
that one imports ``mlcroissant`` (an optional TFDS extra, which would bring pandas) at start-up:
without it ``tfds build`` stops with ``ModuleNotFoundError: No module named 'mlcroissant'``
before parsing a flag. This runs the same ``build`` command (TFDS's own ``build.Args``, so the
same flags: ``--imports``, ``--manual_dir``, ``--data_dir``, ``--config``,
``--beam_pipeline_options`` …) with ``tw_jax.datasets`` imported. With ``mlcroissant``
installed, ``tfds build --imports tw_jax.datasets …`` does exactly the same.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    from absl import app
    from tensorflow_datasets.scripts.cli import build, cli_utils

    import tw_jax.datasets  # noqa: F401  (registers the builders)

    parse = cli_utils.make_flags_parser(build.Args, description="tfds build (tw_jax)")

    def run(args: build.Args) -> None:
        args.execute()

    app.run(run, argv=list(argv) if argv is not None else None, flags_parser=parse)


if __name__ == "__main__":
    main()
