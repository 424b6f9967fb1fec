"""Damaged checkpoints are never restored as good: every finished step carries the checksums of
its files; a resume, a starting point or an evaluation skips a damaged step for the newest
intact one, naming it, and stops with one line when none is left (tw_jax.runtime.integrity)."""

import json
import logging

import pytest

from tw_jax.runtime import checkpoints, gin_setup
from tw_jax.runtime.integrity import MANIFEST, check_step
from tw_jax.train import trainer
from tw_jax.train.gin_config import train_config

FILES = ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"]


def _config(data_bindings, model_dir, steps):
    gin_setup.parse(FILES, [*data_bindings, "SCHEDULE='constant'", "CHECKPOINT_PERIOD=2",
                            "KEEP_CHECKPOINTS=None"])
    return train_config().replace(model_dir=str(model_dir), train_steps=steps)


def _largest_file(folder):
    return max((p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST),
               key=lambda p: p.stat().st_size)


def _flip(path):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))


@pytest.fixture()
def trained(tmp_path, data_bindings):
    """A run of 4 steps with checkpoints at steps 2 and 4."""
    model_dir = tmp_path / "run"
    trainer.train(_config(data_bindings, model_dir, 4))
    return model_dir


def test_every_finished_step_records_its_checksums(trained):
    root = trained / "checkpoints"
    assert sorted(p.name for p in root.iterdir() if p.name.isdigit()) == ["2", "4"]
    for step in ("2", "4"):
        files = json.loads((root / step / MANIFEST).read_text())["files"]
        assert any(name.startswith("params/") for name in files)
        assert any(name.startswith("opt_state/") for name in files)
        assert check_step(str(root / step)) is None


def test_flipped_bytes_resume_from_the_newest_intact_step(trained, data_bindings, caplog):
    step4 = trained / "checkpoints" / "4"
    victim = _largest_file(step4 / "params")
    _flip(victim)
    relative = victim.relative_to(step4).as_posix()
    assert check_step(str(step4)) == (
        f"{relative} does not match its checksum (its bytes changed after it was saved)")
    with pytest.raises(checkpoints.CheckpointError, match=r"4: damaged: .* does not match"):
        checkpoints.step_folder(step4)  # named explicitly: refused
    with caplog.at_level(logging.WARNING):
        assert checkpoints.step_folder(trained) == str(trained / "checkpoints" / "2")
    assert f"{step4}: damaged, not used" in caplog.text
    summary = trainer.train(_config(data_bindings, trained, 6))
    assert (summary.start_step, summary.step) == (2, 6)  # step 4 trained again
    assert check_step(str(step4)) is None  # the damaged folder was replaced


def test_a_deleted_metadata_file_is_damage_too(trained):
    (trained / "checkpoints" / "4" / "params" / "_METADATA").unlink()
    assert check_step(str(trained / "checkpoints" / "4")) == "params/_METADATA is missing"
    assert checkpoints.step_folder(trained).endswith("/checkpoints/2")


def test_no_intact_step_is_one_line(trained, data_bindings):
    for step in ("2", "4"):
        _flip(_largest_file(trained / "checkpoints" / step / "params"))
    with pytest.raises(checkpoints.CheckpointError,
                       match=r"checkpoints: every checkpoint is damaged \(step 4: .*; step 2: .*\);"
                             r" move the folder away to start over$"):
        trainer.train(_config(data_bindings, trained, 6))
