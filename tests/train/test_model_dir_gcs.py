"""MODEL_DIR in a bucket (a real GCS server on 127.0.0.1): checkpoints, metrics, TensorBoard and
gin files land there, a second invocation resumes from it, `tw-jax eval` and `infer` read it, and
the parameters equal those of the same run in a local folder."""

from __future__ import annotations

import json

import jax
import numpy as np

from tw_jax.cli import main
from tw_jax.io import paths
from tw_jax.runtime import checkpoints, gin_setup
from tw_jax.train import trainer
from tw_jax.train.gin_config import train_config

FILES = ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"]


def _train(model_dir, steps, data_bindings):
    gin_setup.parse(FILES, [*data_bindings, f"MODEL_DIR='{model_dir}'", f"TRAIN_STEPS={steps}",
                            "CHECKPOINT_PERIOD=2", "SCHEDULE='constant'"])
    return trainer.train(train_config())


def test_a_run_in_a_bucket(tmp_path, monkeypatch, gcs_bucket, gcs_server, data_bindings):
    monkeypatch.chdir(tmp_path)
    remote = f"{gcs_bucket}/run"
    assert _train(remote, 4, data_bindings).start_step == 0
    resumed = _train(remote, 6, data_bindings)
    assert (resumed.start_step, resumed.step) == (4, 6)

    names = gcs_server.objects(gcs_bucket[len("gs://"):], "run/")
    assert {"run/config.gin", "run/operative_config.gin", "run/metrics.jsonl"} <= set(names)
    assert sum(n.startswith("run/train/events.out.tfevents.") for n in names) == 2
    assert {n.split("/")[2] for n in names if n.startswith("run/checkpoints/")} == {"4", "6"}
    metrics = [json.loads(line) for line in paths.read_text(f"{remote}/metrics.jsonl").splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5, 6]
    assert not (tmp_path / "gs:").exists()

    local = tmp_path / "local"
    _train(local, 6, data_bindings)
    expected = checkpoints.read_params(local / "checkpoints" / "6")
    got = checkpoints.read_params(f"{remote}/checkpoints/6")
    for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(got), strict=True):
        np.testing.assert_array_equal(a, b)

    flags = [*(f"--gin_file={f}" for f in FILES), *(f"--gin.{b}" for b in data_bindings[:3]),
             f"--gin.MODEL_DIR={remote}"]
    assert main(["eval", *flags]) == 0
    # seqio's evaluation files, written through tw_jax's GCS client (not TensorFlow's)
    evaluated = gcs_server.objects(gcs_bucket[5:], "run/inference_eval/")
    (summary,) = [n for n in evaluated if n.endswith(".step6.json")]
    written = json.loads(paths.read_text(f"{gcs_bucket}/{summary}"))
    assert written["step"] == 6
    (task,) = written["tasks"]
    assert {f"run/inference_eval/{task}-metrics.jsonl", f"run/inference_eval/{task}-000006.jsonl"
            } <= set(evaluated)
    assert any(n.startswith(f"run/inference_eval/{task}/events.out.tfevents.") for n in evaluated)
    assert main(["infer", *flags, "--gin.tw_jax.evaluate.infer.max_examples=3"]) == 0
    (inferred,) = gcs_server.objects(gcs_bucket[5:], "run/infer/")
    assert len(paths.read_text(f"{gcs_bucket}/{inferred}").splitlines()) == 3
