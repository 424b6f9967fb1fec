"""Where a user can go wrong with `tw-jax train`, one line says what to change: exit 2, no
traceback (``--debug`` or ``TW_JAX_DEBUG=1`` shows it)."""

from __future__ import annotations

import pytest
import seqio

from tw_jax.cli import main
from tw_jax.errors import UsageError

GPT2 = ["train", "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin",
        "--gin_file=runs/cpu_smoke.gin"]
T5 = ["train", "--gin_file=diff.gin", "--gin_file=models/t5_tiny.gin",
      "--gin_file=runs/cpu_smoke.gin"]


@pytest.fixture
def train(data_bindings, tmp_path, capsys):
    """Runs `tw-jax train` on the session's data; returns (exit status, stderr lines)."""

    def run(command: list[str], *bindings: str) -> tuple[int, list[str]]:
        flags = [f"--gin_bindings={b}" for b in (*data_bindings, *bindings)]
        status = main([*command, f"--gin.MODEL_DIR={tmp_path / 'model'}", *flags])
        return status, [line for line in capsys.readouterr().err.splitlines() if line.strip()]

    return run


def test_an_unknown_task_names_the_closest_ones(train):
    status, err = train(GPT2, "MIXTURE_OR_TASK_NAME='twiki_diffset_0809_lmm'")
    assert status == 2
    assert len(err) == 1
    assert err[0].startswith("tw-jax train: error: no seqio task or mixture named "
                             "'twiki_diffset_0809_lmm' (")
    assert "did you mean twiki_diffset_0809_lm," in err[0]


def test_an_unknown_task_with_no_data_folder_says_so(data_bindings, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TW_JAX_DATA_DIR", raising=False)
    status = main([*GPT2, f"--gin.MODEL_DIR={tmp_path}", "--gin.MIXTURE_OR_TASK_NAME='nowhere'",
                   "--gin_bindings=tw_jax.train.train.progress=False"])
    assert status == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "tw-jax train: error: no seqio task or mixture named 'nowhere' (no data folder is set: "
        "--gin.DATA_DIR=DIR or $TW_JAX_DATA_DIR); `tw-jax tasks --data DIR` lists a folder's tasks"
    ]


def test_a_t5_model_on_a_language_modelling_task(train):
    status, err = train(T5, "MIXTURE_OR_TASK_NAME='twiki_diffset_0809_lm'")
    assert status == 2
    assert err == [
        "tw-jax train: error: twiki_diffset_0809_lm gives the features ['targets'], but a "
        "T5Model reads ['inputs', 'targets'] (missing ['inputs']): pick a task with them; this "
        "model's tasks end in _ssm (`tw-jax tasks` lists them)"
    ]


def test_a_one_cycle_schedule_longer_than_the_run(train):
    status, err = train(GPT2, "TRAIN_STEPS=2")
    assert status == 2
    assert err == [
        "tw-jax train: error: the one_cycle schedule needs at least 4 steps with pct_start=0.3 "
        "(its peak, step pct_start * steps - 1, must fall inside the run); got 2: raise "
        "TRAIN_STEPS or use --gin.SCHEDULE=\"'constant'\""
    ]


def test_a_missing_vocabulary(train_data, tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"  # a data folder without its vocab/ folder
    data.mkdir()
    (data / "1112").symlink_to(train_data["data_dir"] / "0809")
    monkeypatch.delenv("TW_JAX_GPT2_VOCAB", raising=False)
    status = main([*GPT2, f"--gin.MODEL_DIR={tmp_path / 'model'}", f"--gin.DATA_DIR='{data}'",
                   "--gin.MIXTURE_OR_TASK_NAME='twiki_diffset_1112_lm'",
                   "--gin_bindings=tw_jax.train.train.progress=False"])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"tw-jax train: error: gpt2 vocabulary: {data / 'vocab' / 'gpt2'}: "
                             "no such byte-level BPE vocabulary")


def test_an_empty_split(train):
    import tensorflow as tf

    vocabulary = seqio.get_mixture_or_task("twiki_diffset_0809_lm").output_features["targets"]
    seqio.TaskRegistry.remove("empty_lm")
    seqio.TaskRegistry.add(
        "empty_lm",
        source=seqio.FunctionDataSource(
            lambda split, shuffle_files, seed=None: tf.data.Dataset.from_tensor_slices(
                {"targets": tf.constant([], tf.string)}), splits=("train",)),
        preprocessors=[seqio.preprocessors.tokenize],
        output_features={"targets": vocabulary},
    )
    try:
        status, err = train(GPT2, "MIXTURE_OR_TASK_NAME='empty_lm'")
    finally:
        seqio.TaskRegistry.remove("empty_lm")
    assert status == 2
    assert err == ["tw-jax train: error: the 'train' split of empty_lm has no examples"]


def test_a_batch_larger_than_the_data(train):
    status, err = train(GPT2, "BATCH_SIZE=100000")
    assert status == 2
    assert len(err) == 1
    assert err[0].startswith("tw-jax train: error: a batch of 100000 examples per host is larger "
                             "than the ")
    assert err[0].endswith(" examples of the 'train' split of twiki_diffset_0809_lm: lower "
                           f"BATCH_SIZE to at most {err[0].split()[-1]}")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback(data_bindings, tmp_path, monkeypatch, how):
    flags = ["--debug"] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("TW_JAX_DEBUG", "1")
    with pytest.raises(UsageError, match="one_cycle schedule needs at least 4 steps"):
        main([*GPT2, f"--gin.MODEL_DIR={tmp_path}", "--gin.TRAIN_STEPS=2", *flags,
              *(f"--gin_bindings={b}" for b in data_bindings)])
