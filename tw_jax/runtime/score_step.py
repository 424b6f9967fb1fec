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


def make_score_step(model: BaseModel, *, correct: bool = True
                    ) -> Callable[[Any, Batch], dict[str, jax.Array]]:
    """``score_fn(params, batch)``: per-example summed log-likelihood, loss tokens and (with
    ``correct``) correct tokens, deterministic (no dropout). Without ``correct`` XLA drops the
    argmax over the vocabulary at every position, as much as a third of the step."""

    def score_fn(params: Any, batch: Batch) -> dict[str, jax.Array]:
        logits = model.logits(params, batch, deterministic=True, rng=None)
        losses, correct_tokens, weights = token_losses(logits, batch)
        scores = {"log_likelihood": -jnp.sum(losses, axis=-1), "tokens": jnp.sum(weights, axis=-1)}
        if correct:
            scores["correct"] = jnp.sum(correct_tokens, axis=-1)
        return scores

    return score_fn
