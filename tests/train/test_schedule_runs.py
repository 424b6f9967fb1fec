"""Runs under TiC-LM's schedules. A schedule-free run ends on its evaluation point x (what is scored and what the next update
starts from, as TiC-LM saves), resumes exactly from an intermediate checkpoint (which holds the
training iterate y), and continues past its end from x as if it had not stopped. An update under the AR meta-schedule,
placed second in its chain, trains at the rates of its place and resumes in its middle on
them."""

from __future__ import annotations

import math
import shutil

import jax
import numpy as np
from train_helpers import read_metrics

from tw_jax.runtime import checkpoints, gin_setup
from tw_jax.train import trainer
from tw_jax.train.gin_config import train_config
from tw_jax.train.schedule_free import EVAL_POINT


def _train(model_dir, bindings, steps: int, schedule: str = "schedule_free", extra=()):
    gin_setup.parse(
        ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin", f"schedules/{schedule}.gin"],
        [*bindings, f"MODEL_DIR='{model_dir}'", f"TRAIN_STEPS={steps}", "CHECKPOINT_PERIOD=2",
         "WARMUP_STEPS=2", "LEARNING_RATE=1e-3", "LOG_PERIOD=1", *extra],
        required_macros=gin_setup.MACROS_TRAIN,
    )
    return trainer.train(train_config())


def _leaves(tree):
    return jax.tree.leaves(jax.device_get(tree))


def test_a_schedule_free_run_ends_on_x_and_resumes(tmp_path, data_bindings):
    whole = _train(tmp_path / "whole", data_bindings, 3)
    last = checkpoints.step_folder(tmp_path / "whole")
    assert checkpoints.saved_meta(last)["params"] == EVAL_POINT
    middle = checkpoints.saved_meta(str(tmp_path / "whole" / "checkpoints" / "2"))
    assert middle.get("params") is None  # y: an intermediate checkpoint resumes exactly
    saved = checkpoints.read_tree(f"{last}/params")
    for a, b in zip(_leaves(saved), _leaves(whole.params), strict=True):
        np.testing.assert_array_equal(a, b)

    # an interrupted run (its step-2 checkpoint, y) resumes bitwise
    shutil.copytree(tmp_path / "whole", tmp_path / "split")
    shutil.rmtree(tmp_path / "split" / "checkpoints" / "3")
    resumed = _train(tmp_path / "split", data_bindings, 3)
    assert resumed.resumed
    for a, b in zip(_leaves(resumed.params), _leaves(whole.params), strict=True):
        np.testing.assert_array_equal(a, b)

    # past the end: training goes on from y, recovered from x and z (to rounding), and ends on
    # its own x
    longer = _train(tmp_path / "whole", data_bindings, 4)
    assert longer.start_step == 3
    assert checkpoints.saved_meta(checkpoints.step_folder(tmp_path / "whole"))["params"] == (
        EVAL_POINT)
    assert not all(np.array_equal(a, b) for a, b in zip(
        _leaves(longer.params), _leaves(whole.params), strict=True))


def test_the_training_point_comes_back_from_the_evaluation_point():
    """y → x (eval_params) → y (train_params), through the state of a real schedule-free step,
    to rounding: what a run continued past its end starts from."""
    import jax.numpy as jnp
    import optax

    from tw_jax.train.schedule_free import eval_params, train_params

    tx = optax.contrib.schedule_free_adamw(1e-2, b1=0.9)
    y = {"w": jnp.linspace(-1.0, 1.0, 6).reshape(2, 3), "b": jnp.ones(3)}
    state = tx.init(y)
    for step in range(3):
        grads = jax.tree.map(lambda p, k=step + 1: jnp.sin(p * k), y)
        updates, state = tx.update(grads, state, y)
        y = optax.apply_updates(y, updates)
    x = eval_params(state, y)
    assert not np.allclose(x["w"], y["w"])
    for a, b in zip(_leaves(train_params(state, x)), _leaves(y), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_an_ar_update_trains_at_its_place_in_the_chain_and_resumes(tmp_path, data_bindings):
    """The second update of a chain of 4-step updates (steps_before 4, updates_before 1): its
    peak is TiC-LM's (LEARNING_RATE + COOLDOWN_END) / 2, warm-up and cosine around it, and an
    interrupted run resumes on the same rates to the same parameters."""
    place = ["tw_jax.train.make_schedule.steps_before=4",
             "tw_jax.train.make_schedule.updates_before=1", "COOLDOWN_END=1e-4"]
    whole = _train(tmp_path / "whole", data_bindings, 4, "ar", place)
    rates = [m["learning_rate"] for m in read_metrics(tmp_path / "whole")]
    peak = (1e-3 + 1e-4) / 2
    # open_lm's cosine_lr: warm-up (step + 1) / warmup, then cosine to the end rate at step 3
    expected = [peak * 1 / 2, peak * 2 / 2,
                1e-4 + 0.5 * (1 + math.cos(math.pi * 0 / 2)) * (peak - 1e-4),
                1e-4 + 0.5 * (1 + math.cos(math.pi * 1 / 2)) * (peak - 1e-4)]
    np.testing.assert_allclose(rates, expected, rtol=1e-6)

    shutil.copytree(tmp_path / "whole", tmp_path / "split")
    shutil.rmtree(tmp_path / "split" / "checkpoints" / "4")
    (tmp_path / "split" / "metrics.jsonl").write_text(
        "".join(line + "\n" for line in
                (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()[:2]))
    resumed = _train(tmp_path / "split", data_bindings, 4, "ar", place)
    assert resumed.start_step == 2
    assert [m["learning_rate"] for m in read_metrics(tmp_path / "split")] == rates
    for a, b in zip(_leaves(resumed.params), _leaves(whole.params), strict=True):
        np.testing.assert_array_equal(a, b)
