"""The loss both training and evaluation compute, and the jitted-to-be scoring step.

The loss is token-level cross-entropy over ``decoder_loss_weights`` (see
:mod:`tw_jax.runtime.task_data`); training averages it, scoring sums it per example.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from tw_jax.models import BaseModel

Batch = dict[str, jax.Array]


def token_losses(logits: jax.Array, batch: Batch) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(cross-entropy, correct, weights)`` per position, weights float32."""
    targets = batch["decoder_target_tokens"]
    weights = batch["decoder_loss_weights"].astype(jnp.float32)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets)
    correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)
    return losses * weights, correct * weights, weights


def make_score_step(model: BaseModel) -> Callable[[Any, Batch], dict[str, jax.Array]]:
    """``score_fn(params, batch)``: per-example summed log-likelihood, loss tokens and correct
    tokens, deterministic (no dropout)."""

    def score_fn(params: Any, batch: Batch) -> dict[str, jax.Array]:
        logits = model.logits(params, batch, deterministic=True, rng=None)
        losses, correct, weights = token_losses(logits, batch)
        return {
            "log_likelihood": -jnp.sum(losses, axis=-1),
            "tokens": jnp.sum(weights, axis=-1),
            "correct": jnp.sum(correct, axis=-1),
        }

    return score_fn
