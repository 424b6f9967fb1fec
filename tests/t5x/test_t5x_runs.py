"""The real ``python -m t5x.train``, ``t5x.main --run_mode=eval`` and ``t5x.infer`` on tw_jax's
tasks, models and gin files, from the repository root as docs/t5x.md runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("t5x")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from train_helpers import subprocess_env  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def t5x(script: str, *flags: str, env: dict, run_mode: str | None = None) -> str:
    command = [sys.executable, "-m", f"t5x.{script}", "--gin_search_paths=gin", *flags]
    if run_mode:
        command.append(f"--run_mode={run_mode}")
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stderr


def quoted(value) -> str:
    return f"'{value}'"


def flat_params(checkpoint: Path) -> dict[str, np.ndarray]:
    from flax import traverse_util

    from tw_jax.t5x.checkpoints import read_t5x_params

    return traverse_util.flatten_dict(read_t5x_params(checkpoint), sep="/")


def moved(before: dict, after: dict) -> set[str]:
    return {name for name in before if not np.array_equal(before[name], after[name])}


@pytest.fixture()
def env(train_data, compile_cache):
    environment = subprocess_env(train_data, compile_cache)
    environment["TPU_SKIP_MDS_QUERY"] = "1"
    return environment


def register(train_data) -> None:
    import tw_jax.tasks

    tw_jax.tasks.register_all(train_data["data_dir"], t5_vocab=str(train_data["t5"]),
                              gpt2_vocab=str(train_data["gpt2"]))


def test_t5x_trains_kadapter_t5_with_its_encoder_frozen_and_decodes_probes(tmp_path, env,
                                                                           train_data):
    run = tmp_path / "kadapter"
    t5x("train", "--gin_file=t5x/kadapter.gin", "--gin_file=models/t5_tiny.gin",
        f"--gin.MODEL_DIR={quoted(run)}", "--gin.MIXTURE_OR_TASK_NAME='twiki_diffset_0809_ssm'",
        "--gin.TRAIN_STEPS=4", env=env)
    before, after = flat_params(run / "checkpoint_0"), flat_params(run / "checkpoint_4")
    changed = moved(before, after)
    encoder = {n for n in before if n.startswith("encoder/") and "/kadapter/" not in n}
    adapter = {n for n in before if "/kadapter/" in n}
    assert encoder and adapter
    assert not changed & encoder  # the frozen encoder's tensors are bit-identical
    assert adapter <= changed  # every adapter tensor moved
    assert any(n.startswith("decoder/") for n in changed)  # T5's decoder trains (CKL)

    out = tmp_path / "infer"
    t5x("infer", "--gin_file=t5x/infer.gin", "--gin_file=methods/kadapter.gin",
        "--gin_file=models/t5_tiny.gin", f"--gin.CHECKPOINT_PATH={quoted(run / 'checkpoint_4')}",
        f"--gin.INFER_OUTPUT_DIR={quoted(out)}",
        "--gin.MIXTURE_OR_TASK_NAME='twiki_probes_0809_updated_ssm'", env=env)
    [predictions] = out.glob("twiki_probes_0809_updated_ssm-predict.jsonl-00000-of-00001")
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    import seqio

    register(train_data)
    task = seqio.get_mixture_or_task("twiki_probes_0809_updated_ssm")
    expected = [ex["inputs_pretokenized"].decode() for ex in task.get_dataset(
        None, split="validation", shuffle=False).as_numpy_iterator()]
    assert [row["inputs"]["inputs_pretokenized"] for row in rows] == expected
    assert all(isinstance(row["prediction"], str) for row in rows)


def test_t5x_trains_lora_gpt2_and_its_eval_gives_tw_jax_probe_metrics(tmp_path, env,
                                                                       train_data):
    run = tmp_path / "lora"
    t5x("train", "--gin_file=t5x/lora.gin", "--gin_file=models/gpt2_tiny.gin",
        f"--gin.MODEL_DIR={quoted(run)}", "--gin.TRAIN_STEPS=4", env=env)
    before, after = flat_params(run / "checkpoint_0"), flat_params(run / "checkpoint_4")
    lora = {n for n in before if n.endswith(("lora_a", "lora_b"))}
    assert lora and moved(before, after) == lora  # LoRA alone trains; the base is frozen

    out = tmp_path / "eval"
    t5x("main", "--gin_file=t5x/eval.gin", "--gin_file=methods/lora.gin",
        "--gin_file=models/gpt2_tiny.gin", f"--gin.CHECKPOINT_PATH={quoted(run / 'checkpoint_4')}",
        f"--gin.EVAL_OUTPUT_DIR={quoted(out)}", "--gin.MIXTURE_OR_TASK_NAME='twiki_probes_0809'",
        env=env, run_mode="eval")
    t5x_metrics = {}
    for path in (out / "inference_eval").glob("*-metrics.jsonl"):
        [row] = [json.loads(line) for line in path.read_text().splitlines()]
        t5x_metrics[path.name.removesuffix("-metrics.jsonl")] = row
    assert sorted(t5x_metrics) == ["twiki_probes_0809_changed", "twiki_probes_0809_new",
                                   "twiki_probes_0809_unchanged", "twiki_probes_0809_updated"]

    # tw_jax's own evaluation (tw-jax eval's path) of the same parameters gives the same figures.
    import seqio

    from tw_jax.evaluate.seqio_eval import SeqioModel
    from tw_jax.models import model_for
    from tw_jax.t5x.checkpoints import read_t5x_params
    from tw_jax.train import gin_setup

    register(train_data)
    gin_setup.parse(["lora.gin", "models/gpt2_tiny.gin"], [])
    config = gin_setup.model_config()
    params = read_t5x_params(run / "checkpoint_4")
    fns = SeqioModel(model_for(config), params)
    evaluator = seqio.Evaluator("twiki_probes_0809", fns.feature_converter,
                                eval_split="validation", async_compute_metrics=False,
                                sequence_length={"targets": 64})
    metrics, _ = evaluator.evaluate(compute_metrics=True, score_fn=fns.score_fn,
                                    predict_fn=fns.predict_fn)
    for task, ours in metrics.result().items():
        assert t5x_metrics[task]["examples"] == ours["examples"]
        np.testing.assert_allclose(t5x_metrics[task]["perplexity"], ours["perplexity"],
                                   rtol=1e-4, err_msg=task)  # float32 sums of ~1e4 perplexities
