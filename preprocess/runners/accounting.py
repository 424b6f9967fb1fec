"""Where every input record went: emitted, skipped for a named reason, or a one-line error.

Stages hand a :class:`Skips` to their readers; the counts end up in ``stats.json``, with the
first few places of each reason so that a user can find the offending record. Input that cannot
be read on is a :class:`~tw_jax.errors.DumpError`; :func:`dump_error_in` finds it again where a
Beam runner has wrapped it.

Every stage writes its ``stats.json`` last, so a folder is complete exactly when it has one; a
stage that reads an earlier stage's folder calls :func:`require_complete` first, so that the
files of an interrupted run are never taken for the whole output.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths

MAX_EXAMPLES_PER_REASON = 5
STATS_FILE = "stats.json"  # a stage's completion marker, written last


class Skips:
    """Counts skipped records by reason and remembers where the first few were."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}

    def add(self, reason: str, where: str, n: int = 1) -> None:
        self.counts[reason] += n
        examples = self.examples.setdefault(reason, [])
        if len(examples) < MAX_EXAMPLES_PER_REASON:
            examples.append(where)

    def merge(self, other: Skips) -> None:
        for reason, n in other.counts.items():
            self.counts[reason] += n
            examples = self.examples.setdefault(reason, [])
            room = MAX_EXAMPLES_PER_REASON - len(examples)
            examples.extend(other.examples.get(reason, [])[:room])

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "by_reason": dict(sorted(self.counts.items())),
            "examples": {k: v for k, v in sorted(self.examples.items()) if v},
        }


def dump_error_in(error: BaseException) -> DumpError | None:
    """The DumpError a runner wrapped (Beam re-raises a worker's error as a RuntimeError), so
    that bad input is reported as plainly by a Beam pipeline as by the local path."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, DumpError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def require_complete(folder: str | os.PathLike[str], stage: str) -> None:
    """Refuses an earlier stage's folder without its ``stats.json`` (one line naming the folder
    and the command that writes it), e.g. ``require_complete(d, "tw-jax diffset")``."""
    folder_s = os.fspath(folder)
    if not paths.isfile(paths.join(folder_s, STATS_FILE)):
        raise DumpError(folder_s, None, f"has no {STATS_FILE}: the stage that writes it "
                                        f"({stage}) did not finish; run it again")
