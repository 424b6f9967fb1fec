"""Where every input record went: emitted, or skipped for a named reason.

Stages hand a :class:`Skips` to their readers; the counts end up in ``stats.json``, with the
first few places of each reason so that a user can find the offending record.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

MAX_EXAMPLES_PER_REASON = 5


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
