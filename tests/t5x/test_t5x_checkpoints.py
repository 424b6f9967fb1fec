"""Checkpoints both ways between tw_jax and T5X (``tw-jax t5x-checkpoint``): bit-exact round
trips, the starting points each side reads, and clear errors."""

from __future__ import annotations

import functools
import json

import flax.linen as nn
import jax
import numpy as np
import pytest
from flax import traverse_util

from tw_jax.cli import main
from tw_jax.models import GPT2Config, LoRAConfig, T5Config, model_for
from tw_jax.runtime import checkpoints
from tw_jax.t5x.checkpoints import (
    T5XCheckpointError,
    from_t5x,
    read_t5x_params,
    read_t5x_state,
    t5x_step,
    to_t5x,
)

GPT2 = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=2, n_head=2,
                  lora=LoRAConfig())
T5 = T5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2)


def _params(config, seed=0):
    # a fresh copy of the (cached) parameters: each test may write them where it likes
    return jax.tree.map(np.copy, _random_params(config, seed))


@functools.cache
def _random_params(config, seed):
    """Random values in the model's parameter tree (its shapes and dtypes, from an abstract
    initialisation), drawn by NumPy: the conversions must carry any values bit for bit, and
    the model's own initialisation costs seconds of XLA compilation (one threefry per tensor)."""
    shapes = nn.unbox(model_for(config).abstract_variables(1, 8)["params"])
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda x: rng.standard_normal(x.shape).astype(x.dtype), shapes)


def _flat(tree):
    return traverse_util.flatten_dict(tree, sep="/")


def _assert_bitwise(a, b):
    a, b = _flat(a), _flat(b)
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name


def test_a_tw_jax_step_goes_to_t5x_and_back_bit_for_bit(tmp_path):
    params = _params(GPT2)
    checkpoints.save_params(tmp_path / "run", 7, params, {"step": 7})
    t5x = to_t5x(tmp_path / "run", tmp_path / "t5x")
    assert t5x.endswith("/checkpoint_7") and t5x_step(t5x) == 7
    assert list(read_t5x_state(t5x)) == ["target"]  # parameters only: T5X adds its optimizer
    _assert_bitwise(read_t5x_params(t5x), params)
    back = from_t5x(t5x, tmp_path / "back")
    assert back.endswith("/checkpoints/7")
    _assert_bitwise(checkpoints.read_params(tmp_path / "back"), params)
    assert checkpoints.check_step(back) is None  # sealed: its checksums hold


def test_a_hugging_face_folder_goes_to_t5x_as_step_zero(tmp_path):
    params = _params(T5, seed=1)
    model_for(T5).save_hf(str(tmp_path / "hf"), params)
    t5x = to_t5x(tmp_path / "hf", tmp_path / "t5x")
    assert t5x_step(t5x) == 0
    _assert_bitwise(read_t5x_params(t5x), checkpoints.read_params(tmp_path / "hf"))


def test_a_converted_step_starts_runs_but_is_not_resumed(tmp_path):
    params = _params(GPT2)
    step = checkpoints.save_params(tmp_path / "run", 3, params, {"step": 3})
    mngr = checkpoints.manager(tmp_path / "run", keep=None, asynchronous=False)
    try:
        with pytest.raises(checkpoints.CheckpointError, match="INITIAL_CHECKPOINT_PATH"):
            checkpoints.restore(mngr, 3, params, {})
    finally:
        mngr.close()
    assert checkpoints.step_folder(tmp_path / "run") == step  # a starting point, sealed


def test_existing_steps_and_foreign_folders_are_refused(tmp_path):
    params = _params(GPT2)
    checkpoints.save_params(tmp_path / "run", 1, params, {"step": 1})
    to_t5x(tmp_path / "run", tmp_path / "t5x")
    with pytest.raises(T5XCheckpointError, match="exists already"):
        to_t5x(tmp_path / "run", tmp_path / "t5x")
    with pytest.raises(checkpoints.CheckpointError, match="exists already"):
        checkpoints.save_params(tmp_path / "run", 1, params, {"step": 1})
    with pytest.raises(T5XCheckpointError, match="checkpoint_<step>"):
        t5x_step(tmp_path / "run")
    with pytest.raises(T5XCheckpointError, match="checkpoint_<step>"):
        from_t5x(tmp_path / "run" / "checkpoints" / "1", tmp_path / "back")
    (tmp_path / "checkpoint_5").mkdir()
    with pytest.raises(T5XCheckpointError, match="not a T5X checkpoint step"):
        from_t5x(tmp_path / "checkpoint_5", tmp_path / "back")


def test_the_command_converts_both_ways(tmp_path, capsys):
    params = _params(GPT2)
    checkpoints.save_params(tmp_path / "run", 2, params, {"step": 2})
    assert main(["t5x-checkpoint", "to-t5x", "--from", str(tmp_path / "run"),
                 "--out", str(tmp_path / "t5x")]) == 0
    written = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["t5x_checkpoint"]
    assert main(["t5x-checkpoint", "from-t5x", "--from", written,
                 "--out", str(tmp_path / "back")]) == 0
    back = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["checkpoint"]
    assert back.endswith("/checkpoints/2")
    _assert_bitwise(checkpoints.read_params(back), params)


def _error(capsys, *argv: str) -> str:
    assert main(["t5x-checkpoint", *argv]) == 2
    return capsys.readouterr().err.strip()


def test_a_conversion_that_cannot_be_written_says_so_and_writes_nothing(tmp_path, capsys):
    params = _params(GPT2)
    checkpoints.save_params(tmp_path / "run", 2, params, {"step": 2})
    to_t5x(tmp_path / "run", tmp_path / "t5x", step=9)
    err = _error(capsys, "to-t5x", "--from", str(tmp_path / "run"), "--out", str(tmp_path / "t5x"))
    assert err == (f"tw-jax t5x-checkpoint: error: {tmp_path / 't5x'} holds step 9, newer than 2: "
                   "orbax writes no older step there; give another --out or --step")
    assert sorted(p.name for p in (tmp_path / "t5x").iterdir()) == ["checkpoint_9"]
    t5x = str(tmp_path / "t5x" / "checkpoint_9")
    from_t5x(t5x, tmp_path / "back")
    err = _error(capsys, "from-t5x", "--from", t5x, "--out", str(tmp_path / "back"))
    assert err == f"tw-jax t5x-checkpoint: error: {tmp_path / 'back' / 'checkpoints' / '9'}: exists already"


def test_a_damaged_t5x_checkpoint_is_refused_before_anything_is_written(tmp_path, capsys):
    params = _params(GPT2)
    params["wte"]["embedding"][3, 1] = np.nan
    checkpoints.save_params(tmp_path / "run", 4, params, {"step": 4})
    t5x = to_t5x(tmp_path / "run", tmp_path / "t5x")
    err = _error(capsys, "from-t5x", "--from", t5x, "--out", str(tmp_path / "back"))
    assert err == (f"tw-jax t5x-checkpoint: error: {t5x}/state: parameter wte/embedding holds 1 "
                   "non-finite values (NaN or infinity): the checkpoint is damaged or diverged; "
                   "nothing was converted")
    assert not (tmp_path / "back").exists()
    (tmp_path / "t5x" / "checkpoint_4" / "state" / "_METADATA").unlink()
    err = _error(capsys, "from-t5x", "--from", t5x, "--out", str(tmp_path / "back"))
    assert err.startswith(f"tw-jax t5x-checkpoint: error: {t5x}/state: cannot be read as a T5X "
                          "checkpoint (")
    assert not (tmp_path / "back").exists()
