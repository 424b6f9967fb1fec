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

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from tw_jax.evaluate.rank import PREVIOUS_SEPARATOR
from tw_jax.evaluate.scorer import bucket_length, is_encoder_decoder
from tw_jax.models import decoding
from tw_jax.tasks import metrics
from tw_jax.tasks.probes import SENTINEL, masked_cloze


def probe_prompt(row: Mapping[str, str], *, t5: bool, cloze: bool = False) -> str:
    """The prompt that asks a model for the row's object."""
    if t5:
        masked = masked_cloze(row) if cloze else None
        return masked if masked is not None else f"{row['subject']} {row['relation']} {SENTINEL}"
    return f"{row['subject']} {row['relation']}"


def _batch(encoded: list[list[int]], batch_size: int, left: bool) -> tuple[np.ndarray, np.ndarray]:
    length = bucket_length(max(len(e) for e in encoded))
    ids = np.zeros((batch_size, length), np.int32)
    mask = np.zeros((batch_size, length), np.int32)
    for i, row in enumerate(encoded):
        if left:
            ids[i, length - len(row):], mask[i, length - len(row):] = row, 1
        else:
            ids[i, : len(row)], mask[i, : len(row)] = row, 1
    mask[len(encoded):, -1 if left else 0] = 1  # filler rows: one visible token
    return ids, mask


def decode_answers(
    model: nn.Module,
    params: Any,
    vocabulary: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 10,
    beam_size: int = 1,
    batch_size: int = 32,
) -> list[str]:
    """The answer text each prompt gets (sentinels stripped for T5, first line for GPT-2)."""
    t5 = is_encoder_decoder(model)
    eos = vocabulary.eos_id
    answers: list[str] = []
    for start in range(0, len(prompts), batch_size):
        chunk = list(prompts[start : start + batch_size])
        encoded = [list(vocabulary.encode(p)) + ([eos] if t5 else []) for p in chunk]
        if any(not e for e in encoded):
            raise ValueError("an empty prompt cannot be continued")
        ids, mask = _batch(encoded, batch_size, left=not t5)
        if beam_size == 1:
            out = decoding.greedy_decode(
                model, params, jnp.asarray(ids), jnp.asarray(mask),
                max_new_tokens=max_new_tokens, eos_id=eos, pad_id=0,
            )
        else:
            beams, _ = decoding.beam_search(
                model, params, jnp.asarray(ids), jnp.asarray(mask), beam_size=beam_size,
                max_new_tokens=max_new_tokens, eos_id=eos, pad_id=0,
            )
            out = beams[:, 0]
        for row in np.asarray(out)[: len(chunk)]:
            tokens = row.tolist()
            if eos in tokens:
                tokens = tokens[: tokens.index(eos)]
            text = vocabulary.decode(tokens)
            answers.append(metrics.answer_from_t5(text) if t5 else metrics.answer_from_gpt2(text))
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
    model: nn.Module,
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
    t5 = is_encoder_decoder(model)
    prompts = [probe_prompt(r, t5=t5, cloze=cloze) for r in rows]
    predictions = decode_answers(
        model, params, vocabulary, prompts, max_new_tokens=max_new_tokens, beam_size=beam_size,
        batch_size=batch_size,
    )
    scores = qa_scores(
        predictions, [[r["object"]] for r in rows], [previous_answers(r) for r in rows]
    )
    return scores, predictions
