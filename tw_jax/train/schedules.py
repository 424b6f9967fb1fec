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

TiC-LM (Li et al., "TiC-LM: A Web-Scale Benchmark for Time-Continual LLM Pretraining", ACL 2025;
code: apple/ml-tic-lm, ``training/``) trains every month with open_lm (pinned at 9bb92ef,
patched by ``training/open_lm.patch``), stepping its scheduler once per optimizer step from 0 in
each update (``open_lm/train.py``: ``scheduler(step)``). Its schedules, formula for formula; their
warm-up is open_lm's ``_warmup_lr``, ``base_lr * (step + 1) / warmup`` (so the first update of a
warm-up already has ``base_lr / warmup``), and their end rate is the absolute ``cooldown_end``
(open_lm's ``--lr-cooldown-end``; TiC-LM's configs: 3e-5), not a fraction:

- ``cyclic_cosine`` (TiC-LM's "Cyclic Cosine"): open_lm's ``cosine_lr`` in every update:
  warm-up over ``warmup_steps``, then ``cooldown_end + (base_lr - cooldown_end) * (1 +
  cos(pi * (step - warmup) / (total_steps - warmup))) / 2``. README example: lr 1e-4, warm-up 50.
- ``cosine_ar`` (``--use-ar-schedule``, the "autoregressive" meta-schedule): ``cyclic_cosine``
  whose peak is :func:`ar_peak_lr`, TiC-LM's ``training/utils.py`` ``cosine_plus_ar_max_lr``
  as ``training/continual_run.py`` calls it: one cosine over all updates so far, read at this
  update's end of warm-up. Needs ``steps_before`` (optimizer steps of the earlier updates) and
  ``updates_before``. README example: lr 3e-4, warm-up 50, ``cooldown_end`` 3e-5.
- ``rsqrt`` (``--lr-scheduler rsqrt``): ``rsqrt_lr`` that ``open_lm.patch`` adds to
  ``open_lm/scheduler.py``: warm-up, then ``(base_lr - cooldown_end) * sqrt(warmup / step) +
  cooldown_end``, and over the last ``cooldown_steps`` updates a linear cooldown from the rate
  at ``total_steps - cooldown_steps`` to ``cooldown_end``. README example: lr 1e-3,
  ``--lr-rsqrt-cooldown 400`` (the patch's default is 5000), warm-up 50.
- ``constant_warmup`` (``--lr-scheduler const``, what TiC-LM's README asks for with
  schedule-free AdamW): open_lm's ``const_lr``, the warm-up then ``base_lr``.

``warmup_steps`` (an absolute count, TiC-LM's ``--warmup``) overrides ``warmup_fraction`` for
every schedule with a warm-up; left None, the warm-up is ``int(warmup_fraction * total_steps)``.
Schedules that do not read ``steps_before`` / ``updates_before`` / ``cooldown_*`` ignore them.
TiC-LM's schedules end at open_lm's last step, ``total_steps - 1``, and hold that rate after it.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import optax

from tw_jax.errors import UsageError

SCHEDULES: tuple[str, ...] = (
    "constant", "warmup_linear", "one_cycle", "cosine",
    "cyclic_cosine", "cosine_ar", "rsqrt", "constant_warmup",
)
# TiC-LM's schedules (open_lm's warm-up convention and absolute end rate).
OPEN_LM_SCHEDULES: tuple[str, ...] = ("cyclic_cosine", "cosine_ar", "rsqrt", "constant_warmup")


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
    warmup_steps: int | None = None,
    cooldown_steps: int = 0,
    cooldown_end: float = 0.0,
    steps_before: int = 0,
    updates_before: int = 0,
) -> optax.Schedule:
    """The schedule ``name`` (one of :data:`SCHEDULES`) peaking at ``base_lr``, over the
    ``total_steps`` optimizer updates of one run (one update of a lifelong run).

    ``warmup_fraction`` and ``final_fraction`` apply to ``warmup_linear`` and ``cosine`` (defaults:
    CKL's 10% warm-up and decay to half); ``pct_start``, ``div_factor``, ``final_div_factor`` and
    ``anneal`` ("cos" or "linear") to ``one_cycle`` (defaults: PyTorch's). ``warmup_steps``, when
    given, is the warm-up's length in updates instead of ``warmup_fraction * total_steps`` (every
    schedule with a warm-up). TiC-LM's schedules (module docstring) end at the absolute rate
    ``cooldown_end``; ``rsqrt`` cools down linearly over its last ``cooldown_steps`` updates (0:
    no cooldown); ``cosine_ar`` reads its peak off :func:`ar_peak_lr` with ``steps_before``
    (optimizer updates the earlier updates of the chain applied, accumulation not counted) and
    ``updates_before`` (how many updates came before this one). The defaults leave every other
    schedule as it was.
    """
    if base_lr < 0:
        raise ValueError(f"base_lr must be >= 0, got {base_lr}")
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    if warmup_steps is not None and warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0 or None, got {warmup_steps}")
    if name == "constant":
        return optax.constant_schedule(base_lr)
    if name in OPEN_LM_SCHEDULES:
        return _open_lm_schedule(
            name, base_lr, total_steps,
            warmup=_warmup(warmup_steps, warmup_fraction, total_steps),
            cooldown_steps=cooldown_steps, cooldown_end=cooldown_end,
            steps_before=steps_before, updates_before=updates_before,
        )
    if name in ("warmup_linear", "cosine"):
        if not 0.0 <= warmup_fraction < 1.0:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
        if final_fraction < 0:
            raise ValueError(f"final_fraction must be >= 0, got {final_fraction}")
        if warmup_steps is None:
            warmup_steps = int(warmup_fraction * total_steps)
        elif warmup_steps >= total_steps:
            raise ValueError(f"warmup_steps must be < total_steps ({total_steps}), "
                             f"got {warmup_steps}")
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


# TiC-LM (apple/ml-tic-lm, training/) on open_lm 9bb92ef with training/open_lm.patch.


def _warmup(warmup_steps: int | None, warmup_fraction: float, total_steps: int) -> int:
    """The warm-up's length in updates: ``warmup_steps`` as given, else the fraction's."""
    if warmup_steps is not None:
        return int(warmup_steps)
    if not 0.0 <= warmup_fraction < 1.0:
        raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
    return int(warmup_fraction * total_steps)


def ar_peak_lr(
    base_lr: float,
    *,
    steps_before: int,
    total_steps: int,
    updates_before: int,
    warmup_steps: int,
    end_lr: float,
) -> float:
    """The peak rate of an update under TiC-LM's AR meta-schedule (``--use-ar-schedule``), on
    the host, for the update's schedule and for the lifelong runner's log.

    ``training/utils.py`` ``cosine_plus_ar_max_lr(steps_prev, steps_new, warmup_init,
    warmup_new, max_lr_init, end_lr)`` evaluates ``cosine_decay`` (same file: open_lm's warm-up
    and cosine) at step ``steps_prev + warmup_new`` of a schedule of ``steps_prev + steps_new``
    steps with warm-up ``warmup_init``; ``training/continual_run.py`` calls it for month ``i``
    with ``steps_prev = STEPS_PER_MONTH * i``, ``steps_new = STEPS_PER_MONTH``, ``warmup_new =
    --warmup`` and ``warmup_init`` grown by one ``--warmup`` a month, ``(i + 1) * --warmup``
    (with ``--warmup-usage all``, the README's setting), ``max_lr_init = --lr`` and ``end_lr =
    --lr-cooldown-end``. Here ``steps_prev`` is ``steps_before`` (the optimizer updates the
    earlier updates applied: TiC-LM's ``STEPS_PER_MONTH * i`` when every month has as many),
    ``steps_new`` is ``total_steps`` and ``i`` is ``updates_before``. With equal updates of
    ``S`` steps longer than the warm-up this is ``end_lr + (base_lr - end_lr) * (1 + cos(pi *
    i / (i + 1))) / 2``: ``base_lr``, then their mean, then 1/4 of the way up, ...
    """
    if steps_before < 0 or updates_before < 0:
        raise ValueError(f"steps_before and updates_before must be >= 0, got {steps_before} and "
                         f"{updates_before}")
    warmup_init = warmup_steps * (updates_before + 1)  # continual_run.py: warmup_init += warmup
    current_step = steps_before + warmup_steps  # cosine_plus_ar_max_lr: maxlr_step
    total = steps_before + total_steps
    # utils.py cosine_decay(current_step, max_lr, total_steps, end_lr, warmup), as written:
    if current_step < warmup_init:
        return base_lr * (current_step + 1) / warmup_init
    if total == warmup_init:
        raise UsageError(
            f"the AR schedule's cosine over {total} steps has no steps after its warm-up of "
            f"{warmup_init}: TiC-LM's cosine_decay divides by zero (updates of {total_steps} "
            f"steps with a warm-up of {warmup_steps}): lower "
            f"tw_jax.train.make_schedule.warmup_steps or raise TRAIN_STEPS")
    angle = math.pi * (current_step - warmup_init) / (total - warmup_init)
    cosine_decay = 0.5 * (1 + math.cos(angle))
    return (base_lr - end_lr) * cosine_decay + end_lr


def _open_lm_schedule(
    name: str, base_lr: float, total_steps: int, *, warmup: int, cooldown_steps: int,
    cooldown_end: float, steps_before: int, updates_before: int,
) -> optax.Schedule:
    if cooldown_end < 0:
        raise ValueError(f"cooldown_end must be >= 0, got {cooldown_end}")
    if name == "constant_warmup":
        return open_lm_constant(base_lr, warmup)
    if name == "rsqrt":
        return open_lm_rsqrt(base_lr, total_steps, warmup, cooldown_steps, cooldown_end)
    peak = base_lr
    if name == "cosine_ar":
        peak = ar_peak_lr(base_lr, steps_before=steps_before, total_steps=total_steps,
                          updates_before=updates_before, warmup_steps=warmup,
                          end_lr=cooldown_end)
    return open_lm_cosine(peak, total_steps, warmup, cooldown_end)


def _open_lm_warmup(peak: float, warmup: int, step: jnp.ndarray) -> jnp.ndarray:
    # open_lm/scheduler.py _warmup_lr: base_lr * (step + 1) / warmup_length.
    return peak * (step + 1.0) / max(warmup, 1)


def open_lm_constant(peak: float, warmup: int) -> optax.Schedule:
    """open_lm's ``const_lr``: ``peak * (step + 1) / warmup`` while ``step < warmup``, then
    ``peak``."""

    def schedule(count: jnp.ndarray) -> jnp.ndarray:
        step = jnp.asarray(count, jnp.float32)
        return jnp.where(step < warmup, _open_lm_warmup(peak, warmup, step),
                         jnp.float32(peak))

    return schedule


def open_lm_cosine(peak: float, total_steps: int, warmup: int, end_lr: float) -> optax.Schedule:
    """open_lm's ``cosine_lr`` (``force_min_lr`` 0, its default: no floor but ``end_lr``):
    warm-up, then ``end_lr + (1 + cos(pi * e / es)) / 2 * (peak - end_lr)`` with ``e = step -
    warmup``, ``es = total_steps - warmup``; holds its rate at ``total_steps - 1``."""
    last = float(total_steps - 1)
    span = float(max(total_steps - warmup, 1))  # no step reaches the cosine when it is 0

    def schedule(count: jnp.ndarray) -> jnp.ndarray:
        step = jnp.minimum(jnp.asarray(count, jnp.float32), last)
        # (1 + cos(pi x)) / 2 written as cos(pi x / 2)^2: the same value, without float32's
        # cancellation near the end of the cosine (as one_cycle above).
        half_cosine = jnp.square(jnp.cos(0.5 * math.pi * (step - warmup) / span))
        decay = end_lr + half_cosine * (peak - end_lr)
        return jnp.where(step < warmup, _open_lm_warmup(peak, warmup, step), decay)

    return schedule


def open_lm_rsqrt(
    peak: float, total_steps: int, warmup: int, cooldown_steps: int, end_lr: float
) -> optax.Schedule:
    """``rsqrt_lr`` of TiC-LM's ``training/open_lm.patch`` (``open_lm/scheduler.py``), with its
    ``starting_step`` 0 (``--lr-starting-step``'s default; ``continual_run.py`` never sets it, so
    every update starts its own rsqrt) and ``force_min_lr`` 0::

        step < warmup:                      peak * (step + 1) / warmup
        cooldown == 0 or step < S - cooldown: (peak - end) * sqrt(warmup) / sqrt(step) + end
        else:                               (1 - (step - (S - cooldown)) / cooldown)
                                            * (rate at S - cooldown - end) + end

    with ``S = total_steps``; holds its rate at ``S - 1``."""
    if warmup < 1:
        raise UsageError(
            "the rsqrt schedule needs tw_jax.train.make_schedule.warmup_steps >= 1: open_lm's "
            "rsqrt_lr scales by sqrt(warmup) / sqrt(step), 0/0 at the first step without one")
    if cooldown_steps < 0:
        raise ValueError(f"cooldown_steps must be >= 0, got {cooldown_steps}")
    start = total_steps - cooldown_steps
    if cooldown_steps > 0 and start < 1:
        raise UsageError(
            f"the rsqrt schedule's cooldown of {cooldown_steps} steps is not shorter than its "
            f"{total_steps} steps (its rate at step {start} is sqrt(warmup) / sqrt({start})): "
            f"lower tw_jax.train.make_schedule.cooldown_steps or raise TRAIN_STEPS")
    last = float(total_steps - 1)
    root_warmup = math.sqrt(warmup)

    def schedule(count: jnp.ndarray) -> jnp.ndarray:
        step = jnp.minimum(jnp.asarray(count, jnp.float32), last)
        rsqrt = (peak - end_lr) * root_warmup / jnp.sqrt(jnp.maximum(step, 1.0)) + end_lr
        lr = jnp.where(step < warmup, _open_lm_warmup(peak, warmup, step), rsqrt)
        if cooldown_steps == 0:
            return lr
        start_lr = (peak - end_lr) * root_warmup / math.sqrt(start) + end_lr
        decay = 1.0 - (step - start) / cooldown_steps
        cooled = decay * (start_lr - end_lr) + end_lr
        return jnp.where((step >= warmup) & (step >= start), cooled, lr)

    return schedule
