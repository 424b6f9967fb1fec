"""Log-likelihoods of weighted tokens with lm-eval's ``is_greedy``, batched for a decoder-only model.

lm-eval's ``loglikelihood`` returns, per request, the summed log-probability of the
continuation and whether every continuation token is the argmax of its position (so greedy
decoding would write the continuation). :func:`tw_jax.models.token_scores.score_causal` gives the
first only; this is the same computation (rows sorted by length, batches of a fixed number of
rows, padded to :func:`~tw_jax.models.token_scores.bucket_length`, so each shape compiles once)
with the argmax check beside it, through the model's own module (its variants included).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.models.token_scores import CausalExample, bucket_length


@dataclass(frozen=True)
class GreedyScores:
    """Per example: summed log-likelihood of the weighted tokens, their count, and whether each
    of them is its position's argmax."""

    log_likelihood: np.ndarray
    num_tokens: np.ndarray
    greedy: np.ndarray


@functools.partial(jax.jit, static_argnames=("module",))
def _token_scores(module: nn.Module, params: Any, tokens: jax.Array,
                  mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``log p(tokens[:, t+1] | tokens[:, :t+1])`` and whether it is the argmax: ``(b, len-1)``."""
    logits = module.apply({"params": params}, tokens[:, :-1], attention_mask=mask[:, :-1])
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    targets = tokens[:, 1:]
    scores = jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    return scores, jnp.argmax(logits, axis=-1) == targets


def score_with_greedy(module: nn.Module, params: Any, examples: Sequence[CausalExample], *,
                      batch_size: int = 32, max_length: int | None = None) -> GreedyScores:
    """Every example's scores (see :class:`GreedyScores`); an example longer than
    ``max_length`` is a ValueError (cut it first: the model's ``truncate_left``)."""
    sums = np.zeros(len(examples), np.float64)
    counts = np.zeros(len(examples), np.float64)
    greedy = np.zeros(len(examples), bool)
    order = np.argsort([len(e.tokens) for e in examples], kind="stable")
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        batch = [examples[i] for i in index]
        longest = max(len(e.tokens) for e in batch)
        if max_length is not None and longest > max_length:
            raise ValueError(f"an example has {longest} tokens; the model takes {max_length}")
        length = max(bucket_length(longest), 2)
        if max_length is not None:
            length = max(min(length, max_length), longest)
        tokens = np.zeros((batch_size, length), np.int32)
        mask = np.zeros((batch_size, length), np.int32)
        weights = np.zeros((batch_size, length), np.float32)
        for row, example in enumerate(batch):
            tokens[row, : len(example.tokens)] = example.tokens
            mask[row, : len(example.tokens)] = 1
            weights[row, : len(example.weights)] = example.weights
        mask[len(batch):, 0] = 1  # filler rows see one token
        scores, best = jax.device_get(_token_scores(module, params, jnp.asarray(tokens),
                                                    jnp.asarray(mask)))
        scored = weights[:, 1:] > 0
        rows = len(batch)
        sums[index] = np.where(scored, np.asarray(scores, np.float64) * weights[:, 1:],
                               0.0).sum(-1)[:rows]
        counts[index] = weights[:, 1:].sum(-1)[:rows]
        greedy[index] = np.where(scored, np.asarray(best), True).all(-1)[:rows]
    return GreedyScores(sums, counts, greedy)
