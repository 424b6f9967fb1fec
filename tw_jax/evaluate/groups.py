"""Names the lifelong runner and its command line share: metric groups and what each method
trains on. Plain data, so ``tw-jax --help`` lists them without loading JAX or TensorFlow."""

from __future__ import annotations

# What each method trains on and which are open book: the method table (re-exported here, where
# the runner and the CLI have always found them).
from tw_jax.methods import DIFFSET, FULL, MIXREVIEW, OPEN_BOOK, REPLAY, TRAINS_ON

# metric group -> probe perplexity variant (tw_jax.tasks.probes.VARIANTS)
PPL_VARIANTS: dict[str, str] = {"ppl": "text", "ppl_object": "object", "ppl_cloze": "cloze"}
GROUPS: tuple[str, ...] = (*PPL_VARIANTS, "qa", "rank", "propn")

INITIAL = "initial"
LIGHTTUNE = "lighttune"
METRIC_GROUPS: tuple[str, ...] = (*GROUPS, LIGHTTUNE)
# After light-tuning: probe perplexity and decoding, reported as TemporalWiki Tables 4 and 6.
LIGHTTUNED_GROUPS: tuple[str, ...] = ("ppl", "qa")
LIGHTTUNED_METRICS: dict[str, str] = {"ppl": "lt_ppl", "em": "lt_em", "f1": "lt_f1"}
__all__ = ["DIFFSET", "FULL", "MIXREVIEW", "OPEN_BOOK", "REPLAY", "TRAINS_ON"]
# Open-book methods (OPEN_BOOK), one per retriever (tw_jax.retrieval): INITIAL reads each
# month's probes with passages retrieved from that month's snapshot; they change the reader's
# input, so only the probe groups apply.
OPEN_BOOK_GROUPS: tuple[str, ...] = (*PPL_VARIANTS, "qa")
