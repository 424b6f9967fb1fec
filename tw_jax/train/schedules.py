"""Learning-rate schedules of the papers, as ``optax.Schedule`` functions of the update count.

A schedule maps the number of optimizer updates already applied (0 for the first update; with
gradient accumulation, microbatches do not count) to the learning rate of the next one, which is
the convention of ``optax`` and of PyTorch schedulers stepped once per optimizer step. Every
schedule holds its last value after ``total_steps`` rather than extrapolating.

- ``constant``: ``base_lr`` throughout.
- ``warmup_linear`` (CKL): linear warm-up from 0 over ``warmup_fraction * total_steps`` updates,
  then linear decay to ``final_fraction * base_lr`` at ``total_steps``. CKL: warm-up 10%, decay
  to half. As in Hugging Face's ``get_linear_schedule_with_warmup``, the first update has LR 0.
- ``one_cycle`` (TemporalWiki): PyTorch's ``OneCycleLR`` with its defaults, formula for formula:
  from ``base_lr / div_factor`` up to ``base_lr`` and down to
  ``base_lr / div_factor / final_div_factor``, the turn at step ``pct_start * total_steps - 1``.
  PyTorch also cycles Adam's beta1 between 0.85 and 0.95 by default (``cycle_momentum``); that
  belongs to the optimizer, not to a learning-rate schedule, and is not reproduced here.
- ``cosine``: linear warm-up as above, then cosine decay to ``final_fraction * base_lr``.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import optax

from tw_jax.errors import UsageError

SCHEDULES: tuple[str, ...] = ("constant", "warmup_linear", "one_cycle", "cosine")


def make_schedule(
    name: str,
    base_lr: float,
    total_steps: int,
    *,
    warmup_fraction: float = 0.1,
    final_fraction: float = 0.5,
    pct_start: float = 0.3,
    div_factor: float = 25.0,
    final_div_factor: float = 1e4,
    anneal: str = "cos",
) -> optax.Schedule:
    """The schedule ``name`` (one of :data:`SCHEDULES`) peaking at ``base_lr``.

    ``warmup_fraction`` and ``final_fraction`` apply to ``warmup_linear`` and ``cosine`` (defaults:
    CKL's 10% warm-up and decay to half); ``pct_start``, ``div_factor``, ``final_div_factor`` and
    ``anneal`` ("cos" or "linear") to ``one_cycle`` (defaults: PyTorch's).
    """
    if base_lr < 0:
        raise ValueError(f"base_lr must be >= 0, got {base_lr}")
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    if name == "constant":
        return optax.constant_schedule(base_lr)
    if name in ("warmup_linear", "cosine"):
        if not 0.0 <= warmup_fraction < 1.0:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
        if final_fraction < 0:
            raise ValueError(f"final_fraction must be >= 0, got {final_fraction}")
        warmup_steps = int(warmup_fraction * total_steps)
        if name == "warmup_linear":
            return warmup_linear(base_lr, total_steps, warmup_steps, final_fraction * base_lr)
        return warmup_cosine(base_lr, total_steps, warmup_steps, final_fraction * base_lr)
    if name == "one_cycle":
        return one_cycle(
            base_lr, total_steps, pct_start=pct_start, div_factor=div_factor,
            final_div_factor=final_div_factor, anneal=anneal,
        )
    raise ValueError(f"unknown schedule {name!r}; expected one of {SCHEDULES}")


def warmup_linear(
    peak: float, total_steps: int, warmup_steps: int, end_value: float
) -> optax.Schedule:
    """0 → ``peak`` linearly over ``warmup_steps``, then ``peak`` → ``end_value`` at ``total_steps``."""
    decay = optax.linear_schedule(peak, end_value, total_steps - warmup_steps)
    if warmup_steps == 0:
        return decay
    warmup = optax.linear_schedule(0.0, peak, warmup_steps)
    return optax.join_schedules([warmup, decay], [warmup_steps])


def warmup_cosine(
    peak: float, total_steps: int, warmup_steps: int, end_value: float
) -> optax.Schedule:
    """0 → ``peak`` linearly over ``warmup_steps``, then a half cosine to ``end_value``."""
    decay = optax.cosine_decay_schedule(
        peak, total_steps - warmup_steps, alpha=end_value / peak if peak else 0.0
    )
    if warmup_steps == 0:
        return decay
    warmup = optax.linear_schedule(0.0, peak, warmup_steps)
    return optax.join_schedules([warmup, decay], [warmup_steps])


def one_cycle(
    max_lr: float,
    total_steps: int,
    *,
    pct_start: float = 0.3,
    div_factor: float = 25.0,
    final_div_factor: float = 1e4,
    anneal: str = "cos",
) -> optax.Schedule:
    """PyTorch ``OneCycleLR`` (two phases), evaluated at ``last_epoch == count``.

    PyTorch's phase boundaries are ``pct_start * total_steps - 1`` and ``total_steps - 1``; within
    a phase ``pct = (step - start) / (end - start)`` and the rate is annealed from the phase's
    start to its end value. Steps past ``total_steps - 1`` (where PyTorch raises or extrapolates)
    hold the final rate.
    """
    if anneal not in ("cos", "linear"):
        raise ValueError(f"anneal must be 'cos' or 'linear', got {anneal!r}")
    if not 0.0 < pct_start < 1.0:
        raise ValueError(f"pct_start must be in (0, 1), got {pct_start}")
    initial_lr = max_lr / div_factor
    min_lr = initial_lr / final_div_factor
    turn = float(pct_start * total_steps) - 1.0
    last = float(total_steps - 1)
    if not 0.0 < turn < last:
        fewest = math.floor(1.0 / pct_start) + 1
        raise UsageError(
            f"the one_cycle schedule needs at least {fewest} steps with pct_start={pct_start} "
            f"(its peak, step pct_start * steps - 1, must fall inside the run); got "
            f"{total_steps}: raise TRAIN_STEPS or use --gin.SCHEDULE=\"'constant'\""
        )

    def interpolate(start: float, end: float, pct: jnp.ndarray) -> jnp.ndarray:
        # PyTorch's ``end + (start - end) / 2 * (cos(pi * pct) + 1)`` and
        # ``(end - start) * pct + start``, rewritten without cancellation: in float32 the
        # originals lose the final rate (max / 2.5e5) to rounding near the end of the cycle.
        if anneal == "cos":
            return end + (start - end) * jnp.square(jnp.cos(0.5 * math.pi * pct))
        return start * (1.0 - pct) + end * pct

    def schedule(count: jnp.ndarray) -> jnp.ndarray:
        step = jnp.minimum(jnp.asarray(count, jnp.float32), last)
        up = interpolate(initial_lr, max_lr, step / turn)
        down = interpolate(max_lr, min_lr, (step - turn) / (last - turn))
        return jnp.where(step <= turn, up, down)

    return schedule
