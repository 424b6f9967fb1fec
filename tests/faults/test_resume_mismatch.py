"""Resuming MODEL_DIR with another model is refused before any of its files changes, naming the
settings and tensors that differ (before: exit 1 with orbax's message cut at "tree structures do
not match:", and config.gin already rewritten); a resume whose changes cannot alter the
parameters goes on, and config.gin keeps what trained the earlier steps."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tw_jax.runtime import gin_setup
from tw_jax.train import trainer
from tw_jax.train.gin_config import train_config
from tw_jax.train.resume_check import (
    ResumeMismatchError,
    model_record,
    setting_changes,
    tensor_changes,
)


def _parse(model_dir: Path, bindings: list[str], *extra: str) -> None:
    gin_setup.parse(
        ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
        [*bindings, f"MODEL_DIR='{model_dir}'", "CHECKPOINT_PERIOD=2", "SCHEDULE='constant'",
         *extra],
        required_macros=gin_setup.MACROS_TRAIN,
    )


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_changes_are_named_setting_by_setting_and_tensor_by_tensor():
    from tw_jax.models import GPT2Config, LoRAConfig

    old = model_record(GPT2Config(n_layer=3, lora=LoRAConfig(rank=8)))
    new = model_record(GPT2Config(n_layer=4, lora=LoRAConfig(rank=16)))
    assert setting_changes(old, new) == ["lora.rank 8 → 16", "n_layer 3 → 4"]
    assert setting_changes(old, model_record(LoRAConfig())) == ["model GPT2Config → LoRAConfig"]

    class Shape:
        def __init__(self, *shape):
            self.shape = shape

    saved = {"h": {"0": {"w": Shape(4, 4)}, "1": {"w": Shape(4, 4)}}, "wte": Shape(9, 4)}
    asked = {"h": {"0": {"w": Shape(4, 8)}}, "wte": Shape(9, 4), "head": Shape(4, 9)}
    assert tensor_changes(saved, asked) == [
        "h/0/w (4, 4) → (4, 8)", "h/1/w (4, 4) only in the checkpoint",
        "head (4, 9) only in this model"]


def test_a_resume_with_another_model_changes_nothing_and_says_what_differs(tmp_path,
                                                                          data_bindings):
    model_dir = tmp_path / "run"
    _parse(model_dir, data_bindings, "TRAIN_STEPS=2")
    trainer.train(train_config())
    before = _files(model_dir)

    _parse(model_dir, data_bindings, "TRAIN_STEPS=4", "tw_jax.models.GPT2Config.n_layer=4")
    with pytest.raises(ResumeMismatchError) as caught:
        trainer.train(train_config())
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{model_dir}: its checkpoints (")
    assert "another model than this run asks for: n_layer 3 → 4;" in message
    assert "parameter(s) differ: " in message and "only in this model" in message
    assert "Nothing in MODEL_DIR was changed" in message
    assert _files(model_dir) == before  # config.gin and every checkpoint file as they were

    # the command: one line, exit 2
    from tw_jax.cli import main

    code = main(["train", "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin",
                 "--gin_file=runs/cpu_smoke.gin", *(f"--gin.{b}" for b in data_bindings),
                 f"--gin.MODEL_DIR={model_dir}", "--gin.TRAIN_STEPS=4",
                 "--gin.SCHEDULE='constant'", "--gin.tw_jax.models.GPT2Config.n_layer=4"])
    assert code == 2
    assert _files(model_dir) == before


def test_a_resume_with_more_steps_goes_on_and_keeps_the_earlier_config(tmp_path,
                                                                        data_bindings):
    model_dir = tmp_path / "run"
    _parse(model_dir, data_bindings, "TRAIN_STEPS=2")
    trainer.train(train_config())
    first = (model_dir / "config.gin").read_text()

    _parse(model_dir, data_bindings, "TRAIN_STEPS=4", "LEARNING_RATE=3e-4")
    summary = trainer.train(train_config())
    assert (summary.start_step, summary.step) == (2, 4)
    assert (model_dir / "config.until_step_2.gin").read_text() == first
    assert "TRAIN_STEPS = 4" in (model_dir / "config.gin").read_text()

    _parse(model_dir, data_bindings, "TRAIN_STEPS=4", "LEARNING_RATE=3e-4")
    trainer.train(train_config())  # finished, same config: nothing more kept
    assert sorted(p.name for p in model_dir.glob("config*.gin")) == [
        "config.gin", "config.until_step_2.gin"]
