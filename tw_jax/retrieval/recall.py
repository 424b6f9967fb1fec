"""Answer recall@k: how often the top-k retrieved passages hold a gold answer.

DPR's own retrieval metric, Karpukhin et al. 2020 (Dense Passage Retrieval for Open-Domain
Question Answering), Table 2: "Top-20 & Top-100 retrieval accuracy on test sets, measured as the
percentage of top 20/100 retrieved passages that contain the answer." — per question, a hit when
any of its first k passages contains a gold answer; recall@k is the fraction of questions with a
hit. "Contains" is read after SQuAD v1.1 normalisation of both sides
(:func:`tw_jax.text.answers.normalize_answer`: lower case, no punctuation, no articles, single
spaces) and on whole words, as DPR matches answer tokens, so "art" is not found in "party". A
gold answer that normalises to nothing (only punctuation or articles) is never found.
"""

from __future__ import annotations

from collections.abc import Sequence

from tw_jax.text.answers import normalize_answer

KS = (1, 5, 20)


def normalized_words(text: str) -> str:
    """``text`` normalised as SQuAD does, padded with one space each side for word matching."""
    return f" {normalize_answer(text)} "


def has_answer(passage: str, answers: Sequence[str]) -> bool:
    """Whether the passage holds one of the answers as whole words after normalisation."""
    words = normalized_words(passage)
    return any(len(gold) > 2 and gold in words for gold in map(normalized_words, answers))


def first_hit(passages: Sequence[str], answers: Sequence[str]) -> int | None:
    """The 0-based rank of the first passage that holds an answer, or None."""
    golds = [g for g in map(normalized_words, answers) if len(g) > 2]
    for rank, passage in enumerate(passages):
        words = normalized_words(passage)
        if any(gold in words for gold in golds):
            return rank
    return None


def recall_at(first_hits: Sequence[int | None], ks: Sequence[int] = KS) -> dict[str, float | None]:
    """``answer_recall@k`` for each k: the fraction of questions whose first hit ranks below k
    (None when there are no questions: a rate of nothing is not 0)."""
    total = len(first_hits)
    return {f"answer_recall@{k}": (sum(h is not None and h < k for h in first_hits) / total
                                   if total else None) for k in ks}
