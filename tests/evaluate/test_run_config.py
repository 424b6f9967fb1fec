"""A trained run evaluated and decoded with one command (tw_jax.evaluate.run_config and
`tw-jax eval` / `infer` on it): its own config.gin, --task / --split, and one-line errors for a
configuration that does not fit the checkpoint and a task with no prompt to decode from."""

import json

import numpy as np
import pytest

from tw_jax.cli import main
from tw_jax.errors import UsageError
from tw_jax.evaluate import run_config
from tw_jax.runtime import gin_setup
from tw_jax.train import trainer
from tw_jax.train.gin_config import train_config

GPT2_FILES = ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"]
TASK = "twiki_probes_0809_updated"


def test_model_dir_binding_reads_quoted_and_bare_paths():
    assert run_config.model_dir_binding(["TRAIN_STEPS=3", "MODEL_DIR=runs/a"]) == "runs/a"
    assert run_config.model_dir_binding(["MODEL_DIR='gs://b/run'"]) == "gs://b/run"
    assert run_config.model_dir_binding(["MODEL_DIR=a", "MODEL_DIR=b"]) == "b"
    assert run_config.model_dir_binding(["MODEL_DIR=None"]) is None
    assert run_config.model_dir_binding(["DATA_DIR=x"]) is None


def test_shortcut_bindings_set_the_task_macro_and_the_commands_split():
    assert run_config.shortcut_bindings("eval", TASK, "test") == [
        f"MIXTURE_OR_TASK_NAME={TASK}", "tw_jax.evaluate.evaluate.split=test"]
    assert run_config.shortcut_bindings("infer", None, "validation") == [
        "tw_jax.evaluate.infer.split=validation"]
    assert run_config.shortcut_bindings("eval", None, None) == []


def test_gin_files_are_the_given_ones_else_the_runs_config(tmp_path):
    (tmp_path / "config.gin").write_text("")
    assert run_config.gin_files("eval", ["a.gin"], [f"MODEL_DIR={tmp_path}"]) == ["a.gin"]
    assert run_config.gin_files("eval", [], [f"MODEL_DIR={tmp_path}"]) == [
        f"{tmp_path}/config.gin"]
    with pytest.raises(UsageError) as error:
        run_config.gin_files("infer", [], [])
    assert str(error.value) == ("pass --gin.MODEL_DIR=DIR (a trained run: its config.gin is "
                                "read) or the run's gin files (--gin_file=...); see tw-jax "
                                "infer --help")
    with pytest.raises(UsageError) as error:
        run_config.gin_files("eval", [], [f"MODEL_DIR={tmp_path}/empty"])
    assert str(error.value) == (f"{tmp_path}/empty/config.gin not found: {tmp_path}/empty is "
                                "not a trained run's folder; pass the gin files it was trained "
                                "with (--gin_file=...)")


def _vocab_size(path) -> int:
    from tw_jax.data.vocabularies import gpt2_vocabulary

    return int(gpt2_vocabulary(str(path)).vocab_size)


def test_a_run_is_evaluated_and_decoded_with_its_own_config(tmp_path, data_bindings,
                                                             train_data, capsys):
    """As the demo trains: GPT-2 tiny with the data's own vocabulary size, which the shipped
    models/gpt2_tiny.gin (50257) does not rebuild; its config.gin does."""
    model_dir = tmp_path / "run"
    vocab = _vocab_size(train_data["gpt2"])
    assert vocab != 50257
    gin_setup.parse(GPT2_FILES, [*data_bindings, f"MODEL_DIR='{model_dir}'", "TRAIN_STEPS=4",
                                 f"tw_jax.models.GPT2Config.vocab_size={vocab}"])
    trainer.train(train_config())
    capsys.readouterr()
    out = model_dir / "inference_eval" / f"{TASK}.validation.step4.json"

    # one command: the run's folder, the task, the split
    assert main(["eval", f"--gin.MODEL_DIR={model_dir}", "--task", TASK,
                 "--split", "validation"]) == 0
    short = capsys.readouterr()
    assert short.err.splitlines()[0] == (
        f"tw-jax eval: using the run's own configuration, {model_dir}/config.gin")
    short_summary = json.loads(out.read_text())
    out.unlink()
    # T5X's way, the same figures
    assert main(["eval", f"--gin_file={model_dir}/config.gin", f"--gin.MODEL_DIR={model_dir}",
                 f"--gin.MIXTURE_OR_TASK_NAME={TASK}"]) == 0
    long = capsys.readouterr()
    assert json.loads(out.read_text()) == short_summary
    assert short_summary["tasks"][TASK]["examples"] == 5
    assert short.out == long.out
    assert short.out.startswith(f"{TASK} step=4 perplexity=")

    # the shipped model file builds another embedding: one line pointing at config.gin
    files = [f"--gin_file={name}" for name in GPT2_FILES]
    assert main(["eval", *files, *(f"--gin.{b}" for b in data_bindings[:3]),
                 f"--gin.MODEL_DIR={model_dir}", "--task", TASK]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tw-jax eval: error: {model_dir}: checkpoint tensor wte/embedding has shape "
        f"({vocab}, 64), the model expects (50257, 64); the checkpoint was trained with another "
        f"configuration, the one {model_dir}/config.gin records: leave out the --gin_file flags "
        f"to use it (tw-jax eval --gin.MODEL_DIR={model_dir} --task ...)"]

    # the run's own config.gin with a changed model setting: the same tensors, another model
    step_dir = model_dir / "checkpoints" / "4"
    out.unlink()
    assert main(["eval", f"--gin.MODEL_DIR={model_dir}", "--task", TASK,
                 "--gin.tw_jax.models.GPT2Config.activation='relu'"]) == 2
    assert capsys.readouterr().err.splitlines()[1:] == [
        f"tw-jax eval: error: {step_dir}: was trained with other model settings than this "
        "configuration gives (activation gelu_new → relu; recorded → given), so it would score "
        "another model than it trained; evaluate it with its own settings (--gin.MODEL_DIR=DIR "
        "and no --gin_file reads the run's DIR/config.gin; leave out the bindings that change "
        "them)"]
    assert not out.exists()

    # a probe task is whole sentences: no prompt to decode from
    assert main(["infer", f"--gin.MODEL_DIR={model_dir}", "--task", TASK]) == 2
    assert capsys.readouterr().err.splitlines()[1:] == [
        f"tw-jax infer: error: {TASK} has no inputs, so there is no prompt to decode from; "
        f"infer on --task {TASK}_object (subject and relation as the prompt), or score {TASK} "
        "with tw-jax eval"]
    assert not (model_dir / "infer").exists()
    # its _object task has the prompt: subject and relation
    assert main(["infer", f"--gin.MODEL_DIR={model_dir}", "--task", f"{TASK}_object",
                 "--split", "validation", "--gin.TASK_FEATURE_LENGTHS={'inputs': 32, 'targets': 4}",
                 "--gin.tw_jax.evaluate.infer.max_examples=2"]) == 0
    written = model_dir / "infer" / f"{TASK}_object.validation.jsonl"
    records = [json.loads(line) for line in written.read_text().splitlines()]
    assert [r["index"] for r in records] == [0, 1]
    assert all(r["inputs"] and r["targets"] for r in records)


def test_eval_and_infer_help_say_how_to_pick_the_run_task_and_split():
    import argparse

    from tw_jax.cli import EXAMPLES, build_parser

    (commands,) = [a for a in build_parser()._actions
                   if isinstance(a, argparse._SubParsersAction)]
    for name in ("eval", "infer"):
        text = " ".join(commands.choices[name].format_help().split())
        assert "--task NAME" in text and "--split SPLIT" in text
        assert ("--gin.MODEL_DIR=DIR with no --gin_file reads the configuration it was trained "
                "with, DIR/config.gin") in text
        assert EXAMPLES[name].startswith(
            f"tw-jax {name} --gin.MODEL_DIR=demo_out/runs/checkpoints/diff/0809 "
            "--task twiki_probes_0809_updated")


def test_only_settings_that_change_what_is_scored_are_refused(tmp_path):
    """A step's recorded model settings against the configuration that evaluates it: dropout,
    initialisers, freezing, remat and dtypes may differ; the activation, a layer count or a
    method's settings may not; a step that records nothing is not checked."""
    import dataclasses

    from tw_jax.evaluate.runs import TrainedSettingsError, check_model_settings
    from tw_jax.models import GPT2Config, LoRAConfig
    from tw_jax.runtime import checkpoints

    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2,
                        lora=LoRAConfig())
    params = {"p": np.zeros((2,), np.float32)}  # the check reads the step's meta alone
    step = checkpoints.save_params(tmp_path / "run", 3, params,
                                   {"step": 3, "model": checkpoints.model_record(config)})
    bare = checkpoints.save_params(tmp_path / "old", 3, params, {"step": 3})
    same = dataclasses.replace(config, dropout_rate=0.0, initializer_range=1.0, remat=True,
                               freeze="none", dtype="bfloat16",
                               lora=dataclasses.replace(config.lora, init_stddev=0.5))
    check_model_settings(step, same)
    check_model_settings(bare, dataclasses.replace(config, activation="relu"))
    for changed, said in ((dataclasses.replace(config, activation="relu"),
                           "activation gelu_new → relu"),
                          (dataclasses.replace(config, lora=LoRAConfig(rank=8)),
                           "lora.rank 4 → 8"),
                          (dataclasses.replace(config, lora=None), "lora.alpha 16.0 → None")):
        with pytest.raises(TrainedSettingsError, match=f"^{step}: was trained with other model "
                                                     f"settings .*\\({said}[,;]"):
            check_model_settings(step, changed)
