"""RecAdam (Chen et al. 2020, "Recall and Learn") as an optax transformation, applied for real.

RecAdam fine-tunes with the objective ``λ(t)·Loss_T + (1 − λ(t))·Loss_S`` where
``Loss_S = γ/2 · Σ (θ − θ*)²`` stands in for the pretraining loss ("recall") and ``θ*`` are the
starting weights. Like AdamW's weight decay, the penalty's gradient is applied decoupled from
Adam's moments; one update (the paper's Algorithm and the authors' ``RecAdam.py``) is::

    θ_t = θ_{t−1} − lr_t · [ λ(t) · m̂_t / (√v̂_t + ε) + (1 − λ(t)) · γ · (θ_{t−1} − θ*) ]

with Adam's bias-corrected moments ``m̂, v̂`` of the task gradient and
``λ(t) = sigmoid(k · (t − t0))``. (The reference repositories of TemporalWiki and CKL only
annealed parameters whose names contain "gpt2" or "t5", which none do, so they ran plain Adam;
see ``papers/NOTES.md``.)

Choices made here, each deliberate:

- ``t`` is the 1-based update count, as in the authors' code (``state["step"]`` after its
  increment). The published grids are in those units: ``k`` in {0.05, 0.1, 0.2, 0.5, 1} per step
  and ``t0`` in {100, 250, 500, 1000} steps (the authors' README; CKL Appendix D copies that
  sentence but lost its symbols, which is how NOTES.md came to read them swapped). Passing
  ``total_steps`` switches to normalised time ``t = step / total_steps``, in which ``t0`` is a
  fraction of training and ``k`` is per unit of that fraction (``k_normalised = k · total``).
- ``γ`` is the coefficient of ``γ/2 · Σ(θ − θ*)²``, i.e. of ``γ · (θ − θ*)`` in the update: the
  "quadratic penalty coefficient" of 5,000 in the paper, CKL and the authors' ``pretrain_cof``.
- ``ε`` is added to ``√v̂`` (the paper's algorithm, optax's Adam). The authors' code adds it to
  the uncorrected ``√v``, which equals ``ε / √(1 − β2^t)`` here; the two differ only while
  ``v`` is tiny.
- The penalty uses ``θ_{t−1}``, the parameters before this update (the paper). The authors'
  code applies it after the Adam step has moved them, an ``O(lr²·γ)`` difference.
- Optional decoupled weight decay (``weight_decay · θ_{t−1}``, also times ``lr_t``), default 0.

Stability: the penalty contracts ``θ − θ*`` by ``1 − lr·γ·(1 − λ)`` per update, which must stay
above −1; so ``lr · γ · (1 − λ(t)) < 2`` at every step. With γ = 5000 that holds for LRs below
4e-4 while λ is still small (the authors fine-tuned at 1e-5 to 2e-5); CKL's Adafactor LR 1e-3
with RecAdam's Adam would make the pull oscillate with growing amplitude until λ(t) > 0.6.

Memory: the state holds ``θ*``, a full copy of the parameters, besides Adam's two moments: three
copies of the trainable parameters in all. Under :func:`tw_jax.train.freezing.freeze` frozen
leaves are masked out before ``init``, so they hold neither moments nor a ``θ*``. ``θ*`` is the
parameters the first update starts from (the pretrained checkpoint, or the start of the
month's update): ``init`` copies its params and the first update takes its own, which are the
same in ``tw-jax train``; under T5X, which initialises optimizer state from its fresh parameters
before it restores a starting checkpoint, the first update's are the restored ones. On resume
``θ*`` comes back with the checkpointed state.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

ANNEALS: tuple[str, ...] = ("sigmoid", "linear", "constant")


class RecallState(NamedTuple):
    """Update count and the anchor weights ``θ*`` (a copy of the params given to ``init``)."""

    count: jax.Array
    anchor: Any


def anneal_lambda(
    step: jax.Array | int,
    *,
    k: float,
    t0: float,
    anneal: str = "sigmoid",
    total_steps: int | None = None,
) -> jax.Array:
    """λ(t), the weight of the task loss at 1-based update ``step``; 1 − λ weighs the recall.

    ``sigmoid``: ``1 / (1 + exp(−k (t − t0)))``; ``linear``: ``min(1, t / t0)``; ``constant``: 1
    (plain Adam). ``t = step``, or ``step / total_steps`` when ``total_steps`` is given.
    """
    t = jnp.asarray(step, jnp.float32)
    if total_steps is not None:
        t = t / total_steps
    if anneal == "sigmoid":
        return jax.nn.sigmoid(k * (t - t0))
    if anneal == "linear":
        return jnp.minimum(1.0, t / t0)
    if anneal == "constant":
        return jnp.ones_like(t)
    raise ValueError(f"unknown anneal {anneal!r}; expected one of {ANNEALS}")


def scale_by_recall(
    *,
    gamma: float = 5000.0,
    k: float = 0.5,
    t0: float = 250.0,
    anneal: str = "sigmoid",
    total_steps: int | None = None,
) -> optax.GradientTransformation:
    """Turn an update direction ``u`` into ``λ(t)·u + (1 − λ(t))·γ·(θ − θ*)``.

    Sits between ``scale_by_adam`` and the learning rate in :func:`recadam`; needs ``params`` in
    ``update``. ``θ*`` is the params of the first update (``init`` holds a copy of its own).
    """
    _check_anneal(anneal, k=k, t0=t0, total_steps=total_steps)

    def init_fn(params: Any) -> RecallState:
        anchor = jax.tree.map(jnp.array, params)  # a copy: params may be donated later.
        return RecallState(count=jnp.zeros([], jnp.int32), anchor=anchor)

    def update_fn(updates: Any, state: RecallState, params: Any = None) -> tuple[Any, RecallState]:
        if params is None:
            raise ValueError("RecAdam needs the current params: call tx.update(grads, state, params)")
        first = state.count == 0
        anchor = jax.tree.map(lambda p, a: jnp.where(first, p.astype(a.dtype), a), params,
                              state.anchor)
        count = optax.safe_increment(state.count)
        lam = anneal_lambda(count, k=k, t0=t0, anneal=anneal, total_steps=total_steps)

        def combine(u: jax.Array, p: jax.Array, anchor: jax.Array) -> jax.Array:
            pull = gamma * (p.astype(jnp.float32) - anchor.astype(jnp.float32))
            return (lam * u.astype(jnp.float32) + (1.0 - lam) * pull).astype(u.dtype)

        updates = jax.tree.map(combine, updates, params, anchor)
        return updates, RecallState(count=count, anchor=anchor)

    return optax.GradientTransformation(init_fn, update_fn)


def recadam(
    learning_rate: optax.ScalarOrSchedule,
    *,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    gamma: float = 5000.0,
    k: float = 0.5,
    t0: float = 250.0,
    anneal: str = "sigmoid",
    total_steps: int | None = None,
    weight_decay: float = 0.0,
) -> optax.GradientTransformation:
    """RecAdam: Adam's step weighted by λ(t) plus a decoupled pull ``γ(θ − θ*)`` weighted 1 − λ(t).

    Defaults: Adam's betas, ``eps`` 1e-8 (the authors' GLUE script; their class default is
    1e-6), γ = 5000, and ``k = 0.5``, ``t0 = 250`` (in steps), the middle of the published grid.
    ``learning_rate`` may be a schedule of the 0-based update count, like every optax LR.
    """
    parts = [
        optax.scale_by_adam(b1=b1, b2=b2, eps=eps),
        scale_by_recall(gamma=gamma, k=k, t0=t0, anneal=anneal, total_steps=total_steps),
    ]
    if weight_decay:
        parts.append(optax.add_decayed_weights(weight_decay))
    parts.append(optax.scale_by_learning_rate(learning_rate))
    return optax.chain(*parts)


def _check_anneal(anneal: str, *, k: float, t0: float, total_steps: int | None) -> None:
    if anneal not in ANNEALS:
        raise ValueError(f"unknown anneal {anneal!r}; expected one of {ANNEALS}")
    if anneal == "linear" and t0 <= 0:
        raise ValueError(f"linear annealing needs t0 > 0, got {t0}")
    if anneal == "sigmoid" and k <= 0:
        raise ValueError(f"sigmoid annealing needs k > 0, got {k}")
    if total_steps is not None and total_steps < 1:
        raise ValueError(f"total_steps must be >= 1 or None, got {total_steps}")
