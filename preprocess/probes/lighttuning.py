"""Light-tuning sets (TemporalWiki Appendix D): per category, a few hundred facts that are not
probes, each relation keeping its share of the category.

Candidates are the facts that passed the heuristic rules but failed alignment: by construction
never probes, and still well-formed probes in shape. The sampler keeps, per relation, the
``size`` candidates of smallest fact hash (a seeded, order-free choice) and counts every
candidate, so its memory is bounded by relations × size and two samplers merge (Beam combines
them). Quotas follow the relations' exact counts by largest remainder.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable

from tw_jax.preprocess.probes.records import Probe

DEFAULT_SIZE = 500


class Sampler:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self.size = size
        self.counts: Counter[str] = Counter()
        self.heaps: dict[str, list[tuple[int, tuple]]] = {}  # max-heap by negated hash

    def add(self, probe: Probe, fact_hash: int) -> None:
        relation = probe.relation_id
        self.counts[relation] += 1
        heap = self.heaps.setdefault(relation, [])
        item = (-fact_hash, tuple(probe))
        if len(heap) < self.size:
            heapq.heappush(heap, item)
        elif heap and item > heap[0]:  # size 0 (--lighttuning-size 0) keeps nothing
            heapq.heapreplace(heap, item)

    def merge(self, other: Sampler) -> Sampler:
        self.counts.update(other.counts)
        for relation, heap in other.heaps.items():
            mine = self.heaps.setdefault(relation, [])
            for item in heap:
                if len(mine) < self.size:
                    heapq.heappush(mine, item)
                elif mine and item > mine[0]:
                    heapq.heapreplace(mine, item)
        return self

    def texts(self) -> set[tuple[str, str, str]]:
        """The ``subject,relation,object`` texts of the candidates held (what :meth:`sample`
        might choose)."""
        return {(item[0], item[1], item[2]) for heap in self.heaps.values() for _, item in heap}

    def sample(self, exclude: Iterable[tuple[str, str, str]] = ()) -> list[Probe]:
        """``size`` probes (fewer if there are fewer candidates), relation shares kept, none
        whose ``subject,relation,object`` text equals an excluded one (a probe's)."""
        excluded = set(exclude)
        pools = {
            relation: [
                Probe(*item)
                for _, item in sorted(heap, reverse=True)
                if (item[0], item[1], item[2]) not in excluded
            ]
            for relation, heap in self.heaps.items()
        }
        quotas = quotas_for(self.counts, self.size)
        chosen = []
        for relation in sorted(pools):
            chosen.extend(pools[relation][: quotas.get(relation, 0)])
        return sorted(chosen, key=Probe.sort_key)


def quotas_for(counts: Counter[str], size: int) -> dict[str, int]:
    """Per-relation quotas summing to min(size, total), proportional to ``counts`` (largest
    remainder; ties broken by relation id so the result is deterministic)."""
    total = sum(counts.values())
    if total <= size:
        return dict(counts)
    exact = {relation: size * n / total for relation, n in counts.items()}
    quotas = {relation: int(share) for relation, share in exact.items()}
    left = size - sum(quotas.values())
    by_remainder = sorted(exact, key=lambda r: (-(exact[r] - quotas[r]), r))
    for relation in by_remainder[:left]:
        quotas[relation] += 1
    return quotas
