"""A diverging run stops cleanly: no NaN state saved, the last good checkpoint kept and named."""

import json

import pytest

from tw_jax.train import gin_setup, trainer


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, data_bindings):
    model_dir = tmp_path / "diverge"
    gin_setup.parse(
        ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
        [*data_bindings, f"MODEL_DIR='{model_dir}'", "TRAIN_STEPS=6", "CHECKPOINT_PERIOD=1",
         "tw_jax.train.make_optimizer.name='sgd'", "CLIP_NORM=None", "LEARNING_RATE=1e38",
         "SCHEDULE='constant'"],
    )
    with pytest.raises(trainer.TrainingDivergedError,
                       match=r"loss is nan at step 2; .*last good checkpoint is step 1"):
        trainer.train(gin_setup.train_config())
    assert sorted(p.name for p in (model_dir / "checkpoints").iterdir()) == ["1"]
    lines = (model_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1]
