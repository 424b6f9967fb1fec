"""A start from INITIAL_CHECKPOINT_PATH that lacks parameters: a method's new ones (LoRA,
K-Adapter, Modular) start fresh as expected; the base model's (a 2-layer checkpoint for the
3-layer gpt2_tiny) are refused in one line naming them, before anything is initialised or
written, unless --gin.ALLOW_NEW_PARAMETERS=True asks for them; from a Hugging Face folder and
from an orbax step alike."""

from __future__ import annotations

import dataclasses
import logging

import flax.linen as nn
import jax
import numpy as np
import pytest

from tw_jax.cli import main
from tw_jax.errors import UsageError
from tw_jax.models import GPT2Config, model_for
from tw_jax.runtime import checkpoints
from tw_jax.train.resume_check import NewParametersError, check_new_parameters

TINY = GPT2Config(vocab_size=50257, n_positions=256, n_embd=64, n_layer=2, n_head=4)  # 2 of 3
NEW = ["h_2/attn/key/bias", "h_2/attn/key/kernel", "h_2/attn/out/bias", "h_2/attn/out/kernel",
       "h_2/attn/query/bias"]  # the first of the third layer's parameters, sorted


def _params(config: GPT2Config) -> dict:
    shapes = nn.unbox(model_for(config).abstract_variables(1, 8)["params"])
    rng = np.random.default_rng(0)
    return jax.tree.map(lambda x: (0.02 * rng.standard_normal(x.shape)).astype(x.dtype), shapes)


def _train(model_dir, start, data_bindings, *more: str) -> int:
    return main(["train", "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin",
                 "--gin_file=runs/cpu_smoke.gin", f"--gin.MODEL_DIR='{model_dir}'",
                 f"--gin.INITIAL_CHECKPOINT_PATH='{start}'", "--gin.TRAIN_STEPS=1",
                 "--gin.SCHEDULE='constant'",
                 *(f"--gin.{b}" for b in data_bindings), *more])


def _error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines()
           if line.startswith("tw-jax train: error:")]
    assert len(err) == 1, err
    return err[0]


def test_new_base_parameters_from_a_hugging_face_folder_are_refused_unless_asked(
        tmp_path, data_bindings, capsys, caplog):
    hf = tmp_path / "hf"
    model_for(TINY).save_hf(str(hf), _params(TINY))
    model_dir = tmp_path / "run"
    capsys.readouterr()
    assert _train(model_dir, hf, data_bindings) == 2
    assert _error_line(capsys) == (
        f"tw-jax train: error: {hf}: lacks 16 parameter(s) of the base model, which would start "
        f"from scratch: {', '.join(NEW)} and 11 more; the checkpoint holds another or a smaller "
        "model than MODEL (a method's new LoRA / K-Adapter / Modular parameters are expected, "
        "these are not). Start from a checkpoint of this model, or initialise them with "
        "--gin.ALLOW_NEW_PARAMETERS=True")
    assert not (model_dir / "config.gin").exists()  # refused before the run's record
    assert not list(model_dir.glob("checkpoints/[0-9]*"))

    with caplog.at_level(logging.WARNING, logger="tw_jax.train.resume_check"):
        assert _train(model_dir, hf, data_bindings, "--gin.ALLOW_NEW_PARAMETERS=True") == 0
    [warning] = [r.getMessage() for r in caplog.records if "ALLOW_NEW_PARAMETERS" in r.getMessage()]
    assert warning.startswith(f"{hf}: ALLOW_NEW_PARAMETERS: 16 parameter(s) of the base model "
                              f"start from scratch: {', '.join(NEW)}, ")
    assert (model_dir / "checkpoints" / "1").is_dir()
    assert "ALLOW_NEW_PARAMETERS = True" in (model_dir / "config.gin").read_text()


def test_new_base_parameters_from_an_orbax_step_are_refused(tmp_path, data_bindings, capsys):
    step = checkpoints.save_params(tmp_path / "small", 5, _params(TINY), {"step": 5})
    assert _train(tmp_path / "run", step, data_bindings) == 2
    assert _error_line(capsys).startswith(
        f"tw-jax train: error: {step}: lacks 16 parameter(s) of the base model, which would "
        f"start from scratch: {', '.join(NEW)} and 11 more; ")


def test_a_methods_new_parameters_are_expected_and_the_base_models_are_not():
    lora = [f"h_{i}/attn/{p}/lora_{m}" for i in range(3) for p in ("query", "value") for m in "ab"]
    kadapter = ["kadapter/adapter_0/attn/key/kernel", "encoder/kadapter/adapter_0/mlp/wi/kernel"]
    modular = ["modular/encoder/block_0/mlp/wi/kernel"]
    check_new_parameters("ckpt", [*lora, *kadapter, *modular], allowed=False)
    check_new_parameters("ckpt", [], allowed=False)
    with pytest.raises(NewParametersError, match=r"^ckpt: lacks 1 parameter\(s\) of the base "
                                                 r"model, which would start from scratch: "
                                                 r"h_2/mlp/c_fc/kernel; "):
        check_new_parameters("ckpt", [*lora, "h_2/mlp/c_fc/kernel"], allowed=False)
    check_new_parameters("ckpt", ["h_2/mlp/c_fc/kernel"], allowed=True)
    # every command prints it as one line (exit 2): a UsageError, and a resume mismatch
    assert issubclass(NewParametersError, UsageError)


def test_the_gin_macro_is_a_field_of_the_run():
    from tw_jax.train.config import TrainConfig

    (field,) = [f for f in dataclasses.fields(TrainConfig) if f.name == "allow_new_parameters"]
    assert field.default is False
