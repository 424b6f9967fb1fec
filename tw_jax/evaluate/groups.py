"""Names the lifelong runner and its command line share: metric groups and what each method
trains on. Plain data, so ``tw-jax --help`` lists them without loading JAX or TensorFlow."""

from __future__ import annotations

# metric group -> probe perplexity variant (tw_jax.tasks.probes.VARIANTS)
PPL_VARIANTS: dict[str, str] = {"ppl": "text", "ppl_object": "object", "ppl_cloze": "cloze"}
GROUPS: tuple[str, ...] = (*PPL_VARIANTS, "qa", "rank", "propn")

INITIAL = "initial"
LIGHTTUNE = "lighttune"
METRIC_GROUPS: tuple[str, ...] = (*GROUPS, LIGHTTUNE)
# After light-tuning: probe perplexity and decoding, reported as TemporalWiki Tables 4 and 6.
LIGHTTUNED_GROUPS: tuple[str, ...] = ("ppl", "qa")
LIGHTTUNED_METRICS: dict[str, str] = {"ppl": "lt_ppl", "em": "lt_em", "f1": "lt_f1"}
# method -> what it trains on each month
DIFFSET, FULL, MIXREVIEW = "diffset", "full", "mixreview"
TRAINS_ON: dict[str, str] = {
    "diff": DIFFSET, "vanilla": DIFFSET, "kadapter": DIFFSET, "lora": DIFFSET,
    "modular": DIFFSET, "recadam": DIFFSET, "full": FULL, "mixreview": MIXREVIEW,
}
# Open-book methods, one per retriever (tw_jax.retrieval): INITIAL reads each month's
# probes with passages retrieved from that month's snapshot; they change the reader's input,
# so only the probe groups apply.
OPEN_BOOK: tuple[str, ...] = ("bm25", "dpr")
OPEN_BOOK_GROUPS: tuple[str, ...] = (*PPL_VARIANTS, "qa")
