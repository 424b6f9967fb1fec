"""Builds tw-jax from pyproject.toml (all configuration lives there) for Apache Beam.

Beam's ``--setup_file`` turns the checkout into an sdist that every worker of a cluster runner
(Dataflow, Flink, Spark) pip-installs before its first element: the stages' functions reach the
workers pickled by reference to ``tw_jax`` modules, so a worker without the package cannot run
them. Beam first tries ``python -m build`` and falls back to ``python setup.py sdist``, which
needs this file (a bare pyproject.toml has no such fallback, and the checkout's ``build/``
folder shadows the ``build`` module). See docs/beam.md.
"""

from setuptools import setup

setup()
