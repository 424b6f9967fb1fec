"""Rank classification: which candidate answer does the model find most likely?

Each candidate is scored by teacher forcing on its own tokens (never along the model's greedy
path, as the EvolvingQA reference did), as the model builds the example of a filler
(:meth:`~tw_jax.models.base.BaseModel.fill_example`): GPT-2 scores the candidate's tokens after
the prompt (``prompt + separator + candidate``, EOS as BOS in front); T5 scores them as the target
``<extra_id_0> candidate`` after the prompt (which holds ``<extra_id_0>``, or gets it appended).
Two rankings: by the summed log-likelihood and by the length-normalised mean per token. The gold
candidate must score strictly highest to count: a tie is a miss.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tw_jax.models import model_for

PREVIOUS_SEPARATOR = " | "


@dataclass(frozen=True)
class RankItem:
    """A prompt, its candidate answers and the index of the right one."""

    prompt: str
    candidates: tuple[str, ...]
    gold: int = 0

    def __post_init__(self) -> None:
        if len(self.candidates) < 2:
            raise ValueError(f"rank classification needs 2+ candidates: {self.candidates}")
        if not 0 <= self.gold < len(self.candidates):
            raise ValueError(f"gold index {self.gold} outside {len(self.candidates)} candidates")


@dataclass(frozen=True)
class RankResult:
    """Per-item scores ``(summed, mean)`` of each candidate, and the two accuracies in %."""

    summed: list[np.ndarray]
    mean: list[np.ndarray]
    golds: list[int]

    @staticmethod
    def _accuracy(scores: list[np.ndarray], golds: list[int]) -> float:
        if not scores:
            return float("nan")
        hits = 0
        for row, gold in zip(scores, golds, strict=True):
            others = np.delete(row, gold)
            hits += bool(np.all(row[gold] > others))
        return 100.0 * hits / len(scores)

    @property
    def accuracy(self) -> float:
        return self._accuracy(self.summed, self.golds)

    @property
    def accuracy_normalised(self) -> float:
        return self._accuracy(self.mean, self.golds)


def rank_classify(
    model: Any,
    params: Any,
    vocabulary: Any,
    items: Sequence[RankItem],
    *,
    separator: str = " ",
    batch_size: int = 32,
) -> RankResult:
    """Score every candidate of every item in one batched pass; see :class:`RankResult`."""
    model = model_for(model)
    examples, owners = [], []
    for index, item in enumerate(items):
        item_examples = [model.fill_example(vocabulary, item.prompt, candidate,
                                            separator=separator) for candidate in item.candidates]
        examples.extend(item_examples)
        owners.extend([index] * len(item_examples))
    scores = model.score(params, examples, batch_size=batch_size)
    if np.any(scores.num_tokens == 0):
        raise ValueError("a candidate has no tokens to score (empty answer?)")
    summed, mean = scores.log_likelihood, scores.mean_log_likelihood()
    owners_arr = np.asarray(owners)
    return RankResult(
        summed=[summed[owners_arr == i] for i in range(len(items))],
        mean=[mean[owners_arr == i] for i in range(len(items))],
        golds=[item.gold for item in items],
    )


def probe_rank_items(rows: Sequence[Mapping[str, str]], model: Any) -> list[RankItem]:
    """New object against the previous one(s) for each probe row with a ``previous_object``.

    The prompt is the model's probe prompt (``subject relation``; T5: ``subject relation
    <extra_id_0>``); rows without a previous object, or whose previous object equals the new
    one, are left out.
    """
    model = model_for(model)
    items = []
    for row in rows:
        previous = [p for p in row.get("previous_object", "").split(PREVIOUS_SEPARATOR) if p]
        previous = [p for p in dict.fromkeys(previous) if p != row["object"]]
        if not previous:
            continue
        items.append(RankItem(model.probe_prompt(row), (row["object"], *previous), gold=0))
    return items
