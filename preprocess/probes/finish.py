"""Options of the stage, and the category-wide last step both runners share.

After the per-fact steps every runner holds, per category, the probes that passed alignment and
the rules, plus a light-tuning sampler; :func:`finish` applies duplicates and caps, draws the
light-tuning sets and fills in the counts, so the local path and Beam write identical folders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tw_jax.preprocess.dumps.wikidata import DEFAULT_MAX_SKIPPED_SHARE
from tw_jax.preprocess.probes.categorise import CATEGORIES
from tw_jax.preprocess.probes.lighttuning import DEFAULT_SIZE, Sampler
from tw_jax.preprocess.probes.records import Probe
from tw_jax.preprocess.probes.rules import finalise
from tw_jax.preprocess.probes.stats import ProbeStats


@dataclass(frozen=True)
class ProbeOptions:
    unchanged_rate: float = 0.001
    max_subject_frac: float = 0.01
    max_object_frac: float = 0.05
    max_relation_frac: float = 0.05
    seed: int = 0
    lighttuning_size: int = DEFAULT_SIZE
    # Share of a Wikidata dump's records that may be malformed before the run fails
    # (wikidata.check_skipped_share).
    max_skipped_share: float = DEFAULT_MAX_SKIPPED_SHARE

    def check(self) -> None:
        for name in ("unchanged_rate", "max_subject_frac", "max_object_frac", "max_relation_frac",
                     "max_skipped_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.lighttuning_size < 0:
            raise ValueError("lighttuning_size must be >= 0")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def finish(
    kept: Mapping[str, Sequence[Probe]],
    samplers: Mapping[str, Sampler],
    stats: ProbeStats,
    options: ProbeOptions,
) -> tuple[dict[str, list[Probe]], dict[str, list[Probe]]]:
    """Final probes and light-tuning sets per category; records their counts in ``stats``."""
    probes: dict[str, list[Probe]] = {}
    lighttuning: dict[str, list[Probe]] = {}
    for category in CATEGORIES:
        final, counts = finalise(
            kept.get(category, ()),
            options.max_subject_frac,
            options.max_object_frac,
            options.max_relation_frac,
        )
        probes[category] = final
        stats.final[category] = counts
        texts = {(p.subject, p.relation, p.object) for p in final}
        sampler = samplers.get(category) or Sampler(options.lighttuning_size)
        lighttuning[category] = sampler.sample(exclude=texts)
        stats.lighttuning[category] = len(lighttuning[category])
    return probes, lighttuning
