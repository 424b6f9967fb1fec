"""Exact resume: a `tw-jax train` process killed with SIGKILL mid-run and restarted ends with
parameters bitwise equal to those of a run that was never interrupted (CPU, dropout on)."""

import signal
import subprocess
import sys

import jax
import numpy as np
from train_helpers import read_metrics, subprocess_env
from waiting import wait_until

from tw_jax.runtime.checkpoints import read_params

STEPS = 24


def _command(model_dir):
    return [
        sys.executable, "-m", "tw_jax.cli", "train",
        "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
        f"--gin.MODEL_DIR={model_dir}", f"--gin.TRAIN_STEPS={STEPS}", "--gin.CHECKPOINT_PERIOD=2",
        "--gin.KEEP_CHECKPOINTS=3", "--gin.tw_jax.train.train.progress=False",
    ]


def _finished_steps(model_dir):
    folder = model_dir / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit() and (p / "params").is_dir())


def test_sigkill_then_restart_is_bitwise_equal(tmp_path, train_data, compile_cache):
    env = subprocess_env(train_data, compile_cache)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    subprocess.run(_command(straight), env=env, check=True, capture_output=True)

    process = subprocess.Popen(_command(killed), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)

    def saved_step_6_or_ended():
        done = _finished_steps(killed)
        return process.poll() is not None or (done and done[-1] >= 6)

    wait_until(saved_step_6_or_ended, what="the run to save step 6")
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL, "the run ended before it could be killed"
    at_kill = _finished_steps(killed)
    assert 6 <= at_kill[-1] < STEPS

    restarted = subprocess.run(_command(killed), env=env, check=True, capture_output=True,
                               text=True)
    assert f"started at step {at_kill[-1]}" in restarted.stdout

    expected = read_params(straight / "checkpoints" / str(STEPS))
    got = read_params(killed / "checkpoints" / str(STEPS))
    for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(got), strict=True):
        np.testing.assert_array_equal(a, b)
    # The metrics read as one run: every step once, the same losses as the uninterrupted run.
    assert [m["step"] for m in read_metrics(killed)] == list(range(1, STEPS + 1))
    assert [m["loss"] for m in read_metrics(killed)] == [m["loss"] for m in read_metrics(straight)]
