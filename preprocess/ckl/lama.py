"""InvariantLAMA-style probes from one Wikidata dump (``tw-jax ckl build-lama``).

CKL's InvariantLAMA is the part of LAMA's T-REx whose relations cannot change over time: the 28
relations of CKL Table 4 (``CKL_INVARIANT`` in :mod:`tw_jax.preprocess.facts.relation_templates`,
which holds their templates), each fact a cloze sentence ``[X] was born in <extra_id_0> .`` with the
object label as the answer. This builds the same from any snapshot, with the probes stage's
machinery:

1. the dump's labels go to a :class:`~tw_jax.preprocess.facts.labels.LabelIndex` (SQLite, on disk);
2. every item's non-deprecated facts of the 28 relations (:func:`facts.facts_of`), one per
   (relation, object), are rendered by :func:`steps.render_candidate` (labels, dates at their
   precision, quantities with units) and checked by :func:`rules.heuristic_reason` (subject and
   object inside one another, objects of more than five words);
3. per relation, the ``2 × max_per_relation`` facts with the lowest seeded hash
   (:func:`facts.fact_hash`: the same sample whatever the dump's order) are kept while streaming,
   so memory stays bounded on a full dump;
4. :func:`rules.finalise` drops duplicate ``subject, relation, object`` texts and applies the
   per-subject / object / relation caps (fractions of the sample; off by default, as LAMA has
   none), then each relation keeps its ``max_per_relation`` lowest-hash facts (LAMA's T-REx
   sampled at most 1000 per relation).

Output (:mod:`~tw_jax.preprocess.ckl.outputs`): ``invariantLAMA.csv`` (``id,input,output``,
exactly the released format), ``invariantLAMA_answers.json`` (``id → [answers]``),
``invariantLAMA_facts.csv`` (where each probe comes from) and ``stats.json``, written last.
"""

from __future__ import annotations

import heapq
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tw_jax.io.output_claim import scratch_dir
from tw_jax.io.progress import progress as progress_bar
from tw_jax.preprocess.ckl.outputs import clear_stats, write_lama_folder
from tw_jax.preprocess.dumps.wikidata import iter_entities
from tw_jax.preprocess.facts.labels import LabelIndex
from tw_jax.preprocess.facts.relation_templates import CKL_INVARIANT, TEMPLATES, cloze
from tw_jax.preprocess.probes.categorise import UNCHANGED, Candidate
from tw_jax.preprocess.probes.facts import fact_hash, facts_of
from tw_jax.preprocess.probes.records import Probe
from tw_jax.preprocess.probes.rules import finalise, heuristic_reason
from tw_jax.preprocess.probes.stats import ProbeStats
from tw_jax.preprocess.probes.steps import render_candidate
from tw_jax.preprocess.runners.accounting import Skips

DEFAULT_MAX_PER_RELATION = 1000  # LAMA's T-REx: at most 1000 facts per relation
OVERSAMPLE = 2  # facts kept per relation while streaming, per final one (duplicates may drop)
_SALT = "invariantlama"


@dataclass(frozen=True)
class LamaOptions:
    """How to sample: the seed, the per-relation size and the probes stage's caps."""

    seed: int = 0
    max_per_relation: int | None = DEFAULT_MAX_PER_RELATION  # None: every fact (memory grows)
    max_subject_frac: float = 1.0
    max_object_frac: float = 1.0
    max_relation_frac: float = 1.0
    relations: tuple[str, ...] = CKL_INVARIANT

    def check(self) -> None:
        for name in ("max_subject_frac", "max_object_frac", "max_relation_frac"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if self.max_per_relation is not None and self.max_per_relation < 1:
            raise ValueError(f"max_per_relation must be >= 1, got {self.max_per_relation}")
        unknown = [r for r in self.relations if r not in TEMPLATES]
        if unknown or not self.relations:
            raise ValueError(f"relations without a template: {unknown or 'none given'}")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "relations": list(self.relations)}


@dataclass
class LamaProbe:
    """One built probe: the released columns plus where it comes from."""

    id: str
    input: str
    output: str
    probe: Probe


@dataclass
class LamaStats:
    """Counts of every step (what ``stats.json`` reports)."""

    entities: int = 0
    steps: Counter[str] = field(default_factory=Counter)
    per_relation: dict[str, Counter[str]] = field(default_factory=dict)
    skips: Skips = field(default_factory=Skips)

    def count(self, relation: str, step: str, n: int = 1) -> None:
        self.steps[step] += n
        self.per_relation.setdefault(relation, Counter())[step] += n


class _Sample:
    """Per relation, the ``capacity`` facts of lowest hash seen so far (a bounded max-heap)."""

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.heaps: dict[str, list[tuple[int, int, Probe]]] = {}
        self._order = 0  # ties in hash (astronomically rare) keep the first seen

    def add(self, fact_key: int, probe: Probe) -> None:
        heap = self.heaps.setdefault(probe.relation_id, [])
        self._order += 1
        item = (-fact_key, -self._order, probe)
        if self.capacity is None or len(heap) < self.capacity:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)

    def probes(self) -> list[Probe]:
        return [p for heap in self.heaps.values() for _, _, p in heap]


def _hash(seed: int, probe: Probe) -> int:
    return fact_hash(seed, _SALT, probe.subject_id, probe.relation_id, probe.key)


def select(probes: Sequence[Probe], options: LamaOptions, stats: LamaStats) -> list[Probe]:
    """Step 4 of the module docstring on the streamed sample; probes in output order
    (relations as in CKL Table 4, then subject and object identity)."""
    kept, counts = finalise(probes, options.max_subject_frac, options.max_object_frac,
                            options.max_relation_frac)
    stats.steps.update({k: v for k, v in counts.items() if k != "aligned"})
    by_relation: dict[str, list[Probe]] = {}
    for probe in kept:
        by_relation.setdefault(probe.relation_id, []).append(probe)
    order = {r: i for i, r in enumerate(options.relations)}
    final: list[Probe] = []
    for relation in sorted(by_relation, key=order.__getitem__):
        chosen = sorted(by_relation[relation], key=lambda p: _hash(options.seed, p))
        chosen = chosen[: options.max_per_relation] if options.max_per_relation else chosen
        stats.count(relation, "final", len(chosen))
        final += sorted(chosen, key=Probe.sort_key)
    return final


def lama_probes(probes: Sequence[Probe]) -> list[LamaProbe]:
    """The released columns: ids ``0..N-1`` in order, the template with ``<extra_id_0>`` in
    place of the object, the object label as the answer."""
    return [
        LamaProbe(str(i), cloze(p.relation_id, p.subject) or "", p.object, p)
        for i, p in enumerate(probes)
    ]


def collect(
    dump: str, label_of: Callable[[str], str | None], options: LamaOptions, stats: LamaStats,
    progress: bool | None = None,
) -> list[Probe]:
    """Steps 2 and 3 of the module docstring over the dump: the per-relation sample."""

    wanted = set(options.relations)
    capacity = None if options.max_per_relation is None else OVERSAMPLE * options.max_per_relation
    sample = _Sample(capacity)
    render_stats = ProbeStats()  # render_candidate's own counters (labels missing, ...)
    quiet = None if progress is None else not progress
    with progress_bar(desc="reading Wikidata", unit=" entities", disable=quiet) as bar:
        for entity in iter_entities(dump, stats.skips):
            bar.update(1)
            stats.entities += 1
            if entity.kind != "item":
                continue
            for relation, key, value in facts_of(entity.claims):
                if relation not in wanted:
                    continue
                stats.count(relation, "facts")
                if not entity.label:
                    stats.count(relation, "drop:subject_without_label")
                    continue
                candidate = Candidate(UNCHANGED, entity.id, relation, key, value, ())
                probe = render_candidate(candidate, entity.label, label_of, render_stats)
                if probe is None:
                    stats.count(relation, "drop:object_without_label")
                    continue
                reason = heuristic_reason(probe.subject, probe.object)
                if reason is not None:
                    stats.count(relation, f"drop:{reason}")
                    continue
                stats.count(relation, "passed_rules")
                sample.add(_hash(options.seed, probe), probe)
    sampled = sample.probes()
    stats.steps["sampled"] = len(sampled)
    return sampled


def build_invariant_lama(
    wikidata: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    options: LamaOptions | None = None,
    *,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Writes an InvariantLAMA folder from one Wikidata dump and returns its stats.

    The dump and ``out_dir`` may be local paths or ``gs://`` URLs: the dump is streamed, the
    label index is scratch in the local temporary folder, the outputs are written atomically.
    """

    options = options or LamaOptions()
    options.check()
    dump = os.fspath(wikidata)
    clear_stats(out_dir)
    stats = LamaStats()
    with scratch_dir("lama") as scratch:
        labels = LabelIndex.build(dump, os.path.join(scratch, "labels.sqlite"), Skips())
        try:
            def label_of(entity_id: str) -> str | None:
                # Property labels fall back to the template table's (Wikidata's English label).
                found = labels.label(entity_id)
                if found is None and entity_id in TEMPLATES:
                    return TEMPLATES[entity_id].label
                return found

            sampled = collect(dump, label_of, options, stats, progress)
        finally:
            labels.close()
    probes = lama_probes(select(sampled, options, stats))
    report = _report(dump, options, stats, len(probes))
    write_lama_folder(out_dir, probes, report)
    return report


def _report(dump: str, options: LamaOptions, stats: LamaStats, final: int) -> dict[str, Any]:
    steps = stats.steps
    drops = {k[5:]: v for k, v in sorted(steps.items()) if k.startswith("drop:")}
    return {
        "inputs": {"wikidata": dump},
        "options": options.as_dict(),
        "entities": stats.entities,
        "facts": {
            "of_invariant_relations": steps["facts"],
            "passed_rules": steps["passed_rules"],
            "dropped_by_reason": drops,
            "sampled": steps["sampled"],
            "after_duplicates": steps["after_duplicates"],
            "after_subject_cap": steps["after_subject_cap"],
            "after_object_cap": steps["after_object_cap"],
            "after_relation_cap": steps["after_relation_cap"],
            "final": final,
        },
        "per_relation": {
            r: {"facts": c["facts"], "passed_rules": c["passed_rules"], "final": c["final"]}
            for r in options.relations if (c := stats.per_relation.get(r))
        },
        "skipped": {"wikidata": stats.skips.as_dict()},
    }
