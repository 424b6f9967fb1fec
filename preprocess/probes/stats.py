"""The ``stats.json`` of a Probes folder: TemporalWiki-Table-2-style counts and every skip.

Per category: facts after Algorithm 2, after down-sampling, after alignment, after each heuristic
rule and cap, with drops by reason; inputs skipped by reason (reader skips of each dump, subjects
and objects without labels); ``skipped_one_side``: entities malformed in one dump and read in the
other, left out of categorisation. One accumulator serves the local path and Beam (as a
CombineFn's state), so both report the same figures.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tw_jax.preprocess.probes.categorise import CATEGORIES
from tw_jax.preprocess.runners.accounting import Skips

INPUTS = ("old_wikidata", "new_wikidata", "wikipedia", "old_wikipedia", "facts")
SIDES = ("old", "new")
_EXAMPLES = 5


def _id_order(entity_id: str) -> tuple[int, str]:
    return len(entity_id), entity_id  # Q9 before Q10: ids of one prefix in numeric order


class OneSided:
    """Entities skipped as malformed in one dump and read in the other, by the malformed side.

    Such an entity is not categorised at all: absent from the old dump its new facts would all
    be NEW, and absent from the new one its old facts would have nothing to compare with. The
    examples are the smallest ids, so that they do not depend on the order in which workers or
    Beam bundles report them.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter({side: 0 for side in SIDES})
        self.examples: dict[str, list[str]] = {side: [] for side in SIDES}

    def add(self, side: str, entity_id: str) -> None:
        self.counts[side] += 1
        self._keep(side, [entity_id])

    def _keep(self, side: str, ids: list[str]) -> None:
        merged = sorted({*self.examples[side], *ids}, key=_id_order)
        self.examples[side] = merged[:_EXAMPLES]

    def merge(self, other: OneSided) -> None:
        for side in SIDES:
            self.counts[side] += other.counts[side]
            self._keep(side, other.examples[side])

    def as_dict(self) -> dict[str, Any]:
        return {
            **{side: self.counts[side] for side in SIDES},
            "examples": {side: self.examples[side] for side in SIDES if self.examples[side]},
        }


class ProbeStats:
    def __init__(self) -> None:
        self.entities: Counter[str] = Counter()  # old / new entities read
        self.skips = {name: Skips() for name in INPUTS}
        self.one_sided = OneSided()
        # category -> "categorised", "sampled", "drop:<reason>", "passed_rules"
        self.steps = {category: Counter() for category in CATEGORIES}
        self.final: dict[str, dict[str, int]] = {}
        self.lighttuning: dict[str, int] = {}

    def count(self, category: str, step: str, n: int = 1) -> None:
        self.steps[category][step] += n

    def drop(self, category: str, reason: str, where: str) -> None:
        self.steps[category]["drop:" + reason] += 1
        del where  # drops of QC are counts; input skips keep examples

    def merge(self, other: ProbeStats) -> ProbeStats:
        self.entities.update(other.entities)
        for name in INPUTS:
            self.skips[name].merge(other.skips[name])
        self.one_sided.merge(other.one_sided)
        for category in CATEGORIES:
            self.steps[category].update(other.steps[category])
        return self

    def as_dict(self, **extra: Any) -> dict[str, Any]:
        categories = {}
        for category in CATEGORIES:
            steps = self.steps[category]
            drops = {k[5:]: v for k, v in sorted(steps.items()) if k.startswith("drop:")}
            final = self.final.get(category, {})
            categories[category] = {
                "categorised": steps["categorised"],
                "sampled": steps["sampled"],
                "labelled": steps["labelled"],
                "aligned": steps["aligned"],
                "after_rules": steps["passed_rules"],
                **{k: v for k, v in final.items() if k != "aligned"},
                "final": final.get("after_relation_cap", 0),
                "dropped_by_reason": drops,
            }
        return {
            **extra,
            "entities": dict(sorted(self.entities.items())),
            "categories": categories,
            "table2": {
                c: {
                    "before_alignment": categories[c]["sampled"],
                    "after_alignment": categories[c]["aligned"],
                    "final": categories[c]["final"],
                }
                for c in CATEGORIES
            },
            "lighttuning": dict(self.lighttuning),
            "skipped": {name: self.skips[name].as_dict() for name in INPUTS},
            "skipped_one_side": self.one_sided.as_dict(),
        }
