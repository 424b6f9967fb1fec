"""Tallies of one SSM input (``diffset`` or ``full``): where every article and chunk went.

Every article read is either in an example or skipped with a reason (``empty_text``: no words;
``no_example``: none of its chunks gave one); every chunk likewise (``no_salient_span``: spaCy
found no entity with a selected label; ``sentinel_text``: the text itself contains
``<extra_id_N>``, which the T5 vocabulary would read as a sentinel; ``too_long_for_spacy``: a
"chunk" of a few enormous words, longer than spaCy's ``max_length``). Tallies are merged in input
order, so the first examples of each skip reason are the same whatever ran them; they travel
between processes and Beam workers as JSON (:meth:`to_state`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tw_jax.preprocess.runners.accounting import Skips

_COUNTS = ("articles", "chunks", "examples", "words", "chars")


class SsmTally:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter({name: 0 for name in _COUNTS})
        self.articles_used = 0
        self.chunks_used = 0
        self.article_skips = Skips()
        self.chunk_skips = Skips()
        self.entities: Counter[str] = Counter()  # salient entities found, by label
        self.masked: Counter[str] = Counter()  # masked spans, by label

    def merge(self, other: SsmTally) -> SsmTally:
        self.counts.update(other.counts)
        self.articles_used += other.articles_used
        self.chunks_used += other.chunks_used
        self.article_skips.merge(other.article_skips)
        self.chunk_skips.merge(other.chunk_skips)
        self.entities.update(other.entities)
        self.masked.update(other.masked)
        return self

    # --- transport ----------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "used": [self.articles_used, self.chunks_used],
            "skips": [[dict(s.counts), s.examples] for s in (self.article_skips, self.chunk_skips)],
            "entities": dict(self.entities),
            "masked": dict(self.masked),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SsmTally:
        tally = cls()
        tally.counts.update(state["counts"])
        tally.articles_used, tally.chunks_used = state["used"]
        for skips, (counts, examples) in zip(
            (tally.article_skips, tally.chunk_skips), state["skips"], strict=True
        ):
            skips.counts.update(counts)
            skips.examples = {reason: list(where) for reason, where in examples.items()}
        tally.entities.update(state["entities"])
        tally.masked.update(state["masked"])
        return tally

    # --- report -------------------------------------------------------------------------------

    def as_dict(self) -> dict[str, Any]:
        articles, chunks = self.counts["articles"], self.counts["chunks"]
        articles_accounted = self.articles_used + self.article_skips.total
        chunks_accounted = self.chunks_used + self.chunk_skips.total
        return {
            "articles": articles,
            "articles_with_examples": self.articles_used,
            "articles_skipped": self.article_skips.as_dict(),
            "chunks": chunks,
            "chunks_with_examples": self.chunks_used,
            "chunks_skipped": self.chunk_skips.as_dict(),
            "examples": self.counts["examples"],
            "masked_spans": sum(self.masked.values()),
            "masked_spans_by_label": dict(sorted(self.masked.items())),
            "salient_entities_by_label": dict(sorted(self.entities.items())),
            "words": self.counts["words"],
            "chars": self.counts["chars"],
            "accounting": {
                "articles_accounted": articles_accounted,
                "chunks_accounted": chunks_accounted,
                "balanced": articles_accounted == articles and chunks_accounted == chunks,
            },
        }
