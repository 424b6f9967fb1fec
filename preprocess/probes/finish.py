"""Options of the stage, and the category-wide last step both runners share.

After the per-fact steps every runner has, in a :class:`~tw_jax.preprocess.probes.kept.KeptStore`
on disk, the probes that passed alignment and the rules, plus a light-tuning sampler per
category; :func:`finish` applies duplicates and caps (in the store), draws the light-tuning sets
and fills in the counts, so the local path and Beam write identical folders.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tw_jax.preprocess.dumps.wikidata import DEFAULT_MAX_SKIPPED_SHARE
from tw_jax.preprocess.probes.categorise import CATEGORIES
from tw_jax.preprocess.probes.kept import FinalProbes, KeptStore
from tw_jax.preprocess.probes.lighttuning import DEFAULT_SIZE, Sampler
from tw_jax.preprocess.probes.records import Probe
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
    kept: KeptStore,
    samplers: Mapping[str, Sampler],
    stats: ProbeStats,
    options: ProbeOptions,
) -> tuple[dict[str, FinalProbes], dict[str, list[Probe]]]:
    """Final probes (streams from ``kept``, which must stay open while they are read) and
    light-tuning sets per category; records their counts in ``stats``."""
    probes: dict[str, FinalProbes] = {}
    lighttuning: dict[str, list[Probe]] = {}
    for category in CATEGORIES:
        stats.final[category] = kept.finalise(
            category,
            options.max_subject_frac,
            options.max_object_frac,
            options.max_relation_frac,
        )
        probes[category] = kept.final(category)
        sampler = samplers.get(category) or Sampler(options.lighttuning_size)
        # No light-tuning fact may share its text with a final probe: the candidates' texts (at
        # most relations x size of them) are looked for among the final probes as they stream
        # by, so no set of every final probe's text is built.
        candidates = sampler.texts()
        texts = (
            {text for text in kept.final_texts(category) if text in candidates}
            if candidates
            else set()
        )
        lighttuning[category] = sampler.sample(exclude=texts)
        stats.lighttuning[category] = len(lighttuning[category])
    return probes, lighttuning
