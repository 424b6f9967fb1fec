"""The ``stats.json`` of a DiffSet folder: articles by kind, skips by reason, text sizes.

One accumulator serves the local path and the Beam pipeline (as the state of a CombineFn), so both
report the same figures. Every page of the new dump is accounted for: it is one of the article
kinds or a skip with its reason, and ``accounting.balanced`` says the sums agree.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

from tw_jax.preprocess.diffset.algorithm import EMPTY, IN_DIFFSET, ArticleDiff
from tw_jax.preprocess.runners.accounting import Skips

SIDES = ("old", "new")


class ArticleSummary(NamedTuple):
    """What the tallies need of one compared article: small enough to send between processes
    (a named tuple: made for every article, at a third of a frozen dataclass's cost)."""

    id: int
    title: str
    kind: str
    in_old: bool
    full: tuple[int, int, int]  # paragraphs, tokens, characters of the whole article
    diff: tuple[int, int, int]  # the same for the part that enters the DiffSet
    diff_sentences: int


def _sizes(paragraphs: tuple[str, ...], text: str) -> tuple[int, int, int]:
    """Paragraphs, whitespace-separated tokens and characters (paragraphs joined by one), from
    ``text``, the paragraphs joined by newlines.

    An article's paragraphs are never empty and have their whitespace collapsed: one space
    between tokens, none at either end (:func:`~tw_jax.preprocess.plaintext.wikitext.to_paragraphs`,
    WikiExtractor lines, sentences joined by spaces). So the spaces of the paragraphs, plus one
    per paragraph, count the tokens, without the thousand strings ``split()`` would make; the
    paragraphs joined by newlines are as long as joined by spaces.
    """
    if not paragraphs:
        return 0, 0, 0
    return len(paragraphs), text.count(" ") + len(paragraphs), len(text)


def summarize(result: ArticleDiff) -> ArticleSummary:
    return ArticleSummary(
        result.id,
        result.title,
        result.kind,
        result.in_old,
        _sizes(result.paragraphs, result.text),
        _sizes(result.diff_paragraphs, result.diff_text),
        result.diff_sentences,
    )


def _text_sizes() -> Counter[str]:
    return Counter(articles=0, paragraphs=0, tokens=0, chars=0)


class DiffsetStats:
    def __init__(self) -> None:
        self.pages = Counter({side: 0 for side in SIDES})  # pages read, before any skip
        self.old_articles = 0
        self.skips = {side: Skips() for side in SIDES}
        self.kinds: Counter[str] = Counter()
        self.empty = Skips()  # articles with no text left after cleaning: a skip of the new side
        self.matched_old = 0
        self.diffset_sentences = 0
        self.sizes = {name: _text_sizes() for name in ("diffset", "full", "unchanged")}

    # --- accumulation -------------------------------------------------------------------------

    def add_result(self, result: ArticleDiff) -> None:
        self.add(summarize(result))

    def add(self, article: ArticleSummary) -> None:
        # Results are tallied apart from the readers' skips: with a worker pool the reader runs
        # in the pool's feeder thread, and the two must not update one counter.
        self.matched_old += article.in_old
        if article.kind == EMPTY:
            self.empty.add(EMPTY, f"page id {article.id} ({article.title})")
            return
        self.kinds[article.kind] += 1
        self._add_text(self.sizes["full"], article.full)
        if article.kind in IN_DIFFSET:
            self._add_text(self.sizes["diffset"], article.diff)
            self.diffset_sentences += article.diff_sentences
        else:
            self._add_text(self.sizes["unchanged"], article.full)

    @staticmethod
    def _add_text(tally: Counter[str], sizes: tuple[int, int, int]) -> None:
        paragraphs, tokens, chars = sizes
        tally["articles"] += 1
        tally["paragraphs"] += paragraphs
        tally["tokens"] += tokens
        tally["chars"] += chars

    def merge(self, other: DiffsetStats) -> DiffsetStats:
        self.pages.update(other.pages)
        self.old_articles += other.old_articles
        for side in SIDES:
            self.skips[side].merge(other.skips[side])
        self.kinds.update(other.kinds)
        self.empty.merge(other.empty)
        self.matched_old += other.matched_old
        self.diffset_sentences += other.diffset_sentences
        for name, sizes in other.sizes.items():
            self.sizes[name].update(sizes)
        return self

    # --- report -------------------------------------------------------------------------------

    def as_dict(self, **extra: Any) -> dict[str, Any]:
        new_skips = Skips()
        new_skips.merge(self.skips["new"])
        new_skips.merge(self.empty)
        new_accounted = sum(self.kinds.values()) + new_skips.total
        old_accounted = self.old_articles + self.skips["old"].total
        return {
            **extra,
            "articles": {
                "new": self.kinds["new"],
                "changed": self.kinds["changed"],
                "unchanged": self.kinds["unchanged"],
                "below_min_changed_chars": self.kinds["below_min_changed_chars"],
                "deleted": self.old_articles - self.matched_old,
            },
            "diffset": {**self.sizes["diffset"], "sentences": self.diffset_sentences},
            "full": dict(self.sizes["full"]),
            "unchanged": dict(self.sizes["unchanged"]),
            "old_dump": {
                "pages": self.pages["old"],
                "articles": self.old_articles,
                "skipped": self.skips["old"].as_dict(),
            },
            "new_dump": {"pages": self.pages["new"], "skipped": new_skips.as_dict()},
            "accounting": {
                "new_pages": self.pages["new"],
                "new_pages_accounted": new_accounted,
                "old_pages": self.pages["old"],
                "old_pages_accounted": old_accounted,
                "balanced": new_accounted == self.pages["new"]
                and old_accounted == self.pages["old"],
            },
        }
