"""The per-subject steps shared by the local path and the Beam pipeline.

1. :func:`candidates_for`: Algorithm 2 on one subject, then UNCHANGED down-sampling.
2. :func:`label_ids`: the item ids whose labels rendering a candidate needs.
3. :func:`render_candidate`: labels → a :class:`Probe` (or a counted skip).
4. :func:`check_probe`: alignment, then heuristic rules; failures that are still well-formed
   facts feed the light-tuning sampler.

Each step takes its lookups as arguments (a LabelIndex method locally, a joined dict in Beam),
so the two runners apply the very same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tw_jax.preprocess.facts.relation_templates import cloze, probe_text
from tw_jax.preprocess.facts.values import render
from tw_jax.preprocess.probes.align import SubjectTexts, alignment_reason
from tw_jax.preprocess.probes.categorise import UNCHANGED, Candidate, categorise
from tw_jax.preprocess.probes.facts import SubjectSide, fact_hash, sampled
from tw_jax.preprocess.probes.lighttuning import Sampler
from tw_jax.preprocess.probes.records import Probe, make_probe
from tw_jax.preprocess.probes.rules import heuristic_reason
from tw_jax.preprocess.probes.stats import ProbeStats

LabelOf = Callable[[str], "str | None"]


def candidates_for(
    subject_id: str,
    new: SubjectSide | None,
    old: SubjectSide | None,
    *,
    seed: int,
    unchanged_rate: float,
    stats: ProbeStats,
) -> Iterator[Candidate]:
    """The subject's categorised facts that survive down-sampling, counted per category."""
    if new is None:
        return
    label = new[0]
    for candidate in categorise(subject_id, new[2], old[2] if old is not None else None):
        stats.count(candidate.category, "categorised")
        if candidate.category == UNCHANGED and not sampled(
            seed, unchanged_rate, subject_id, candidate.relation_id, candidate.key
        ):
            continue
        stats.count(candidate.category, "sampled")
        if not label:
            stats.drop(candidate.category, "subject_without_label", subject_id)
            stats.skips["facts"].add("subject_without_label", subject_id)
            continue
        yield candidate


def _value_ids(value: tuple) -> list[str]:
    if value[0] == "item":
        return [value[1]]
    if value[0] == "quantity" and len(value) > 2 and value[2]:
        return [value[2]]
    return []


def label_ids(candidate: Candidate) -> list[str]:
    """Item ids (objects, previous objects, units, the relation) whose labels are needed."""
    ids = [candidate.relation_id, *_value_ids(candidate.value)]
    for value in candidate.previous:
        ids.extend(_value_ids(value))
    return ids


def _templates() -> tuple[Callable, Callable]:
    return probe_text, cloze


def render_candidate(
    candidate: Candidate, subject: str, label_of: LabelOf, stats: ProbeStats
) -> Probe | None:
    """The probe of a candidate, or None (counted) when its relation or object has no label."""

    where = f"{candidate.subject_id} {candidate.relation_id} {candidate.key}"
    relation = label_of(candidate.relation_id)
    if not relation:
        stats.drop(candidate.category, "relation_without_label", where)
        stats.skips["facts"].add("relation_without_label", where)
        return None
    obj = render(candidate.value, label_of)
    if not obj:
        stats.drop(candidate.category, "object_without_label", where)
        stats.skips["facts"].add("object_without_label", where)
        return None
    previous = [text for value in candidate.previous if (text := render(value, label_of))]
    stats.count(candidate.category, "labelled")
    probe_text, cloze = _templates()
    return make_probe(candidate, subject, relation, obj, previous, probe_text, cloze)


def check_probe(
    probe: Probe, texts: SubjectTexts, *, seed: int, stats: ProbeStats, sampler: Sampler | None
) -> bool:
    """Whether a probe passes alignment and the per-fact rules (each failure counted)."""
    category = probe.category
    reason = alignment_reason(category, probe.object, texts)
    rule = heuristic_reason(probe.subject, probe.object)
    if reason is not None:
        stats.drop(category, reason, probe.subject_id)
        if rule is None and sampler is not None:
            salt = fact_hash(seed, "lighttuning", probe.subject_id, probe.relation_id, probe.key)
            sampler.add(probe, salt)
        return False
    stats.count(category, "aligned")
    if rule is not None:
        stats.drop(category, rule, probe.subject_id)
        return False
    stats.count(category, "passed_rules")
    return True
