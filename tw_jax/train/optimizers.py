"""The trainer's optimizer, assembled from parts: base rule, clipping, accumulation, freezing.

``make_optimizer`` returns one ``optax.GradientTransformation`` built inside out as::

    freeze( MultiSteps( chain( clip_by_global_norm, adafactor | adamw | recadam ), k ), labels )

- Clipping sees the gradient averaged over the microbatches of one update, and only the
  trainable leaves (frozen ones are masked out before it), as PyTorch Lightning's clipping does
  after accumulation.
- ``optax.MultiSteps`` averages ``accumulate_steps`` microbatch gradients and applies the inner
  rule once per ``k`` calls; in between it returns zero updates, so params change only every
  ``k`` steps. Schedules and RecAdam count optimizer updates, not microbatches: set their
  ``total_steps`` to the number of updates. ``optax.tree_utils.tree_get(state, "gradient_step")``
  reads that number from the state.
- Freezing wraps everything (see :mod:`tw_jax.train.freezing`), so frozen leaves get neither
  optimizer state nor an accumulator.

Adafactor uses the settings of T5 and T5X: factored second moments for matrices whose two
largest dimensions are at least 128, ``decay_rate`` 0.8 (β2 = 1 − t^−0.8), update clipping at
RMS 1.0, step scaled by the parameter's RMS (``multiply_by_parameter_scale``, floor 1e-3),
ε1 = 1e-30 and no momentum (``b1``/``b2``/``eps`` are Adam's and unused here; set
``adafactor_momentum`` for a first moment). Our models keep attention kernels 3-D,
``(embed, heads, kv)`` and ``(heads, kv, embed)``, where Mesh TensorFlow's T5 had 2-D
``(d_model, heads·d_kv)`` matrices; optax would factor only the two largest axes
(``embed`` × ``kv`` = 1024 × 64 in T5-large, under the 128 threshold) and keep a full second
moment for ~40% of T5-large. :func:`as_matrices` runs Adafactor on the 2-D view instead (on by
default, ``adafactor_as_matrices``): the factored statistics of T5, ~1.1 GiB less state for
T5-large. Its ``weight_decay`` is optax's ``weight_decay_rate``: applied after the learning rate,
so not scaled by it (T5X likewise). AdamW's ``weight_decay`` is PyTorch's: multiplied by the
learning rate. Plain ``sgd`` (no momentum, no decay) is there for tests and debugging.
"""

from __future__ import annotations

from typing import Any

import jax
import optax

from tw_jax.train.freezing import freeze
from tw_jax.train.recadam import recadam

OPTIMIZERS: tuple[str, ...] = ("adafactor", "adamw", "recadam", "sgd")


def make_optimizer(
    name: str,
    schedule: optax.ScalarOrSchedule,
    *,
    weight_decay: float = 0.0,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    clip_norm: float | None = None,
    accumulate_steps: int = 1,
    labels: Any = None,
    adafactor_decay_rate: float = 0.8,
    adafactor_clipping_threshold: float | None = 1.0,
    adafactor_momentum: float | None = None,
    adafactor_factored: bool = True,
    adafactor_min_dim_size_to_factor: int = 128,
    adafactor_multiply_by_parameter_scale: bool = True,
    adafactor_as_matrices: bool = True,
    recadam_gamma: float = 5000.0,
    recadam_k: float = 0.5,
    recadam_t0: float = 250.0,
    recadam_anneal: str = "sigmoid",
    recadam_total_steps: int | None = None,
) -> optax.GradientTransformation:
    """The optimizer ``name`` (one of :data:`OPTIMIZERS`) with LR ``schedule`` (a float or schedule).

    ``b1``, ``b2`` and ``eps`` are Adam's (adamw, recadam). ``clip_norm`` clips the global norm
    of the gradient of each update; ``accumulate_steps`` microbatches make one update; ``labels``
    (a "trainable"/"frozen" tree) freezes. The ``recadam_*`` options are those of
    :func:`tw_jax.train.recadam.recadam` (``recadam_total_steps`` switches its time to a fraction
    of training).
    """
    if accumulate_steps < 1:
        raise ValueError(f"accumulate_steps must be >= 1, got {accumulate_steps}")
    if clip_norm is not None and clip_norm <= 0:
        raise ValueError(f"clip_norm must be > 0 or None, got {clip_norm}")
    if name == "adafactor":
        base = optax.adafactor(
            learning_rate=schedule,
            min_dim_size_to_factor=adafactor_min_dim_size_to_factor,
            decay_rate=adafactor_decay_rate,
            multiply_by_parameter_scale=adafactor_multiply_by_parameter_scale,
            clipping_threshold=adafactor_clipping_threshold,
            momentum=adafactor_momentum,
            weight_decay_rate=weight_decay or None,
            eps=1e-30,
            factored=adafactor_factored,
        )
        if adafactor_as_matrices:
            base = as_matrices(base)
    elif name == "adamw":
        base = optax.adamw(schedule, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)
    elif name == "recadam":
        base = recadam(
            schedule, b1=b1, b2=b2, eps=eps, gamma=recadam_gamma, k=recadam_k, t0=recadam_t0,
            anneal=recadam_anneal, total_steps=recadam_total_steps, weight_decay=weight_decay,
        )
    elif name == "sgd":
        if weight_decay:
            raise ValueError("sgd here is plain gradient descent; it takes no weight_decay")
        base = optax.sgd(schedule)
    else:
        raise ValueError(f"unknown optimizer {name!r}; expected one of {OPTIMIZERS}")

    tx = base if clip_norm is None else optax.chain(optax.clip_by_global_norm(clip_norm), base)
    if accumulate_steps > 1:
        tx = optax.MultiSteps(tx, every_k_schedule=accumulate_steps).gradient_transformation()
    if labels is not None:
        tx = freeze(tx, labels)
    return tx


def matrix_shape(shape: tuple[int, ...]) -> tuple[int, int] | None:
    """The 2-D view of an array of 3 or more dims: the split into leading and trailing axes whose
    two products are most balanced (first such split on ties); None for 0-2 dims.

    ``(1024, 16, 64)`` → ``(1024, 1024)``; ``(16, 64, 1024)`` → ``(1024, 1024)``.
    """
    if len(shape) <= 2:
        return None
    best: tuple[int, int] | None = None
    for split in range(1, len(shape)):
        rows = 1
        for dim in shape[:split]:
            rows *= int(dim)
        cols = 1
        for dim in shape[split:]:
            cols *= int(dim)
        if best is None or min(rows, cols) > min(best):
            best = (rows, cols)
    return best


def as_matrices(inner: optax.GradientTransformation) -> optax.GradientTransformation:
    """``inner`` applied to row-major 2-D views of arrays with 3 or more dims (see
    :func:`matrix_shape`); updates come back in the params' shapes.

    Only shape-sensitive rules change (Adafactor's factoring); element-wise and whole-array
    steps (RMS clipping, parameter scale) are the same on either view. The state holds the 2-D
    shapes, so ``optax.tree_map_params`` shardings of 3-D params do not fit an unfactored ``v``.
    """

    def view(tree: Any) -> Any:
        def flat(leaf: Any) -> Any:
            shape = matrix_shape(tuple(getattr(leaf, "shape", ())))
            return leaf if shape is None else leaf.reshape(shape)

        return jax.tree.map(flat, tree)

    def init_fn(params: Any) -> Any:
        return inner.init(view(params))

    def update_fn(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        flat_params = None if params is None else view(params)
        new, state = inner.update(view(updates), state, flat_params)
        return jax.tree.map(lambda u, ref: u.reshape(ref.shape), new, updates), state

    return optax.GradientTransformation(init_fn, update_fn)
