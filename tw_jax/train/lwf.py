"""LwF (Li and Hoiem 2017, "Learning without Forgetting") as TiC-LM runs it (Li et al., ACL
2025; apple/ml-tic-lm ``training/open_lm.patch``, ``train_one_epoch``).

A frozen copy of the model as the previous update left it (the run's starting parameters) reads
every training batch beside the model being trained (dropout off, no gradient); the term is

- ``kind='kl'`` (``--lwf-kl``): ``F.kl_div(log_softmax(out / T), log_softmax(prev / T),
  log_target=True)`` with PyTorch's default ``reduction='mean'``, i.e.
  ``Σ_tokens Σ_v p_prev · (log p_prev − log p_out) / (tokens · V)``, the mean over tokens *and*
  vocabulary entries, at temperature ``T`` (``--lwf-temperature`` 2.0) and without a T² factor;
- ``kind='argmax'`` (without ``--lwf-kl``): the cross-entropy of the unscaled logits against the
  previous model's argmax, averaged over tokens;

times ``weight`` (``--lwf-weight`` 1.0). Averaging over the vocabulary too makes the term about
``1 / V`` of the KL itself (PyTorch warns that ``'mean'`` is not the KL's definition); with GPT-2's
50,257 entries, weight 1 barely moves training. ``reduction='batchmean'`` is the KL as defined
(and as Li and Hoiem's loss sums over classes): summed over the vocabulary, averaged over tokens.
TiC-LM's ``'mean'`` is the default; the two are presets, not a silent choice. The reference trains on unpadded blocks, so its means
run over every position; here they run over the loss tokens (padding and, for T5, nothing but
the targets), which is the same on packed LM blocks.

The state is the frozen copy (``teacher``, like the parameters: one more copy in memory), saved
with the checkpoint and resumed exactly (:mod:`tw_jax.train.loss_terms`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from tw_jax.runtime.score_step import Batch
from tw_jax.train.loss_terms import TermContext, same_as_params

KINDS: tuple[str, ...] = ("kl", "argmax")
REDUCTIONS: tuple[str, ...] = ("mean", "batchmean")


@dataclasses.dataclass(frozen=True)
class LwF:
    """The LwF term (gin: ``@tw_jax.train.LwF()``; macros ``LWF_WEIGHT``,
    ``LWF_TEMPERATURE``, ``LWF_KIND``)."""

    name: ClassVar[str] = "lwf"
    weight: float = 1.0
    temperature: float = 2.0
    kind: str = "kl"
    reduction: str = "mean"

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ValueError(f"LwF weight must be >= 0, got {self.weight}")
        if self.temperature <= 0:
            raise ValueError(f"LwF temperature must be > 0, got {self.temperature}")
        if self.kind not in KINDS:
            raise ValueError(f"LwF kind must be one of {KINDS}, got {self.kind!r}")
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"LwF reduction must be one of {REDUCTIONS}, got {self.reduction!r}")

    def extra_flops(self, flops_per_step: float, steps: int) -> float:
        """The previous model's forward pass every step: a third of a train step's FLOPs
        (forward 2N per token of the step's 6N)."""
        return steps * flops_per_step / 3.0

    def abstract_state(self, abstract_params: Any) -> dict[str, Any]:
        return {"teacher": same_as_params(abstract_params)}

    def init_state(self, context: TermContext) -> dict[str, Any]:
        return {"teacher": jax.tree.map(jnp.copy, context.params)}

    def __call__(self, model: Any, params: Any, state: Any, batch: Batch, logits: jax.Array,
                 weights: jax.Array) -> jax.Array:
        del params
        previous = jax.lax.stop_gradient(
            model.logits(state["teacher"], batch, deterministic=True, rng=None))
        if self.kind == "kl":
            value = kl_mean(logits, previous, weights, self.temperature)
            if self.reduction == "batchmean":
                value = value * logits.shape[-1]
        else:
            value = argmax_cross_entropy(logits, previous, weights)
        return self.weight * value


def kl_mean(logits: jax.Array, previous: jax.Array, weights: jax.Array,
            temperature: float) -> jax.Array:
    """PyTorch's ``kl_div(log_softmax(logits/T), log_softmax(previous/T), log_target=True)``
    with ``reduction='mean'``, over the tokens whose ``weights`` are 1."""
    log_out = jax.nn.log_softmax(logits.astype(jnp.float32) / temperature, axis=-1)
    log_prev = jax.nn.log_softmax(previous.astype(jnp.float32) / temperature, axis=-1)
    per_token = jnp.sum(jnp.exp(log_prev) * (log_prev - log_out), axis=-1)
    tokens = jnp.maximum(jnp.sum(weights), 1.0)
    return jnp.sum(per_token * weights) / (tokens * logits.shape[-1])


def argmax_cross_entropy(logits: jax.Array, previous: jax.Array,
                         weights: jax.Array) -> jax.Array:
    """Cross-entropy of ``logits`` against ``previous``'s argmax, mean over weighted tokens."""
    targets = jnp.argmax(previous, axis=-1)
    log_out = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    per_token = -jnp.take_along_axis(log_out, targets[..., None], axis=-1)[..., 0]
    return jnp.sum(per_token * weights) / jnp.maximum(jnp.sum(weights), 1.0)
