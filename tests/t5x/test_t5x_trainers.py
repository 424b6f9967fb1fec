"""One model, two trainers: the real ``python -m t5x.train`` and ``tw-jax train`` from the same
converted checkpoint give the same losses, step by step (tools/t5x_parity.py); T5X's eval of a
probe mixture gives tw_jax's probe figures, T5X's infer decodes the probes (through t5x.main),
T5X's pretrain.gin run file trains a method from scratch, and a checkpoint without a method's
adapters starts a T5X run with them from scratch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("t5x")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "train"))
sys.path.insert(0, str(ROOT / "tools"))
import t5x_parity  # noqa: E402
from train_helpers import subprocess_env  # noqa: E402

from tw_jax.runtime.checkpoints import read_params  # noqa: E402


@pytest.fixture()
def env(train_data, compile_cache):
    environment = subprocess_env(train_data, compile_cache)
    environment["TPU_SKIP_MDS_QUERY"] = "1"
    return environment


@pytest.fixture()
def registered(train_data):
    import tw_jax.tasks

    tw_jax.tasks.register_all(train_data["data_dir"], t5_vocab=str(train_data["t5"]),
                              gpt2_vocab=str(train_data["gpt2"]))


def t5x(script: str, *flags: str, env: dict, run_mode: str | None = None) -> None:
    command = [sys.executable, "-m", f"t5x.{script}", "--gin_search_paths=gin", *flags]
    if run_mode:
        command.append(f"--run_mode={run_mode}")
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]


def flat(tree) -> dict[str, np.ndarray]:
    from flax import traverse_util

    return traverse_util.flatten_dict(tree, sep="/")


def t5x_params(checkpoint: Path) -> dict[str, np.ndarray]:
    from tw_jax.t5x.checkpoints import read_t5x_params

    return flat(read_t5x_params(checkpoint))


def assert_same_losses(result: dict, steps: int, *, decreasing: bool = True) -> None:
    assert len(result["tw_jax"]) == len(result["t5x"]) == steps
    assert result["first_step_rel"] <= 1e-5, result
    assert result["max_rel"] <= 1e-3, result
    if decreasing:
        assert result["tw_jax"][-1] < result["tw_jax"][0]  # they train, not just agree


def test_kadapter_t5_trains_alike_under_t5x_and_t5x_decodes_the_probes(tmp_path, env,
                                                                       registered):
    result = t5x_parity.parity("t5-kadapter", tmp_path, steps=8, env=env)
    assert_same_losses(result, 8)
    before = t5x_params(tmp_path / "t5x" / "checkpoint_0")  # what T5X restored
    after = t5x_params(tmp_path / "t5x" / "checkpoint_8")
    start = flat(read_params(tmp_path / "start"))
    assert sorted(before) == sorted(start)
    assert all(np.array_equal(start[n], before[n]) for n in start)  # restored bit for bit
    moved = {n for n in before if not np.array_equal(before[n], after[n])}
    encoder = {n for n in before if n.startswith("encoder/") and "/kadapter/" not in n}
    adapter = {n for n in before if "/kadapter/" in n}
    assert encoder and adapter and not moved & encoder and adapter <= moved

    out = tmp_path / "infer"  # T5X's inference, through t5x.main
    t5x("main", "--gin_file=t5x/infer.gin", "--gin_file=methods/kadapter.gin",
        "--gin_file=models/t5_tiny.gin",
        f"--gin.CHECKPOINT_PATH='{tmp_path / 't5x' / 'checkpoint_8'}'",
        f"--gin.INFER_OUTPUT_DIR='{out}'",
        "--gin.MIXTURE_OR_TASK_NAME='twiki_probes_0809_updated_ssm'", env=env,
        run_mode="infer")
    [predictions] = out.glob("twiki_probes_0809_updated_ssm-predict.jsonl-00000-of-00001")
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    import seqio

    task = seqio.get_mixture_or_task("twiki_probes_0809_updated_ssm")
    expected = [ex["inputs_pretokenized"].decode() for ex in task.get_dataset(
        None, split="validation", shuffle=False).as_numpy_iterator()]
    assert [row["inputs"]["inputs_pretokenized"] for row in rows] == expected
    assert all(isinstance(row["prediction"], str) for row in rows)


def test_lora_gpt2_trains_alike_and_t5x_eval_gives_tw_jax_probe_figures(tmp_path, env,
                                                                        registered):
    result = t5x_parity.parity("gpt2-lora", tmp_path, steps=8, env=env)
    assert_same_losses(result, 8)
    before = t5x_params(tmp_path / "t5x" / "checkpoint_0")
    after = t5x_params(tmp_path / "t5x" / "checkpoint_8")
    lora = {n for n in before if n.endswith(("lora_a", "lora_b"))}
    assert lora and {n for n in before if not np.array_equal(before[n], after[n])} == lora

    # T5X's evaluation (t5x.main --run_mode=eval) of the T5X checkpoint on a probe mixture,
    # with the run file tw-jax eval reads below: T5X pads every probe to TARGETS_LENGTH, and
    # at gpt2_tiny.gin's 64 instead of cpu_smoke.gin's 32 its 50,257-wide logits took 67 s ...
    out = tmp_path / "eval"
    t5x("main", "--gin_file=t5x/eval.gin", "--gin_file=methods/lora.gin",
        "--gin_file=models/gpt2_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
        f"--gin.CHECKPOINT_PATH='{tmp_path / 't5x' / 'checkpoint_8'}'",
        f"--gin.EVAL_OUTPUT_DIR='{out}'", "--gin.MIXTURE_OR_TASK_NAME='twiki_probes_0809'",
        env=env, run_mode="eval")
    theirs = {}
    for path in (out / "inference_eval").glob("*-metrics.jsonl"):
        [row] = [json.loads(line) for line in path.read_text().splitlines()]
        theirs[path.name.removesuffix("-metrics.jsonl")] = row
    assert sorted(theirs) == ["twiki_probes_0809_changed", "twiki_probes_0809_new",
                              "twiki_probes_0809_unchanged", "twiki_probes_0809_updated"]

    # ... and tw-jax eval of the same checkpoint, converted back (in this process: a conversion
    # needs no subprocess's start-up), give the same figures.
    from tw_jax.cli import main

    assert main(["t5x-checkpoint", "from-t5x", "--from", str(tmp_path / "t5x" / "checkpoint_8"),
                 "--out", str(tmp_path / "back")]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "tw_jax.cli", "eval", "--gin_file=lora.gin",
         "--gin_file=models/gpt2_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
         f"--gin.MODEL_DIR='{tmp_path / 'back'}'",
         "--gin.MIXTURE_OR_TASK_NAME='twiki_probes_0809'"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ours = {}
    for path in (tmp_path / "back" / "inference_eval").glob("*-metrics.jsonl"):
        [row] = [json.loads(line) for line in path.read_text().splitlines()]
        ours[path.name.removesuffix("-metrics.jsonl")] = row
    assert sorted(ours) == sorted(theirs)
    for task, row in theirs.items():
        assert row["examples"] == ours[task]["examples"]
        np.testing.assert_allclose(row["perplexity"], ours[task]["perplexity"], rtol=1e-4,
                                   err_msg=task)  # float32 sums of ~1e4 perplexities


def test_lora_llama_trains_alike_under_t5x(tmp_path, env, registered):
    """The open-LLM families run behind T5X's DecoderOnlyModel: a tiny Llama (grouped-query
    attention, RoPE, RMSNorm) trains 4 LoRA steps under ``python -m t5x.train`` with
    t5x/lora.gin and models/llama_tiny.gin, with tw-jax train's losses, LoRA alone changing."""
    result = t5x_parity.parity("llama-lora", tmp_path, steps=4, env=env)
    # 4 batches of a random 50,257-way model: the loss need not fall yet; LoRA's change does
    assert_same_losses(result, 4, decreasing=False)
    before = t5x_params(tmp_path / "t5x" / "checkpoint_0")
    after = t5x_params(tmp_path / "t5x" / "checkpoint_4")
    lora = {n for n in before if n.endswith(("lora_a", "lora_b"))}
    assert lora and {n for n in before if not np.array_equal(before[n], after[n])} == lora


def test_a_checkpoint_without_adapters_starts_a_t5x_kadapter_run_with_them_from_scratch(
        tmp_path, env):
    """A plain T5 (a Hugging Face folder) → T5X checkpoint → T5X K-Adapter run: the base is
    restored bit for bit, the adapters T5X initialises are new and train."""
    import dataclasses

    import flax.linen as nn
    import jax

    from tw_jax.models import model_for
    from tw_jax.t5x.checkpoints import to_t5x

    config = t5x_parity.model_config("t5-kadapter")
    plain = model_for(dataclasses.replace(config, kadapter=None, freeze=None))
    params = jax.device_get(nn.unbox(plain.module.init(
        jax.random.key(3), *plain.dummy_inputs(2, 8))["params"]))
    plain.save_hf(str(tmp_path / "hf"), params)
    start = to_t5x(tmp_path / "hf", tmp_path / "start")
    t5x("main", "--gin_file=t5x/kadapter.gin", "--gin_file=models/t5_tiny.gin",
        "--gin_file=runs/cpu_smoke.gin", f"--gin.MODEL_DIR='{tmp_path / 'run'}'",
        "--gin.MIXTURE_OR_TASK_NAME='twiki_diffset_0809_ssm'", "--gin.TRAIN_STEPS=2",
        "--gin.SCHEDULE='constant'", f"--gin.INITIAL_CHECKPOINT_PATH='{start}'", env=env,
        run_mode="train")
    restored = t5x_params(tmp_path / "run" / "checkpoint_0")
    trained = t5x_params(tmp_path / "run" / "checkpoint_2")
    base = flat(params)
    adapters = {n for n in restored if "/kadapter/" in n}
    assert adapters and set(restored) == set(base) | adapters
    assert all(np.array_equal(base[n], restored[n]) for n in base)
    assert all(np.array_equal(base[n], trained[n]) for n in base if n.startswith("encoder/"))
    assert all(not np.array_equal(restored[n], trained[n]) for n in adapters)


def test_modular_t5_trains_from_scratch_with_t5xs_pretrain_run_file_under_t5x_main(tmp_path,
                                                                                  env):
    """T5X's other run file (pretrain.gin: no starting checkpoint) through t5x.main
    --run_mode=train, with a method file (Modular: T5's encoder frozen, the new encoder and the
    decoder train)."""
    from tw_jax.models.variants import is_new_parameter

    t5x("main", "--gin_file=t5x/pretrain.gin", "--gin_file=methods/modular.gin",
        "--gin_file=models/t5_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
        f"--gin.MODEL_DIR='{tmp_path / 'run'}'",
        "--gin.MIXTURE_OR_TASK_NAME='twiki_diffset_0809_ssm'", "--gin.TRAIN_STEPS=2",
        "--gin.SCHEDULE='constant'", env=env, run_mode="train")
    start = t5x_params(tmp_path / "run" / "checkpoint_0")
    trained = t5x_params(tmp_path / "run" / "checkpoint_2")
    new = {n for n in start if is_new_parameter(n.split("/"))}
    frozen = {n for n in start if n.startswith("encoder/") and n not in new}
    assert new and frozen
    moved = {n for n in start if not np.array_equal(start[n], trained[n])}
    assert new <= moved and not moved & frozen


def test_recadam_under_t5x_pulls_towards_the_restored_weights(tmp_path, env):
    """tw-jax train's RecAdam through T5X's OptaxWrapper: its anchor is the checkpoint T5X
    restored (the parameters of the first update, not T5X's fresh initialisation), bit for bit,
    and every parameter trains."""
    import flax.linen as nn
    import jax

    from tw_jax.models import model_for
    from tw_jax.runtime import gin_setup
    from tw_jax.runtime.checkpoints import save_params
    from tw_jax.t5x.checkpoints import to_t5x

    gin_setup.parse(["initial.gin", "models/gpt2_tiny.gin"])
    plain = model_for(gin_setup.model_config())
    params = jax.device_get(nn.unbox(plain.module.init(
        jax.random.key(5), *plain.dummy_inputs(2, 8))["params"]))
    save_params(tmp_path / "tw", 0, params, {"step": 0})
    start = to_t5x(tmp_path / "tw", tmp_path / "start")
    t5x("train", "--gin_file=t5x/recadam.gin", "--gin_file=models/gpt2_tiny.gin",
        "--gin_file=runs/cpu_smoke.gin", f"--gin.MODEL_DIR='{tmp_path / 'run'}'",
        "--gin.TRAIN_STEPS=2", "--gin.SCHEDULE='constant'",
        f"--gin.INITIAL_CHECKPOINT_PATH='{start}'", env=env)
    from tw_jax.t5x.checkpoints import read_t5x_state

    state = flat(read_t5x_state(tmp_path / "run" / "checkpoint_2"))
    given = flat(params)
    anchors = {n.split("/anchor/", 1)[1]: v for n, v in state.items() if "/anchor/" in n}
    assert sorted(anchors) == sorted(given)
    assert all(np.array_equal(anchors[n], given[n]) for n in given)
    trained = {n.removeprefix("target/"): v for n, v in state.items() if n.startswith("target/")}
    assert all(not np.array_equal(trained[n], given[n]) for n in given if n.endswith("kernel"))


def test_replay_trains_under_t5x_on_every_earlier_month(tmp_path, env, registered):
    """TiC-LM's replay is a seqio mixture like Mix-Review's, so the real T5X trains it with the
    method's own T5X file: the 0910 update draws from 0910's DiffSet, 0809's and the 08
    snapshot."""
    import seqio

    mixture = seqio.get_mixture_or_task("twiki_replay_0910_lm")
    assert sorted(t.name for t in mixture.tasks) == sorted(
        ["twiki_diffset_0910_lm", "twiki_diffset_0809_lm", "twiki_full_08_lm"])
    t5x("train", "--gin_file=t5x/replay.gin", "--gin_file=models/gpt2_tiny.gin",
        "--gin_file=runs/cpu_smoke.gin", f"--gin.MODEL_DIR='{tmp_path / 'run'}'",
        "--gin.TRAIN_STEPS=2", "--gin.SCHEDULE='constant'",
        "--gin.MIXTURE_OR_TASK_NAME='twiki_replay_0910_lm'", env=env)
    assert (tmp_path / "run" / "checkpoint_2").is_dir()
