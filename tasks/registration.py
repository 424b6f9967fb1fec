"""Bookkeeping of what tw_jax registered in seqio's registries, so it can be redone cleanly.

seqio refuses to register a name twice. Registration here happens per *group* (the data folder
of ``register_all``, the published files of ``register_published``): registering a group again
first removes every task and mixture that group added last time, and a name another group
registered is replaced (the latest call wins), so pointing the tasks at a new data folder never
leaves stale tasks behind or fails on duplicates.
"""

from __future__ import annotations

import logging
from typing import Any

import seqio

log = logging.getLogger(__name__)

_GROUPS: dict[str, list[str]] = {}


def _remove(name: str) -> None:
    seqio.MixtureRegistry.remove(name)
    seqio.TaskRegistry.remove(name)


class Registrar:
    """Adds the tasks and mixtures of one group (see the module docstring)."""

    def __init__(self, group: str) -> None:
        self.group = group
        for name in _GROUPS.pop(group, []):
            _remove(name)
        self.names: list[str] = []
        _GROUPS[group] = self.names

    def _claim(self, name: str) -> None:
        for other, names in _GROUPS.items():
            if other != self.group and name in names:
                log.info(
                    "tw_jax.tasks: %s from %s replaces the one from %s", name, self.group, other
                )
                names.remove(name)
        _remove(name)
        self.names.append(name)

    def task(self, name: str, **kwargs: Any) -> seqio.Task:
        self._claim(name)
        return seqio.TaskRegistry.add(name, **kwargs)

    def mixture(self, mixture: seqio.Mixture) -> seqio.Mixture:
        self._claim(mixture.name)
        seqio.MixtureRegistry.add_provider(mixture.name, mixture)
        return mixture

    def eval_mixture(self, name: str, tasks: list[str]) -> seqio.Mixture | None:
        """An evaluation mixture: ``tasks`` at equal rates, each keeping its own metrics when
        ``seqio.Evaluator`` (or ``tw-jax eval``) runs the mixture; none for an empty list."""
        if not tasks:
            return None
        return self.mixture(seqio.Mixture(name, tasks, default_rate=1.0))


def registered(group: str | None = None) -> list[str]:
    """Names registered by one group, or by all of them."""
    if group is not None:
        return list(_GROUPS.get(group, []))
    return [name for names in _GROUPS.values() for name in names]
