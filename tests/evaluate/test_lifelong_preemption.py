"""`tw-jax lifelong` preempted inside a month: SIGTERM during the month's training saves a
checkpoint, stops the run with exit status 0 before anything of that month is recorded, and the
same command resumes training inside the month and finishes it.

The tiny GPT-2 has the demo data's vocabulary size, as ``tw-jax demo`` trains it: with
models/gpt2_tiny.gin's 50,257-wide output layer the month's 300 steps were most of the test."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from waiting import wait_until

from tw_jax.data.vocabularies import gpt2_vocabulary


def _logged(model_dir: Path) -> int:
    try:
        return len((model_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        return 0


def test_sigterm_inside_a_month_resumes_there(tmp_path, demo_data):
    shutil.copytree(demo_data, tmp_path / "demo")  # what run_demo(tmp_path / "demo") writes
    data = tmp_path / "demo" / "data"
    out = tmp_path / "out"
    month_dir = out / "checkpoints" / "diff" / "0809"
    updates = tmp_path / "long.gin"  # the month's update is long; INITIAL keeps cpu_smoke's 12
    updates.write_text("TRAIN_STEPS = 300\nCHECKPOINT_PERIOD = 1000\n", encoding="utf-8")
    vocab_size = int(gpt2_vocabulary(str(data / "vocab" / "gpt2")).vocab_size)
    command = [
        sys.executable, "-m", "tw_jax.cli", "lifelong",
        "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
        f"--gin_file={updates}", "--initial-gin-file=initial.gin",
        "--initial-gin-file=models/gpt2_tiny.gin", "--initial-gin-file=runs/cpu_smoke.gin",
        "--gin.BATCH_SIZE=2", "--gin.SCHEDULE='constant'", "--gin.tw_jax.train.train.progress=False",
        f"--gin.tw_jax.models.GPT2Config.vocab_size={vocab_size}",
        "--months", "0809", "--data", str(data), "--out", str(out),
        "--max-probes", "8", "--eval-batch-size", "8",
    ]
    # the session's XLA cache (tests/conftest.py) comes with os.environ
    env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)

    def three_steps_logged():
        assert process.poll() is None, process.communicate()[1][-3000:]
        return _logged(month_dir) >= 3

    wait_until(three_steps_logged, timeout=400, what="the month's training to log 3 steps")
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-3000:]
    (saved,) = [int(p.name) for p in (month_dir / "checkpoints").iterdir() if p.name.isdigit()]
    assert 3 <= saved < 300
    assert f"lifelong: SIGTERM: stopped at step {saved} with a checkpoint in {month_dir}" in stdout
    assert not (out / "state" / "diff" / "0809.json").exists()
    recorded = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {line["method"] for line in recorded} == {"initial"}

    rerun = subprocess.run(command, env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    state = json.loads((out / "state" / "diff" / "0809.json").read_text())
    assert (state["resumed_from_step"], state["step"]) == (saved, 300)
    steps = [json.loads(line)["step"] for line in (month_dir / "metrics.jsonl").read_text()
             .splitlines()]
    assert steps == list(range(1, 301))
    recorded = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert any(line["method"] == "diff" and line["metric"] == "ppl" for line in recorded)
    assert "trained 0809" in rerun.stdout
