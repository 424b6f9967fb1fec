"""Bring your own open LLM: a Hugging Face Llama folder (weights + its own tokenizer) trains with
a method file and no model gin file, on the tasks of its tokenizer, and the run carries the
tokenizer so evaluation from MODEL_DIR alone reads the same one.

``tw-jax train --gin_file=lora.gin --gin.INITIAL_CHECKPOINT_PATH=FOLDER``: lora.gin names
T5-large, but the folder's ``config.json`` decides the model (a Llama), the run's settings
(LoRA, freeze, float32 from runs/cpu_smoke.gin) apply to it, ``{objective}`` is
``lm_<folder name>``, and the base weights are the folder's, bit for bit."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from train_helpers import read_metrics  # noqa: E402

from tw_jax.data.hf_tokenizer import ModelTokenizerVocabulary  # noqa: E402
from tw_jax.data.tokenizer_styles import write_tokenizer  # noqa: E402
from tw_jax.models import LlamaConfig  # noqa: E402
from tw_jax.runtime import gin_setup  # noqa: E402
from tw_jax.train import trainer  # noqa: E402
from tw_jax.train.gin_config import train_config  # noqa: E402

NAME = "tiny_llama_3"  # the folder Tiny-Llama-3's tokenizer, as task names spell it


@pytest.fixture(scope="module")
def llama_folder(train_data, tmp_path_factory) -> Path:
    from twiki_data import read_jsonl

    folder = tmp_path_factory.mktemp("open_llm") / "Tiny-Llama-3"
    texts = [r["text"] for r in read_jsonl(train_data["data_dir"] / "0910" / "diffset"
                                            / "full.jsonl")]
    write_tokenizer(folder, "llama3", texts, vocab_size=400)
    vocabulary = ModelTokenizerVocabulary(folder)
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=128,
        bos_token_id=vocabulary.bos_id, eos_token_id=vocabulary.eos_id,
        tie_word_embeddings=True))
    hf.save_pretrained(folder)
    return folder


def _train(model_dir: Path, bindings: list[str], folder: Path, steps: int = 3):
    gin_setup.parse(
        ["lora.gin", "runs/cpu_smoke.gin"],
        [*bindings, f"MODEL_DIR='{model_dir}'", f"TRAIN_STEPS={steps}",
         f"INITIAL_CHECKPOINT_PATH='{folder}'",
         "MIXTURE_OR_TASK_NAME='twiki_diffset_0910_{objective}'",
         "TASK_FEATURE_LENGTHS={'targets': 32}", "BATCH_SIZE=2",
         "OPTIMIZER=@tw_jax.train.AdamWConfig()", "SCHEDULE='constant'", "LEARNING_RATE=1e-3"],
        required_macros=gin_setup.MACROS_TRAIN,
    )
    config = train_config()
    return config, trainer.train(config)


def test_a_llama_folder_trains_lora_on_its_own_tokenizers_tasks(
        llama_folder, data_bindings, tmp_path):
    from safetensors.numpy import load_file

    model_dir = tmp_path / "run"
    config, run = _train(model_dir, data_bindings, llama_folder)
    model = config.model_config
    assert isinstance(model, LlamaConfig) and model.tokenizer == NAME
    assert (model.lora is not None, model.freeze, model.dtype) == (True, "base", "float32")
    assert (model.hidden_size, model.num_key_value_heads, model.vocab_size) == (32, 2, 512)
    losses = [m["loss"] for m in read_metrics(model_dir)]
    assert len(losses) == 3 and all(np.isfinite(losses))
    assert run.fresh_parameters and all("lora_" in p for p in run.fresh_parameters)
    hf = load_file(str(llama_folder / "model.safetensors"))
    trained = jax.device_get(run.params)
    query = np.asarray(trained["layer_0"]["attn"]["query"]["kernel"])  # frozen: the folder's
    np.testing.assert_array_equal(query.reshape(32, -1).T,
                                  hf["model.layers.0.self_attn.q_proj.weight"])
    # the tokenizer travels with the run
    kept = model_dir / "tokenizer" / "tokenizer.json"
    assert kept.read_bytes() == (llama_folder / "tokenizer.json").read_bytes()
    recorded = (model_dir / "config.gin").read_text()
    assert "twiki_diffset_0910_{objective}" in recorded or "lm_tiny_llama_3" in recorded


def test_evaluation_from_the_run_alone_reads_its_tokenizer(llama_folder, data_bindings,
                                                           tmp_path):
    import tw_jax.tasks
    from tw_jax import tasks as package
    from tw_jax.evaluate.task_eval import evaluate

    model_dir = tmp_path / "run"
    config, _ = _train(model_dir, data_bindings, llama_folder, steps=2)
    package._named_tokenizers.clear()  # a fresh process: only MODEL_DIR knows the tokenizer
    tw_jax.tasks.register_all()
    summary = evaluate(model_config=config.model_config,
                       mixture_or_task_name="twiki_probes_0910_{objective}",
                       task_feature_lengths={"targets": 32}, batch_size=4,
                       model_dir=str(model_dir), max_examples=4)
    tasks = summary["tasks"]
    assert set(tasks) >= {f"twiki_probes_0910_updated_lm_{NAME}",
                          f"twiki_probes_0910_new_lm_{NAME}"}
    assert all(np.isfinite(v["perplexity"]) for v in tasks.values())
    assert package._named_tokenizers[NAME] == str(model_dir / "tokenizer")


def test_a_lifelong_run_from_the_folder_scores_every_update_in_its_tokens(
        llama_folder, train_data, tmp_path):
    from tw_jax.lifelong.options import LifelongOptions
    from tw_jax.lifelong.runner import run_lifelong

    out = tmp_path / "lifelong"
    summary = run_lifelong(LifelongOptions(
        gin_files=["lora.gin", "runs/cpu_smoke.gin"],
        gin_bindings=["TRAIN_STEPS=2", "BATCH_SIZE=2", "SCHEDULE='constant'",
                      "TASK_FEATURE_LENGTHS={'targets': 32}",
                      "OPTIMIZER=@tw_jax.train.AdamWConfig()", "LEARNING_RATE=1e-3",
                      "tw_jax.train.train.progress=False"],
        months=["0809"], out_dir=str(out), data_dir=str(train_data["data_dir"]),
        initial_checkpoint=str(llama_folder), max_probes=4, eval_batch_size=8))
    assert [str(period.name) for period in summary.trained] == ["0809"]
    import json

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ppl = {(r["method"], r["category"]): r["value"] for r in rows if r["metric"] == "ppl"}
    assert {("initial", "updated"), ("lora", "updated"), ("lora", "changed")} <= set(ppl)
    assert all(np.isfinite(v) for v in ppl.values())
    update = next((out / "checkpoints" / "lora").glob("*"))
    assert (update / "tokenizer" / "tokenizer.json").is_file()


def test_tw_jax_eval_scores_the_folder_as_it_is_with_no_model_file(llama_folder, data_bindings,
                                                                   tmp_path):
    """``tw-jax eval --gin_file=initial.gin`` (T5-large's file) with the folder as the
    checkpoint: the folder's Llama, on its tokenizer's probe tasks."""
    from tw_jax.cli import main

    out = tmp_path / "eval"
    assert main(["eval", "--gin_file=initial.gin", "--gin_file=runs/cpu_smoke.gin",
                 *(f"--gin.{b}" for b in data_bindings),
                 f"--gin.MODEL_DIR='{out}'",
                 f"--gin.tw_jax.evaluate.evaluate.checkpoint_path='{llama_folder}'",
                 "--gin.MIXTURE_OR_TASK_NAME='twiki_probes_0910_updated_{objective}'",
                 "--gin.TASK_FEATURE_LENGTHS={'targets': 32}", "--gin.BATCH_SIZE=4",
                 "--gin.tw_jax.evaluate.evaluate.max_examples=4"]) == 0
    [summary] = list((out / "inference_eval").glob(f"twiki_probes_0910_updated_lm_{NAME}*.json"))
    assert summary.is_file()
