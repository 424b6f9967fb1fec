"""One train step (not jitted: the trainer jits it with its shardings).

The learning rate is an argument of the step, not a constant in it: the step builds its
optimizer at the rate it is given (``optimizer_at``), and the trainer evaluates the schedule
(:class:`~tw_jax.train.trainer.TrainStep`). A run's schedule, length or peak rate then leaves
the compiled program unchanged, so the next month's update, another method with the same
parameter layout, or a resume at another rate reuses the compilation (in memory or from a
persistent XLA cache) instead of compiling the step again. The optimizer's state is the same as
with the schedule inside (optax keeps its update count either way).

The loss is :func:`tw_jax.runtime.score_step.token_losses` averaged over the loss tokens.
Frozen parameters enter the forward pass through ``jax.lax.stop_gradient``, so XLA drops their
weight gradients (the optimizer would zero them anyway; here the backward pass does not compute
them). The dropout key of step ``s`` is
``fold_in(key(seed), s)``: a pure function of the seed and the step, so a resumed run draws the
same dropout masks as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax

from tw_jax.models import BaseModel
from tw_jax.runtime.score_step import Batch, token_losses
from tw_jax.train.loss_terms import LossTerm


def all_finite(tree: Any) -> jax.Array:
    """True when every element of every array of ``tree`` is finite."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.bool_(True)


def behind_stop_gradient(params: Any, trainable: Any) -> Any:
    """``params`` with every frozen leaf (``trainable`` False) behind ``jax.lax.stop_gradient``:
    XLA then computes no weight gradient for it."""
    return jax.tree.map(lambda x, t: x if t else jax.lax.stop_gradient(x), params, trainable)


def make_train_step(
    model: BaseModel,
    optimizer_at: Callable[[optax.Schedule], optax.GradientTransformation],
    trainable: Any,
    seed: int,
    loss_terms: Sequence[LossTerm] = (),
) -> Callable[..., tuple[Any, Any, dict[str, jax.Array]]]:
    """``step_fn(params, opt_state, step, learning_rate, batch) -> (params, opt_state, metrics)``
    (not jitted).

    ``optimizer_at(schedule)`` is the run's optimizer at a schedule; the step calls it with the
    constant schedule of its ``learning_rate`` argument (the rate of the update this step may
    apply). ``trainable`` is a tree of booleans like the params. Metrics: loss, accuracy, tokens (loss
    tokens), real_tokens (all unmasked input and target tokens), grad_norm (of the trainable
    gradient, before clipping), grads_finite and params_finite (whether every gradient and every
    updated parameter is finite: the trainer accepts no step without both).

    With ``loss_terms`` (:mod:`tw_jax.train.loss_terms`) ``opt_state`` is ``(optimizer state,
    {term name: term state})``: each term's value is added to the mean token loss before the
    gradient, and logged as ``<name>_loss``; ``loss`` stays the token loss.
    """
    base_key = jax.random.key(seed)

    def step_fn(params: Any, opt_state: Any, step: jax.Array, learning_rate: jax.Array,
                batch: Batch) -> tuple:
        rng = jax.random.fold_in(base_key, step)
        tx = optimizer_at(lambda count: learning_rate)
        tx_state, term_states = opt_state if loss_terms else (opt_state, None)

        def loss_fn(p: Any) -> tuple[jax.Array, tuple[Any, ...]]:
            p = behind_stop_gradient(p, trainable)
            logits = model.logits(p, batch, deterministic=False, rng=rng)
            losses, correct, weights = token_losses(logits, batch)
            count = jnp.maximum(jnp.sum(weights), 1.0)
            loss = jnp.sum(losses) / count
            extra = {term.name: term(model, p, term_states[term.name], batch, logits, weights)
                     for term in loss_terms}
            total = loss + sum(extra.values()) if extra else loss
            return total, (loss, jnp.sum(correct) / count, jnp.sum(weights), extra)

        (_, (loss, accuracy, tokens, extra)), grads = jax.value_and_grad(
            loss_fn, has_aux=True)(params)
        updates, tx_state = tx.update(grads, tx_state, params)
        params = optax.apply_updates(params, updates)
        opt_state = (tx_state, term_states) if loss_terms else tx_state
        real = jnp.sum(batch["decoder_mask"]) + jnp.sum(batch.get("encoder_mask", 0))
        metrics = {
            "loss": loss,
            "accuracy": accuracy,
            "tokens": tokens,
            "real_tokens": real.astype(jnp.float32),
            "grad_norm": optax.global_norm(grads),
            # Element by element: a norm of finite values can overflow to inf.
            "grads_finite": all_finite(grads),
            "params_finite": all_finite(params),
            **{f"{name}_loss": value for name, value in extra.items()},
        }
        return params, opt_state, metrics

    return step_fn
