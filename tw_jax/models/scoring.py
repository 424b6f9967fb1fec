"""Per-token log-likelihoods of given targets, the basis of perplexity and rank classification.

Everything is teacher-forced: each candidate is scored on its own tokens, never along the model's
own greedy path (the reference EvolvingQA code did the latter; see ``papers/NOTES.md``). The jitted
functions take the model as a static argument, so each model and shape compiles once.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp


@functools.partial(jax.jit, static_argnames=("model",))
def token_log_likelihoods(
    model: nn.Module,
    params: Any,
    input_ids: jax.Array,
    targets: jax.Array,
    attention_mask: jax.Array | None = None,
) -> jax.Array:
    """``log p(targets[b, t] | input_ids[b, :t+1])`` for every position: shape ``(batch, length)``.

    ``input_ids`` and ``targets`` have the same shape; for a causal LM ``targets`` is ``input_ids``
    shifted left by one (see :func:`causal_lm_log_likelihoods`).
    """
    logits = model.apply({"params": params}, input_ids, attention_mask=attention_mask)
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(log_probs, targets[..., None].astype(jnp.int32), axis=-1)[..., 0]


def shift_right(targets: jax.Array, start_id: int) -> jax.Array:
    """Decoder inputs for teacher forcing: ``start_id`` followed by ``targets[:, :-1]``."""
    start = jnp.full((targets.shape[0], 1), start_id, targets.dtype)
    return jnp.concatenate([start, targets[:, :-1]], axis=1)


@functools.partial(jax.jit, static_argnames=("model",))
def seq2seq_log_likelihoods(
    model: nn.Module,
    params: Any,
    input_ids: jax.Array,
    targets: jax.Array,
    input_mask: jax.Array | None = None,
    target_mask: jax.Array | None = None,
) -> jax.Array:
    """``log p(targets[b, t] | input_ids[b], targets[b, :t])`` of an encoder-decoder: ``(batch, len)``.

    Targets are right-padded (``target_mask`` 1 on real tokens); the decoder input is the targets
    shifted right after ``decoder_start_token_id``, as in training. Padded positions get values
    that the caller's weights must zero out.
    """
    decoder_input_ids = shift_right(targets.astype(jnp.int32), model.config.decoder_start_token_id)
    logits = model.apply(
        {"params": params}, input_ids, decoder_input_ids, attention_mask=input_mask,
        decoder_attention_mask=target_mask,
    )
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(log_probs, targets[..., None].astype(jnp.int32), axis=-1)[..., 0]


def causal_lm_log_likelihoods(
    model: nn.Module, params: Any, tokens: jax.Array, attention_mask: jax.Array | None = None
) -> jax.Array:
    """Log-likelihood of ``tokens[:, 1:]`` each given everything before it: ``(batch, length-1)``.

    Rows are right-padded; padded positions get values that the caller's weights must zero out.
    """
    mask = None if attention_mask is None else attention_mask[:, :-1]
    return token_log_likelihoods(model, params, tokens[:, :-1], tokens[:, 1:], mask)


def sequence_log_likelihood(log_probs: jax.Array, weights: jax.Array) -> jax.Array:
    """Sum of per-token log-likelihoods under 0/1 ``weights``: one score per row (rank classification)."""
    return jnp.sum(log_probs * weights, axis=-1)


def perplexity(log_probs: jax.Array, weights: jax.Array) -> jax.Array:
    """Token-level perplexity over every weighted token of the batch: ``exp(-mean log p)``."""
    total = jnp.sum(log_probs * weights)
    count = jnp.maximum(jnp.sum(weights), 1)
    return jnp.exp(-total / count)
