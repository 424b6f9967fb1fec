"""What one probe or QA set scored under one model, shared by the sibling benchmarks' evaluators
(CKL's probe sets, EvolvingQA's QA sets): one shape, so one mapping to results lines and one
predictions writer serve both."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tw_jax.evaluate.results import Result


@dataclass
class SetScores:
    """One set's scores (metric → value, percent) and its predictions, row by row."""

    name: str  # the set: CKL's probe task, EvolvingQA's set
    category: str  # the results category it is recorded under
    rows: int
    values: dict[str, float] = field(default_factory=dict)
    predictions: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # row ids, where the set has them (CKL)
    ranked: int = 0  # pairs in a rank classification (EvolvingQA's Edited)

    def results(self, method: str, trained_through: str, eval_month: str,
                metrics: Sequence[str] | None = None) -> list[Result]:
        """Its results lines: every value, or those of ``metrics`` present, in that order."""
        keys = list(self.values) if metrics is None else [m for m in metrics if m in self.values]
        return [Result(method, trained_through, eval_month, self.category, metric,
                       float(self.values[metric])) for metric in keys]
