"""T5's fillers for a blank: beam search from a sentence holding ``<extra_id_0>``, and the span
each finished sequence writes after that sentinel (ECBD's recall@k, Appendix D).

A family's :meth:`~tw_jax.models.base.BaseModel.cloze_fillers` is how an evaluator asks for
them; T5 answers with :func:`top_k_spans`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from tw_jax.data.tokens import encode_with_offsets
from tw_jax.models.decoding import beam_search
from tw_jax.models.token_scores import bucket_length

# T5's first two sentinels: the blank, and the end of the span that fills it.
SENTINEL, SENTINEL_END = "<extra_id_0>", "<extra_id_1>"


def _sentinel_id(vocabulary: Any, text: str) -> int:
    ids, _ = encode_with_offsets(vocabulary, text)
    return ids[-1]


def extract_span(vocabulary: Any, ids: Sequence[int]) -> str:
    """The text a T5 output puts after ``<extra_id_0>``, up to the next sentinel or EOS."""
    first = _sentinel_id(vocabulary, SENTINEL)
    extra = int(getattr(vocabulary, "extra_ids", 0) or 0)
    sentinels = set(range(vocabulary.vocab_size - extra, vocabulary.vocab_size))
    sentinels |= {first, _sentinel_id(vocabulary, SENTINEL_END)}
    ids = [int(i) for i in ids]
    if first in ids:
        ids = ids[ids.index(first) + 1 :]
    kept = []
    for token in ids:
        if token == vocabulary.eos_id or token in sentinels:
            break
        kept.append(token)
    return " ".join(vocabulary.decode(kept).split()) if kept else ""


def top_k_spans(module: Any, params: Any, vocabulary: Any, sentences: Sequence[str], *, k: int,
                beam_size: int, max_new_tokens: int, batch_size: int = 8) -> list[list[str]]:
    """The ``k`` best distinct span predictions of each masked sentence (T5 beam search)."""
    encoded = [encode_with_offsets(vocabulary, s)[0] + [vocabulary.eos_id] for s in sentences]
    out: list[list[str]] = [[] for _ in sentences]
    order = np.argsort([len(e) for e in encoded], kind="stable")
    for begin in range(0, len(order), batch_size):
        rows = order[begin : begin + batch_size]
        length = bucket_length(max(len(encoded[i]) for i in rows))
        ids = np.zeros((batch_size, length), np.int32)
        mask = np.zeros((batch_size, length), np.int32)
        mask[:, 0] = 1  # filler rows attend to one token
        for row, index in enumerate(rows):
            ids[row, : len(encoded[index])] = encoded[index]
            mask[row, : len(encoded[index])] = 1
        sequences, _ = beam_search(module, params, jnp.asarray(ids), jnp.asarray(mask),
                                   beam_size=beam_size, max_new_tokens=max_new_tokens,
                                   eos_id=vocabulary.eos_id)
        sequences = np.asarray(sequences)
        for row, index in enumerate(rows):
            found: list[str] = []
            for beam in sequences[row]:
                span = extract_span(vocabulary, beam)
                if span and span not in found:
                    found.append(span)
                if len(found) == k:
                    break
            out[index] = found
    return out
