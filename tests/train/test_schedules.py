"""Learning-rate schedules: exact values at chosen steps, and PyTorch's OneCycleLR where present."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tw_jax.train.schedules import make_schedule


def values(schedule, steps):
    return np.asarray(schedule(jnp.asarray(list(steps))), np.float64)


def test_constant_holds_base_lr():
    schedule = make_schedule("constant", 3e-4, 100)
    np.testing.assert_allclose(values(schedule, [0, 10, 99, 1000]), [3e-4] * 4, rtol=1e-7)


def test_warmup_linear_ckl_settings():
    # CKL: 10% warm-up from 0, then linear decay to half of the base LR at the last step.
    schedule = make_schedule("warmup_linear", 1e-3, 100, warmup_fraction=0.1, final_fraction=0.5)
    steps = [0, 5, 10, 55, 100, 150]
    expected = [0.0, 5e-4, 1e-3, 1e-3 - 0.5 * 5e-4, 5e-4, 5e-4]
    np.testing.assert_allclose(values(schedule, steps), expected, rtol=1e-6, atol=1e-12)


def test_warmup_linear_without_warmup_starts_at_peak():
    schedule = make_schedule("warmup_linear", 2.0, 10, warmup_fraction=0.0, final_fraction=0.0)
    np.testing.assert_allclose(values(schedule, [0, 5, 10]), [2.0, 1.0, 0.0], atol=1e-7)


def test_cosine_warmup_then_half_cosine_to_final_fraction():
    schedule = make_schedule("cosine", 1e-3, 100, warmup_fraction=0.1, final_fraction=0.1)
    steps = [0, 5, 10, 55, 100, 200]
    # Step 55 is half-way through the 90 decay steps: cos(pi/2) = 0, so the mean of 1e-3 and 1e-4.
    expected = [0.0, 5e-4, 1e-3, 5.5e-4, 1e-4, 1e-4]
    np.testing.assert_allclose(values(schedule, steps), expected, rtol=1e-6, atol=1e-12)


def test_one_cycle_pytorch_defaults_by_hand():
    # max 1e-4, 100 steps: initial 1e-4/25 = 4e-6, final 4e-6/1e4 = 4e-10, turn at 0.3*100-1 = 29.
    schedule = make_schedule("one_cycle", 1e-4, 100)

    def cos_anneal(start, end, pct):
        return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)

    expected = {
        0: 4e-6,
        10: cos_anneal(4e-6, 1e-4, 10 / 29),
        29: 1e-4,
        30: cos_anneal(1e-4, 4e-10, 1 / 70),
        64: cos_anneal(1e-4, 4e-10, 35 / 70),
        99: 4e-10,
        150: 4e-10,  # held after the last step
    }
    got = values(schedule, list(expected))
    np.testing.assert_allclose(got, list(expected.values()), rtol=2e-6)
    assert expected[64] == pytest.approx(0.5 * (1e-4 + 4e-10))


def test_one_cycle_linear_anneal_with_fractional_turn():
    # pct_start 0.25 of 10 steps: turn at 1.5, so step 1 is 2/3 up and step 2 is 1/15 down.
    schedule = make_schedule("one_cycle", 1.0, 10, pct_start=0.25, anneal="linear")
    initial, final = 1 / 25, 1 / 25 / 1e4
    expected = [initial, initial + (1 - initial) / 1.5, 1 + (final - 1) * 0.5 / 7.5, final]
    np.testing.assert_allclose(values(schedule, [0, 1, 2, 9]), expected, rtol=1e-6)


def test_schedules_run_under_jit():
    schedule = jax.jit(make_schedule("one_cycle", 1e-4, 100))
    assert float(schedule(29)) == pytest.approx(1e-4, rel=1e-6)


@pytest.mark.parametrize(
    ("total", "kwargs"),
    [(100, {}), (37, {"pct_start": 0.25}), (50, {"anneal": "linear", "div_factor": 10.0})],
)
def test_one_cycle_matches_pytorch_at_every_step(total, kwargs):
    torch = pytest.importorskip("torch")
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([param], lr=1.0)
    torch_kwargs = {k: v for k, v in kwargs.items() if k != "anneal"}
    if "anneal" in kwargs:
        torch_kwargs["anneal_strategy"] = kwargs["anneal"]
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=3e-4, total_steps=total, **torch_kwargs
    )
    reference = []
    for step in range(total):
        reference.append(scheduler.get_last_lr()[0])
        optimizer.step()
        if step < total - 1:
            scheduler.step()
    ours = values(make_schedule("one_cycle", 3e-4, total, **kwargs), range(total))
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("triangle", {}, "unknown schedule"),
        ("warmup_linear", {"warmup_fraction": 1.0}, "warmup_fraction"),
        ("one_cycle", {"pct_start": 0.001}, "pct_start"),
        ("one_cycle", {"anneal": "exp"}, "anneal"),
    ],
)
def test_bad_settings_are_refused(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_schedule(name, 1e-3, 100, **kwargs)
