"""A record damaged inside its body (its CRC no longer matches) passes the header-only shard
checks and surfaces only when the input pipeline reads it: tw-jax train then ends with one line
naming the file, the record and what rebuilds it, exit 2 (before: TensorFlow's DataLossError
traceback, "corrupted record at 12", naming no file; on a cut record a run that never exited)."""

from __future__ import annotations

import shutil

import pytest

import tw_jax.tasks
from tw_jax.io.tfrecord import read_records

TASK = "twiki_diffset_0809_ssm"
SSM_STAGE = "tw-jax ssm --in DATA_DIR/<period>/diffset --out DATA_DIR/<period>/ssm"


@pytest.fixture()
def damaged_copy(task_data, tmp_path):
    """A copy of the session's data folder, its tasks registered; the session's registered
    again afterwards, so no later test reads the damaged copy."""
    data = tmp_path / "data"
    shutil.copytree(task_data["data_dir"], data, symlinks=True)
    tw_jax.tasks.register_all(data, t5_vocab=str(task_data["t5"]),
                              gpt2_vocab=str(task_data["gpt2"]))
    yield data
    tw_jax.tasks.register_all(task_data["data_dir"], t5_vocab=str(task_data["t5"]),
                              gpt2_vocab=str(task_data["gpt2"]))


def _flip_inside(shard, number: int) -> int:
    """Flips a byte in the body of record ``number`` (from 1); returns the record's offset."""
    lengths = [len(record) for record in read_records(shard)]
    offset = sum(12 + length + 4 for length in lengths[:number - 1])
    raw = bytearray(shard.read_bytes())
    raw[offset + 12 + lengths[number - 1] // 2] ^= 0xFF
    shard.write_bytes(bytes(raw))
    return offset


def _train(data, vocabularies: dict, model_dir) -> int:
    from tw_jax.cli import main

    return main(["train", "--gin_file=diff.gin", "--gin_file=models/t5_tiny.gin",
                 "--gin_file=runs/cpu_smoke.gin", f"--gin.MODEL_DIR='{model_dir}'",
                 f"--gin.DATA_DIR='{data}'",
                 f"--gin.tw_jax.tasks.register_all.t5_vocab='{vocabularies['t5']}'",
                 f"--gin.tw_jax.tasks.register_all.gpt2_vocab='{vocabularies['gpt2']}'",
                 "--gin.TRAIN_STEPS=2", "--gin.tw_jax.train.train.progress=False"])


def test_a_record_damaged_inside_is_one_line_naming_the_file_and_record(
        damaged_copy, task_data, tmp_path, capsys):
    shard = damaged_copy / "0809" / "ssm" / "diffset.tfrecord-00000-of-00001"
    records = sum(1 for _ in read_records(shard))
    assert records > 4
    original = shard.read_bytes()
    # the first record: read when the run checks a batch can be filled; the last: once
    # training reads its stream (the shuffle buffer reads the whole file)
    for number in (1, records):
        shard.write_bytes(original)
        offset = _flip_inside(shard, number)
        capsys.readouterr()
        assert _train(damaged_copy, task_data, tmp_path / f"run{number}") == 2
        assert capsys.readouterr().err.strip().splitlines() == [
            f"tw-jax train: error: {shard}, record {number} (byte {offset}): corrupt record "
            f"data: the file was damaged after it was written; run `{SSM_STAGE}` again (read "
            f"for {TASK}, train)"]
        assert not list((tmp_path / f"run{number}").glob("checkpoints/[0-9]*"))


def test_a_damaged_read_no_task_names_is_still_one_line(monkeypatch, capsys):
    """A DataLossError from a read no task wraps: the command's one line with TensorFlow's own
    words (not its graph node), exit 2, no traceback."""
    import tensorflow as tf

    from tw_jax import tasks_cli
    from tw_jax.cli import main

    def damaged(args) -> int:
        raise tf.errors.DataLossError(None, None, "{{function_node __wrapped__ReduceDataset_"
                                      "Targuments_0}} corrupted record at 12 [Op:ReduceDataset] "
                                      "name: ")

    monkeypatch.setattr(tasks_cli, "run", damaged)
    assert main(["tasks"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "tw-jax tasks: error: an input file is damaged or cut (corrupted record at 12); run "
        "again with --debug to see where it was read"]
