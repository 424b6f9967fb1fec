"""The same run on 1 CPU device and on an 8-device forced-host CPU mesh (data 2 x fsdp 2 x
model 2): equal losses within 2e-4 relative (float32; sharded matmuls and reductions sum in
another order), dropout on. A global batch that does not divide over the mesh (6 rows on 4
shards) is padded with rows that carry no loss: the same losses as on one device."""

import subprocess
import sys

import numpy as np
from train_helpers import read_metrics, subprocess_env

STEPS = 4


def _train(model_dir, env, mesh, *extra):
    command = [
        sys.executable, "-m", "tw_jax.cli", "train",
        "--gin_file=diff.gin", "--gin_file=models/t5_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
        f"--gin.MODEL_DIR={model_dir}", f"--gin.TRAIN_STEPS={STEPS}", f"--gin.MESH_SHAPE={mesh}",
        "--gin.tw_jax.train.train.progress=False", "--gin.BATCH_SIZE=8", *extra,
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return [m["loss"] for m in read_metrics(model_dir)]


def test_one_device_and_eight_device_mesh_agree(tmp_path, train_data, compile_cache):
    single = _train(tmp_path / "one", subprocess_env(train_data, compile_cache), "(-1, 1, 1)")
    sharded = _train(tmp_path / "eight", subprocess_env(train_data, compile_cache, 8), "(2, 2, 2)")
    assert len(single) == STEPS
    np.testing.assert_allclose(sharded, single, rtol=2e-4)
    assert single[-1] < single[0]


def test_a_batch_that_does_not_divide_over_the_mesh_trains_as_on_one_device(
    tmp_path, train_data, compile_cache
):
    # Dropout off: the padded step draws its dropout masks for 8 rows, the single device for 6.
    extra = ("--gin.BATCH_SIZE=6", "--gin.tw_jax.models.T5Config.dropout_rate=0.0")
    single = _train(tmp_path / "one", subprocess_env(train_data, compile_cache), "(-1, 1, 1)",
                    *extra)
    padded = _train(tmp_path / "four", subprocess_env(train_data, compile_cache, 4), "(2, 2, 1)",
                    *extra)
    assert len(single) == STEPS
    np.testing.assert_allclose(padded, single, rtol=2e-4)
