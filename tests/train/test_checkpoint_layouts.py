"""A checkpoint written with one device layout is read with another: parameters sharded over 2
devices (fsdp) load in a 1-device process as host arrays, as the starting point of a new run,
and for `tw-jax eval`; a relative MODEL_DIR works for eval and infer."""

from __future__ import annotations

import json
import subprocess
import sys

import gin
import jax
import numpy as np
from train_helpers import subprocess_env

from tw_jax.cli import main
from tw_jax.runtime import checkpoints, gin_setup
from tw_jax.runtime.run_model import build_run_model

FILES = ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"]


def _train_on_two_devices(model_dir, train_data, compile_cache):
    """2 CPU devices, parameters sharded over fsdp: no device holds a whole weight matrix."""
    command = [
        sys.executable, "-m", "tw_jax.cli", "train", *(f"--gin_file={f}" for f in FILES),
        f"--gin.MODEL_DIR={model_dir}", "--gin.TRAIN_STEPS=2", "--gin.MESH_SHAPE=(1, 2, 1)",
        "--gin.SCHEDULE='constant'", "--gin.tw_jax.train.train.progress=False",
    ]
    env = subprocess_env(train_data, compile_cache, devices=2)
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def test_a_two_device_checkpoint_loads_on_one_device(tmp_path, monkeypatch, train_data,
                                                     compile_cache, data_bindings):
    assert jax.device_count() == 1
    trained = tmp_path / "two_devices"
    _train_on_two_devices(trained, train_data, compile_cache)
    step = trained / "checkpoints" / "2"

    on_host = checkpoints.read_params(step)
    gin_setup.parse(FILES, [*data_bindings, f"MODEL_DIR='{tmp_path / 'new'}'"])
    config = gin.query_parameter("%MODEL").scoped_configurable_fn()
    run = build_run_model(config)
    placed, missing = checkpoints.initial_params(run.init_params(0), trained, run.abstract_params)
    assert missing == []
    for expected, got in zip(jax.tree.leaves(on_host), jax.tree.leaves(placed), strict=True):
        np.testing.assert_array_equal(expected, np.asarray(got))
        assert got.sharding.num_devices == 1

    # A new run on one device starts from it (INITIAL_CHECKPOINT_PATH) ...
    assert main(["train", *(f"--gin_file={f}" for f in FILES),
                 *(f"--gin.{b}" for b in data_bindings[:3]),
                 f"--gin.MODEL_DIR={tmp_path / 'continued'}", "--gin.TRAIN_STEPS=1",
                 f"--gin.INITIAL_CHECKPOINT_PATH='{step}'", "--gin.SCHEDULE='constant'",
                 "--gin.tw_jax.train.train.progress=False"]) == 0
    # ... and `tw-jax eval` scores it, here with MODEL_DIR relative to the working folder.
    monkeypatch.chdir(tmp_path)
    assert main(["eval", *(f"--gin_file={f}" for f in FILES),
                 *(f"--gin.{b}" for b in data_bindings[:3]), "--gin.MODEL_DIR=two_devices"]) == 0
    (written,) = (trained / "inference_eval").glob("*.step2.json")
    assert json.loads(written.read_text())["step"] == 2
    assert main(["infer", *(f"--gin_file={f}" for f in FILES),
                 *(f"--gin.{b}" for b in data_bindings[:3]), "--gin.MODEL_DIR=two_devices",
                 "--gin.tw_jax.evaluate.infer.max_examples=2"]) == 0
    assert len(list((trained / "infer").glob("*.jsonl"))) == 1
