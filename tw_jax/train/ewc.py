"""EWC (Kirkpatrick et al. 2017, "Overcoming catastrophic forgetting in neural networks") as
TiC-LM runs it (Li et al., ACL 2025; apple/ml-tic-lm ``training/open_lm.patch``, class ``EWC``).

At the start of each update the model as the previous update left it (``θ*``, the run's
starting parameters) is run on ``batches`` of the update's own training data, drawn with
another shuffle (the reference: ``shard_shuffle_seed + 42``; here the run's seed + 42); the
gradient ``g_b`` of the mean token loss on each batch is squared and summed into a diagonal
"precision" ``F = Σ_b g_b²`` (their code's approximation to the Fisher). Training then adds

    penalty = weight / batches · Σ_i ½ · F_i · (θ_i − θ*_i)²

whose gradient is ``weight / batches · F · (θ − θ*)``: the reference's ``add_grad``, which adds
exactly that to every gradient (its ``compute_penalty`` logs the ½ form; the comments there
note the mismatch, which the gradient of this one penalty does not have). TiC-LM's settings:
``--ewc-weight 1e7``, ``--ewc-num-iterations 100`` (``training/README.md``).

Two of the reference's details are presets rather than silent choices:

- ``count='code'``: its loop (``if batch_id > self.num_iterations: break``) sums
  ``batches + 1`` batches and still divides by ``batches``; ``count='paper'`` (default) sums
  ``batches``.
- ``decay`` (online EWC, Schwarz et al. 2018's "EWC++"-style running Fisher): with
  ``decay > 0`` the precision carried from the previous update's checkpoint is kept as
  ``decay · F_prev + F_new`` instead of being replaced; TiC-LM does not accumulate (``decay=0``).

Frozen parameters (LoRA's base, K-Adapter's body) get no gradient, hence ``F = 0`` and no pull.
The state (``fisher`` and ``anchor``, both like the parameters) is saved with the checkpoint and
resumed exactly (:mod:`tw_jax.train.loss_terms`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from tw_jax.runtime.score_step import Batch, token_losses
from tw_jax.train.loss_terms import TermContext, like_params, same_as_params
from tw_jax.train.steps import behind_stop_gradient

log = logging.getLogger(__name__)

COUNTS: tuple[str, ...] = ("paper", "code")
# TiC-LM: the Fisher's batches are drawn with another shuffle than training's (their seed + 42).
FISHER_SEED_OFFSET = 42


@dataclasses.dataclass(frozen=True)
class EWC:
    """The EWC term (gin: ``@tw_jax.train.EWC()``; macros ``EWC_WEIGHT``, ``EWC_BATCHES``)."""

    name: ClassVar[str] = "ewc"
    weight: float = 1e7
    batches: int = 100
    count: str = "paper"
    decay: float = 0.0

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ValueError(f"EWC weight must be >= 0, got {self.weight}")
        if not isinstance(self.batches, int) or self.batches < 1:
            raise ValueError(f"EWC batches must be a positive integer, got {self.batches!r}")
        if self.count not in COUNTS:
            raise ValueError(f"EWC count must be one of {COUNTS}, got {self.count!r}")
        if not 0.0 <= self.decay <= 1.0:
            raise ValueError(f"EWC decay must be in [0, 1], got {self.decay}")

    @property
    def summed_batches(self) -> int:
        """How many batches the precision sums (the reference's loop takes one more)."""
        return self.batches + (1 if self.count == "code" else 0)

    def extra_flops(self, flops_per_step: float, steps: int) -> float:
        """A forward and backward pass per precision batch, as a train step's."""
        del steps
        return self.summed_batches * flops_per_step

    def abstract_state(self, abstract_params: Any) -> dict[str, Any]:
        return {"fisher": like_params(abstract_params), "anchor": same_as_params(abstract_params)}

    def init_state(self, context: TermContext) -> dict[str, Any]:
        """``F`` from ``summed_batches`` batches at the starting parameters; the state of this
        term in the starting checkpoint (the update before), if any, is carried with ``decay``."""
        fisher = precision(context, self.summed_batches)
        previous = context.previous(self.name) if self.decay > 0 else None
        if previous is not None:
            fisher = jax.tree.map(lambda new, old: new + self.decay * old, fisher,
                                  previous["fisher"])
        anchor = jax.tree.map(jnp.copy, context.params)
        return {"fisher": fisher, "anchor": anchor}

    def __call__(self, model: Any, params: Any, state: Any, batch: Batch, logits: jax.Array,
                 weights: jax.Array) -> jax.Array:
        del model, batch, logits, weights
        return self.weight / self.batches * penalty(params, state["fisher"], state["anchor"])


def penalty(params: Any, fisher: Any, anchor: Any) -> jax.Array:
    """``Σ ½ · F · (θ − θ*)²`` over every parameter, in float32."""
    terms = jax.tree.map(
        lambda p, f, a: 0.5 * jnp.sum(f * jnp.square(p.astype(jnp.float32) - a.astype(jnp.float32))),
        params, fisher, anchor)
    return sum(jax.tree.leaves(terms), jnp.float32(0.0))


def precision(context: TermContext, batches: int) -> Any:
    """``Σ_b g_b²`` over ``batches`` batches of the run's data (another shuffle), ``g_b`` the
    gradient of the mean token loss at ``context.params`` (dropout off, frozen leaves none)."""
    model, trainable = context.model, context.trainable

    def squared_gradient(params: Any, total: Any, batch: Batch) -> Any:
        def loss(p: Any) -> jax.Array:
            p = behind_stop_gradient(p, trainable)
            logits = model.logits(p, batch, deterministic=True, rng=None)
            losses, _, weights = token_losses(logits, batch)
            return jnp.sum(losses) / jnp.maximum(jnp.sum(weights), 1.0)

        grads = jax.grad(loss)(params)
        return jax.tree.map(lambda t, g: t + jnp.square(g.astype(jnp.float32)), total, grads)

    shardings = context.param_shardings
    add = jax.jit(squared_gradient, out_shardings=shardings, donate_argnums=(1,))
    total = jax.jit(lambda p: jax.tree.map(lambda x: jnp.zeros(x.shape, jnp.float32), p),
                    out_shardings=shardings)(context.params)
    stream = context.batches(context.seed + FISHER_SEED_OFFSET)
    for _ in range(batches):
        total = add(context.params, total, next(stream))
    log.info("EWC: precision from %d batches of the update's data", batches)
    return total
