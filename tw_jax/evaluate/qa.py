"""EM and F1 of decoded answers (SQuAD normalisation), against the new and the previous answer.

Prompts follow :mod:`tw_jax.tasks.probes`: GPT-2 continues ``subject relation`` (the answer is
the continuation up to its first line break or EOS), T5 fills ``subject relation <extra_id_0>``
(or the masked cloze sentence) and the answer is the first span after the sentinel. Decoding is
greedy (``beam_size=1``) or beam search, batched with padded static shapes (GPT-2 prompts are
left-padded, T5 inputs right-padded). Scores come from :func:`tw_jax.tasks.metrics.squad`.

For UPDATED probes (and EvolvingQA's edited questions) ``previous`` answers give ``em_previous``
and ``f1_previous``: how often the model still says the outdated answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tw_jax.evaluate.rank import PREVIOUS_SEPARATOR
from tw_jax.models import model_for
from tw_jax.models.token_scores import bucket_length
from tw_jax.tasks import metrics
from tw_jax.tasks.probes import SENTINEL, masked_cloze


def probe_prompt(row: Mapping[str, str], *, sentinel: bool, cloze: bool = False) -> str:
    """The prompt that asks a model for the row's object (``sentinel``: a model that fills
    sentinel spans, T5)."""
    if sentinel:
        masked = masked_cloze(row) if cloze else None
        return masked if masked is not None else f"{row['subject']} {row['relation']} {SENTINEL}"
    return f"{row['subject']} {row['relation']}"


def decode_answers(
    model: Any,
    params: Any,
    vocabulary: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 10,
    beam_size: int = 1,
    batch_size: int = 32,
) -> list[str]:
    """The answer text each prompt gets (sentinels stripped for T5, first line for GPT-2)."""
    model = model_for(model)
    encoded = [model.prompt_ids(vocabulary, p) for p in prompts]
    if any(not e for e in encoded):
        raise ValueError("an empty prompt cannot be continued")
    return decode_token_rows(model, params, vocabulary, encoded, max_new_tokens=max_new_tokens,
                             beam_size=beam_size, batch_size=batch_size)


def decode_token_rows(
    model: Any, params: Any, vocabulary: Any, rows: Sequence[Sequence[int]], *,
    max_new_tokens: int, beam_size: int = 1, batch_size: int = 32,
) -> list[str]:
    """The answer each tokenised prompt (as the model's ``prompt_ids`` makes them) gets,
    batched with static shapes: ``batch_size`` rows padded to a bucketed length."""
    model = model_for(model)
    eos = vocabulary.eos_id
    answers: list[str] = []
    for start in range(0, len(rows), batch_size):
        chunk = [list(r) for r in rows[start : start + batch_size]]
        length = bucket_length(max(len(r) for r in chunk))
        ids, mask = model.prompt_rows(chunk, batch_size, length)
        out = model.decode(params, ids, mask, max_new_tokens=max_new_tokens, eos_id=eos,
                           beam_size=beam_size, pad_id=0)
        for row in np.asarray(out)[: len(chunk)]:
            tokens = row.tolist()
            if eos in tokens:
                tokens = tokens[: tokens.index(eos)]
            answers.append(model.answer_text(vocabulary.decode(tokens)))
    return answers


def previous_answers(row: Mapping[str, str]) -> list[str]:
    """The ``previous_object`` of a probe row, split on `` | `` (empty when none)."""
    return [p for p in row.get("previous_object", "").split(PREVIOUS_SEPARATOR) if p.strip()]


def qa_scores(
    predictions: Sequence[str],
    answers: Sequence[Sequence[str]],
    previous: Sequence[Sequence[str]] | None = None,
) -> dict[str, float]:
    """``em``/``f1`` against ``answers`` and, over rows with previous answers, ``em_previous``/
    ``f1_previous`` (percent)."""
    scores = metrics.squad([list(a) for a in answers], list(predictions))
    if previous is not None:
        kept = [(p, list(prev)) for p, prev in zip(predictions, previous, strict=True) if prev]
        if kept:
            old = metrics.squad([prev for _, prev in kept], [p for p, _ in kept])
            scores["em_previous"], scores["f1_previous"] = old["em"], old["f1"]
    return scores


def probe_qa(
    model: Any,
    params: Any,
    vocabulary: Any,
    rows: Sequence[Mapping[str, str]],
    *,
    cloze: bool = False,
    max_new_tokens: int = 10,
    beam_size: int = 1,
    batch_size: int = 32,
) -> tuple[dict[str, float], list[str]]:
    """EM/F1 (and the previous-answer scores) of probe rows; also returns the predictions."""
    sentinel = model_for(model).fills_sentinel_spans
    prompts = [probe_prompt(r, sentinel=sentinel, cloze=cloze) for r in rows]
    predictions = decode_answers(
        model, params, vocabulary, prompts, max_new_tokens=max_new_tokens, beam_size=beam_size,
        batch_size=batch_size,
    )
    scores = qa_scores(
        predictions, [[r["object"]] for r in rows], [previous_answers(r) for r in rows]
    )
    return scores, predictions
