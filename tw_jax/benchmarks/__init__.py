"""Command groups of the sibling benchmarks (``tw-jax ckl``, ``tw-jax ecbd``, ``tw-jax evolvingqa``).

Each ``*_cli.py`` module exposes ``add_parser(subparsers)`` like every other stage, registering one
command with its own subcommands (build, train, eval); the benchmarks reuse the tasks, trainer and
evaluation machinery of TemporalWiki rather than forking it.
"""
