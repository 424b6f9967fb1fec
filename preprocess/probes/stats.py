"""The ``stats.json`` of a Probes folder: TemporalWiki-Table-2-style counts and every skip.

Per category: facts after Algorithm 2, after down-sampling, after alignment, after each heuristic
rule and cap, with drops by reason; inputs skipped by reason (reader skips of each dump, subjects
and objects without labels). One accumulator serves the local path and Beam (as a CombineFn's
state), so both report the same figures.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tw_jax.preprocess.accounting import Skips
from tw_jax.preprocess.probes.categorise import CATEGORIES

INPUTS = ("old_wikidata", "new_wikidata", "wikipedia", "old_wikipedia", "facts")


class ProbeStats:
    def __init__(self) -> None:
        self.entities: Counter[str] = Counter()  # old / new entities read
        self.skips = {name: Skips() for name in INPUTS}
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
        }
