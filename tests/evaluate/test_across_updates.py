"""A lifelong update's schedule knows where it stands in the chain: the runner hands
``steps_before`` and ``updates_before`` to a schedule that spans updates (TiC-LM's AR
meta-schedule), leaves every other schedule as it was, and the rate per step of two updates is
the AR formula's."""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import pytest

from tw_jax.lifelong.runs import across_updates
from tw_jax.train.config import TrainConfig
from tw_jax.train.schedules import make_schedule

BASE, END, WARMUP, STEPS = 3e-4, 3e-5, 5, 40


def _run(schedule_fn) -> TrainConfig:
    return TrainConfig(model_config=None, mixture_or_task_name="t", task_feature_lengths={},
                       train_steps=STEPS, batch_size=1, model_dir=None, schedule_fn=schedule_fn)


def _open_lm_cosine(peak: float, step: int) -> float:
    """open_lm's cosine_lr: warm-up (step + 1) / warmup, then cosine to END at STEPS - 1."""
    if step < WARMUP:
        return peak * (step + 1) / WARMUP
    e, es = step - WARMUP, STEPS - WARMUP
    return END + 0.5 * (1 + math.cos(math.pi * e / es)) * (peak - END)


@pytest.mark.parametrize("update", [0, 1])
def test_the_ar_schedule_of_two_updates(update):
    schedule = functools.partial(make_schedule, "cosine_ar", BASE, warmup_steps=WARMUP,
                                 cooldown_end=END)
    run = across_updates(_run(schedule), steps_before=STEPS * update, updates_before=update)
    rates = run.schedule_fn(total_steps=STEPS)
    # TiC-LM's cosine_plus_ar_max_lr: one cosine over (update + 1) updates, with a warm-up of
    # (update + 1) * WARMUP, read at STEPS * update + WARMUP; for equal updates its peaks are
    # BASE, then (BASE + END) / 2.
    warm, total, at = (update + 1) * WARMUP, STEPS * (update + 1), STEPS * update + WARMUP
    peak = END + 0.5 * (1 + math.cos(math.pi * (at - warm) / (total - warm))) * (BASE - END)
    assert peak == pytest.approx([BASE, (BASE + END) / 2][update], rel=1e-12)
    for step in (0, WARMUP - 1, WARMUP, 20, STEPS - 1):
        assert float(rates(jnp.int32(step))) == pytest.approx(_open_lm_cosine(peak, step),
                                                              rel=1e-5)


def test_other_schedules_and_plain_functions_are_left_as_they_were():
    one_cycle = functools.partial(make_schedule, "one_cycle", 1e-3)
    moved = across_updates(_run(one_cycle), steps_before=80, updates_before=2)
    for step in (0, 10, 39):
        assert float(moved.schedule_fn(total_steps=STEPS)(step)) == float(
            one_cycle(total_steps=STEPS)(step))

    def plain(total_steps):
        return lambda count: 1e-3

    assert across_updates(_run(plain), 80, 2).schedule_fn is plain
    assert across_updates(_run(None), 80, 2).schedule_fn is None
