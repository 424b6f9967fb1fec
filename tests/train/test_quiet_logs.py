"""A tiny training run prints tw_jax's own lines only: one per LOG_PERIOD when stderr is a
file (step, loss, accuracy, learning rate, tokens/s, ETA) and the closing line; not Python
logging (absl and orbax INFO are off unless --verbose), nor TensorFlow's C++ start-up lines
(the CLI loads TensorFlow with them off)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from train_helpers import subprocess_env

_CPP_STARTUP = re.compile(r"^([IWE]\d{4} |WARNING: All log messages before absl)")


def _train(tmp_path, train_data, compile_cache, *extra: str) -> list[str]:
    env = subprocess_env(train_data, compile_cache)
    env.pop("TF_CPP_MIN_LOG_LEVEL")  # as a user runs it
    done = subprocess.run(
        [sys.executable, "-m", "tw_jax.cli", *extra, "train", "--gin_file=diff.gin",
         "--gin_file=models/gpt2_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
         f"--gin.MODEL_DIR={tmp_path / 'model'}"],
        env=env, capture_output=True, text=True, check=True, cwd=os.fspath(tmp_path),
    )
    return (done.stdout + done.stderr).splitlines()


def test_a_tiny_run_prints_a_line_per_logged_step_and_no_library_logging(
        tmp_path, train_data, compile_cache):
    lines = _train(tmp_path, train_data, compile_cache)
    ours = [line for line in lines if not _CPP_STARTUP.match(line)]
    steps = [line for line in ours if line.startswith("step ")]
    assert [line.split()[1] for line in steps] == [f"{n}/12" for n in range(1, 13)]
    assert re.fullmatch(r"step 12/12 loss [\d.]+ accuracy [\d.e-]+ lr [\d.e-]+ tokens/s [\d,]+ "
                        r"ETA 0:00:00", steps[-1]), steps[-1]
    assert ours == ["trained to step 12 (started at step 0)", *steps]  # stdout, then stderr
    tensorflow_startup = ("All log messages before absl", "cudart_stub", "cpu_feature_guard",
                          "oneDNN custom operations", "cuInit")
    assert not [line for line in lines if any(text in line for text in tensorflow_startup)]


def test_verbose_keeps_the_libraries_info_logging(tmp_path, train_data, compile_cache):
    lines = _train(tmp_path, train_data, compile_cache, "--verbose")
    assert any("orbax" in line.lower() or "checkpoint" in line.lower()
               for line in lines if not line.startswith("step ")), lines
