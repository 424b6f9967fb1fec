"""The compiled train step does not depend on the learning-rate schedule: a run's rate, length
or schedule leaves the program unchanged (the next month's update, or another method with the
same layout, reuses the compilation), and the rate the step is given is the schedule's."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tw_jax.models.gpt2 import GPT2Config
from tw_jax.models.sharding import activate
from tw_jax.runtime.run_model import build_run_model
from tw_jax.train.optimizers import AdafactorConfig, AdamWConfig
from tw_jax.train.schedules import make_schedule
from tw_jax.train.trainer import build_train_step

CONFIG = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
TOKENS = np.arange(2 * 8, dtype=np.int32).reshape(2, 8) % 64
BATCH = {"decoder_target_tokens": TOKENS, "decoder_input_tokens": np.roll(TOKENS, 1, axis=1),
         "decoder_loss_weights": np.ones((2, 8), np.float32),
         "decoder_mask": np.ones((2, 8), np.float32)}


@functools.cache
def _run():
    return build_run_model(CONFIG, (1, 1, 1), devices=jax.devices()[:1])


def _step(schedule: str, base_lr: float, steps: int, accumulate: int = 1, optimizer=None):
    return build_train_step(
        _run(), CONFIG, optimizer=optimizer or AdamWConfig(),
        schedule_fn=functools.partial(make_schedule, schedule, base_lr), train_steps=steps,
        accumulate_steps=accumulate, seed=0)


def _lowered_text(step) -> str:
    run = _run()
    with activate(run.mesh):
        params = run.init_params(0)
        opt_state = jax.jit(step.tx.init)(params)
        return step.lower(params, opt_state, BATCH).as_text()


@pytest.mark.parametrize("optimizer", [AdamWConfig(), AdafactorConfig()], ids=["adamw", "adafactor"])
def test_another_schedule_compiles_the_same_program(optimizer):
    """Before, the schedule's constants were part of the program: every update of a lifelong
    run (each month trains a different number of steps) compiled its step again."""
    one_cycle = _lowered_text(_step("one_cycle", 1e-2, 10, optimizer=optimizer))
    assert _lowered_text(_step("constant", 3e-4, 99, optimizer=optimizer)) == one_cycle
    assert _lowered_text(_step("warmup_linear", 1e-3, 27, optimizer=optimizer)) == one_cycle


def test_the_step_is_given_the_schedules_rate_per_update():
    """With 2 microbatches an update, steps 2k and 2k+1 use the rate of update k."""
    step = _step("warmup_linear", 1e-2, 20, accumulate=2)
    schedule = make_schedule("warmup_linear", 1e-2, 10)
    rates = [float(step.learning_rate(s)) for s in range(20)]
    assert rates == [float(np.float32(schedule(s // 2))) for s in range(20)]
    assert rates[:4] == [0.0, 0.0, float(np.float32(1e-2)), float(np.float32(1e-2))]


def test_calling_the_step_equals_the_jitted_step_at_the_schedules_rate():
    run = _run()
    step = _step("one_cycle", 1e-2, 6)
    with activate(run.mesh):
        params = run.init_params(0)
        opt_state = jax.jit(step.tx.init)(params)
        called, _, called_out = step(params, opt_state, 3, BATCH)
        params = run.init_params(0)
        opt_state = jax.jit(step.tx.init)(params)
        rate = jnp.float32(make_schedule("one_cycle", 1e-2, 6)(3))
        direct, _, direct_out = step.jitted(params, opt_state, jnp.int32(3), rate, BATCH)
    assert float(called_out["loss"]) == float(direct_out["loss"])
    for a, b in zip(jax.tree.leaves(called), jax.tree.leaves(direct), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
