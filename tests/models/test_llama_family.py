"""The Llama-style decoders (``tw_jax/models/llama.py``) against transformers' PyTorch models.

For each of Llama (llama3 RoPE scaling, tied embeddings), Qwen2 (q/k/v biases), Qwen3 (q/k norms,
a head_dim apart from hidden / heads) and Mistral (a sliding window shorter than the inputs), a
tiny random model is built with ``torch.manual_seed``, saved with ``save_pretrained`` in float32
and read with ``tw_jax.models.load_pretrained``: logits agree to 1e-4 on left-padded rows, greedy
KV-cache decoding equals ``generate`` token for token, and an export loads back into
transformers with the same logits. For one family, beam search equals transformers' beams and
scores; sharded and bf16-stored checkpoints load; broken checkpoints fail on one line. LoRA and
DIFF each run a train step on ``gin/models/llama_tiny.gin``. Skipped where torch is absent.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.numpy import load_file, save_file  # noqa: E402

from tw_jax.models import (  # noqa: E402
    LoRAConfig,
    decoding,
    families_by_type,
    load_pretrained,
    model_for,
)
from tw_jax.models.llama import (  # noqa: E402
    LlamaConfig,
    MistralConfig,
    Qwen2Config,
    Qwen3Config,
    config_from_hf,
    rope_inverse_frequencies,
)
from tw_jax.models.llama_io import save_llama  # noqa: E402

VOCAB, PAD = 101, 0
# A wide initialiser keeps a random model's logits apart, so argmax never hinges on rounding.
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              initializer_range=0.2, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2,
              pad_token_id=PAD)
# head_dim 16 with theta 500k and 64 original positions puts RoPE frequencies in all three of
# llama3's bands (kept, interpolated, divided by the factor).
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}
WINDOW = 4
HF_CONFIGS = {
    "llama": lambda: transformers.LlamaConfig(**{**COMMON, "hidden_size": 64}, head_dim=16,
                                              tie_word_embeddings=True, rope_theta=500000.0,
                                              rope_scaling=LLAMA3),
    "qwen2": lambda: transformers.Qwen2Config(**COMMON, tie_word_embeddings=False),
    "qwen3": lambda: transformers.Qwen3Config(**COMMON, head_dim=16, tie_word_embeddings=False),
    "mistral": lambda: transformers.MistralConfig(**COMMON, sliding_window=WINDOW,
                                                  tie_word_embeddings=False),
}
CONFIG_CLASSES = {"llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config,
                  "mistral": MistralConfig}


def _rows(seed: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Three rows of ``length`` tokens; rows 1 and 2 left-padded (7 and 3 pads)."""
    ids = np.random.RandomState(seed).randint(3, VOCAB, (3, length))
    mask = np.ones_like(ids)
    for row, pads in ((1, 7), (2, 3)):
        ids[row, :pads], mask[row, :pads] = PAD, 0
    return ids, mask


@functools.cache
def _reference(family: str, root: str):
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(HF_CONFIGS[family]()).eval()
    folder = f"{root}/{family}"
    hf.save_pretrained(folder)  # float32, one model.safetensors
    model, params = load_pretrained(folder)
    return hf, folder, model, params


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("hf_llama_family"))


@pytest.fixture(scope="module", params=list(HF_CONFIGS))
def reference(request, root):
    """A random tiny transformers model of one family, saved, and the folder read by tw_jax."""
    return (request.param, *_reference(request.param, root))


def _hf_logits(hf, ids: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    with torch.no_grad():
        kwargs = {} if mask is None else {"attention_mask": torch.tensor(mask)}
        return hf(torch.tensor(ids), **kwargs).logits.numpy()


def _logits(model, params, ids, mask=None) -> np.ndarray:
    return np.asarray(_apply(model, params, jnp.asarray(ids),
                             None if mask is None else jnp.asarray(mask)))


@functools.partial(jax.jit, static_argnums=0)
def _apply(model, params, ids, mask):
    return model.apply({"params": params}, ids, attention_mask=mask)


def test_the_folder_loads_as_its_family(reference):
    family, hf, _, model, _ = reference
    assert type(model.config) is CONFIG_CLASSES[family]
    assert type(model_for(model)) is families_by_type()[family]
    assert model.config.model_type == family
    # config.json -> our config -> config.json -> our config is the identity
    assert config_from_hf(model.config.to_hf_config()) == model.config
    np.testing.assert_allclose(rope_inverse_frequencies(model.config),
                               hf.model.rotary_emb.inv_freq.numpy(), rtol=1e-6)


def test_logits_match_transformers_on_left_padded_rows(reference):
    family, hf, _, model, params = reference
    ids, mask = _rows(0, 20)  # longer than Mistral's window of 4
    ours, theirs = _logits(model, params, ids, mask), _hf_logits(hf, ids, mask)
    diff = float(np.max(np.abs(ours - theirs)[mask == 1]))
    print(f"{family}: max |logit difference| {diff:.2e}")
    assert diff <= 1e-4, diff
    if family == "mistral":  # the window matters at this length: without it, other logits
        unbounded = model_for(dataclasses.replace(model.config, sliding_window=None)).module
        assert np.max(np.abs(_logits(unbounded, params, ids, mask) - ours)[mask == 1]) > 1e-2


def test_greedy_kv_cache_decoding_equals_generate(reference):
    family, hf, _, model, params = reference
    ids, mask = _rows(1, 9)
    ours = np.asarray(decoding.greedy_decode(model, params, jnp.asarray(ids), jnp.asarray(mask),
                                             max_new_tokens=16, eos_id=None))
    with torch.no_grad():
        theirs = hf.generate(torch.tensor(ids), attention_mask=torch.tensor(mask),
                             do_sample=False, max_new_tokens=16, min_new_tokens=16,
                             eos_token_id=None, pad_token_id=PAD).numpy()[:, ids.shape[1]:]
    np.testing.assert_array_equal(ours, theirs)
    assert len(set(ours.ravel().tolist())) > 8  # not one token repeated: the test can fail


def test_export_loads_back_into_transformers_with_the_same_logits(reference, tmp_path):
    family, hf, folder, model, params = reference
    save_llama(tmp_path, model.config, params)
    hf_config = json.loads((tmp_path / "config.json").read_text())
    assert hf_config["model_type"] == family
    assert hf_config["architectures"] == [type(hf).__name__]
    theirs = load_file(f"{folder}/model.safetensors")
    ours = load_file(tmp_path / "model.safetensors")
    assert set(ours) == set(theirs)
    for name, array in ours.items():
        np.testing.assert_array_equal(array, theirs[name], err_msg=name)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(reloaded) is type(hf)
    ids, mask = _rows(2, 12)
    np.testing.assert_array_equal(_hf_logits(reloaded, ids, mask), _hf_logits(hf, ids, mask))


def test_beam_search_equals_transformers_beams_and_scores(root):
    hf, _, model, params = _reference("llama", root)
    ids, mask = _rows(3, 10)
    seqs, scores = decoding.beam_search(model, params, jnp.asarray(ids), jnp.asarray(mask),
                                        beam_size=3, max_new_tokens=6, eos_id=None)
    with torch.no_grad():
        out = hf.generate(torch.tensor(ids), attention_mask=torch.tensor(mask), do_sample=False,
                          num_beams=3, num_return_sequences=3, max_new_tokens=6,
                          eos_token_id=None, pad_token_id=PAD, length_penalty=0.0,
                          output_scores=True, return_dict_in_generate=True)
    np.testing.assert_array_equal(np.asarray(seqs), out.sequences[:, 10:].numpy().reshape(3, 3, 6))
    np.testing.assert_allclose(np.asarray(scores), out.sequences_scores.numpy().reshape(3, 3),
                               atol=1e-4)
    # and each score is the teacher-forced log-likelihood of its beam, as transformers scores it
    full = np.concatenate([ids, np.asarray(seqs[:, 0])], axis=1)
    full_mask = np.concatenate([mask, np.ones((3, 6), mask.dtype)], axis=1)
    log_probs = torch.log_softmax(torch.tensor(_hf_logits(hf, full, full_mask)), -1).numpy()
    picked = np.take_along_axis(log_probs[:, 9:-1], full[:, 10:, None], -1)[..., 0]
    np.testing.assert_allclose(picked.sum(-1), np.asarray(scores[:, 0]), atol=1e-4)


def test_sharded_and_bf16_checkpoints_load(root, tmp_path):
    hf, _, model, params = _reference("qwen3", root)
    hf.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").exists()
    _, sharded = load_pretrained(tmp_path / "sharded")
    jax.tree.map(np.testing.assert_array_equal, sharded, params)

    copy.deepcopy(hf).to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    _, loaded = load_pretrained(tmp_path / "bf16")
    rounded = jax.tree.map(
        lambda x: np.asarray(x).astype(ml_dtypes.bfloat16).astype(np.float32), params)
    assert {x.dtype for x in jax.tree.leaves(loaded)} == {jnp.dtype("float32")}
    jax.tree.map(np.testing.assert_array_equal, loaded, rounded)
    _, kept = load_pretrained(tmp_path / "bf16", param_dtype="bfloat16")
    assert {x.dtype for x in jax.tree.leaves(kept)} == {jnp.dtype("bfloat16")}


def test_a_broken_checkpoint_fails_on_one_line_naming_the_tensor(root, tmp_path):
    _, folder, _, _ = _reference("mistral", root)
    tensors = load_file(f"{folder}/model.safetensors")
    name = "model.layers.1.self_attn.k_proj.weight"

    def broken(tensors: dict, label: str):
        out = tmp_path / label
        out.mkdir()
        (out / "config.json").write_text(Path(folder, "config.json").read_text())
        save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
        with pytest.raises(ValueError) as error:
            load_pretrained(out)
        message = str(error.value)
        assert "\n" not in message and str(out / "model.safetensors") in message
        return message

    wrong = broken({**tensors, name: np.zeros((8, 32), np.float32)}, "shape")
    assert f"tensor {name!r} has shape (8, 32), expected (16, 32)" in wrong
    extra = broken({**tensors, "model.layers.1.mlp.extra.weight": np.zeros(3, np.float32)}, "extra")
    assert "model.layers.1.mlp.extra.weight" in extra
    missing = broken({k: v for k, v in tensors.items() if k != name}, "missing")
    assert f"tensor {name!r} (shape (16, 32)) is missing" in missing


def test_a_tied_checkpoint_may_carry_its_head_only_as_a_copy(root, tmp_path):
    _, folder, _, params = _reference("llama", root)  # tied: no lm_head.weight in the file
    tensors = load_file(f"{folder}/model.safetensors")
    assert "lm_head.weight" not in tensors
    embedding = tensors["model.embed_tokens.weight"]
    for label, head in (("copy", embedding), ("other", embedding + 1)):
        (tmp_path / label).mkdir()
        (tmp_path / label / "config.json").write_text(Path(folder, "config.json").read_text())
        save_file({**tensors, "lm_head.weight": head}, tmp_path / label / "model.safetensors")
    jax.tree.map(np.testing.assert_array_equal, load_pretrained(tmp_path / "copy")[1], params)
    with pytest.raises(ValueError, match="lm_head.weight differs from model.embed_tokens"):
        load_pretrained(tmp_path / "other")


def test_a_lora_model_exports_with_lora_folded_in(root, tmp_path):
    """LoRA on grouped key/value and MLP kernels: the export computes what the LoRA model does."""
    _, folder, _, _ = _reference("llama", root)
    lora = LoRAConfig(targets=("query", "key", "value", "out", "gate", "down"))
    model, params = load_pretrained(folder, lora=lora)
    rng = np.random.RandomState(4)
    params = jax.tree_util.tree_map_with_path(
        lambda path, x: (jnp.asarray(rng.normal(0, 0.5, x.shape), x.dtype)
                         if path[-1].key == "lora_b" else x), params)
    save_llama(tmp_path, model.config, params)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    ids, mask = _rows(5, 12)
    ours = _logits(model, params, ids, mask)
    plain = _logits(model_for(dataclasses.replace(model.config, lora=None)).module,
                    load_pretrained(folder)[1], ids, mask)
    assert np.max(np.abs(ours - plain)[mask == 1]) > 1e-2  # LoRA changed the model
    assert np.max(np.abs(_hf_logits(reloaded, ids, mask) - ours)[mask == 1]) <= 1e-4


def test_a_bucket_folder_exports_and_loads_back_exactly(root, gcs_bucket):
    from tw_jax.io import paths
    from tw_jax.models.llama_io import load_llama

    _, _, model, params = _reference("qwen2", root)
    url = f"{gcs_bucket}/hf/qwen2"
    save_llama(url, model.config, params, max_shard_bytes=20_000)
    assert paths.isfile(f"{url}/model.safetensors.index.json")
    config, loaded = load_llama(url)
    assert config == model.config
    jax.tree.map(np.testing.assert_array_equal, loaded, params)


def test_older_and_hub_config_json_forms_are_read():
    """transformers 4's ``rope_theta`` + ``rope_scaling`` (``type``), no ``head_dim``, a list of
    EOS ids (Llama 3.1 Instruct); Qwen2.5's unused ``sliding_window`` (``use_sliding_window``
    false); options the module does not model are refused."""
    llama = config_from_hf({
        "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "rope_theta": 500000.0, "max_position_embeddings": 131072,
        "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})
    assert (llama.head_dim, llama.rope_theta, llama.rope_scaling.factor) == (128, 500000.0, 8.0)
    assert (llama.eos_token_id, llama.extra_eos_token_ids) == (128001, (128008, 128009))
    assert config_from_hf(llama.to_hf_config()) == llama
    qwen = config_from_hf({
        "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
        "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
        "num_key_value_heads": 2, "rope_theta": 1000000.0, "sliding_window": 131072,
        "use_sliding_window": False, "max_window_layers": 21, "tie_word_embeddings": True,
        "bos_token_id": 151643, "eos_token_id": 151643})
    assert (qwen.sliding_window, qwen.attention_bias, qwen.head_dim) == (None, True, 64)
    for key, value in (("hidden_act", "gelu"), ("use_sliding_window", True),
                       ("rope_scaling", {"rope_type": "yarn", "factor": 4.0})):
        with pytest.raises(ValueError, match=key if key != "rope_scaling" else "yarn"):
            config_from_hf({**qwen.to_hf_config(), key: value})
    with pytest.raises(ValueError, match="qk_norm"):
        Qwen3Config(qk_norm=False)


# --- training steps on gin/models/llama_tiny.gin ------------------------------------------


def _gin_config(*bindings: str) -> LlamaConfig:
    """The config ``models/llama_tiny.gin`` (and ``bindings``) builds, as a plain LlamaConfig."""
    import gin

    from tw_jax.runtime import gin_setup

    gin_setup.parse(["models/llama_tiny.gin"], bindings, input_pipeline=False)
    try:
        built = gin_setup.model_config()
    finally:
        gin.clear_config()
    return LlamaConfig(**{f.name: getattr(built, f.name) for f in dataclasses.fields(built)})


@pytest.fixture(scope="module")
def tiny_config() -> LlamaConfig:
    config = _gin_config()
    assert (config.num_hidden_layers, config.hidden_size, config.num_key_value_heads) == (2, 64, 2)
    assert config.tie_word_embeddings and config.rope_scaling is None
    return config


def test_gin_sets_llama3_rope_scaling():
    config = _gin_config("tw_jax.models.LlamaConfig.rope_scaling=@tw_jax.models.RopeScaling()",
                         "tw_jax.models.RopeScaling.factor=32.0")
    assert (config.rope_scaling.rope_type, config.rope_scaling.factor) == ("llama3", 32.0)


@pytest.mark.parametrize("method", ["lora", "diff"])
def test_a_train_step_runs_on_the_tiny_config(tiny_config, method):
    from tw_jax.models.sharding import activate
    from tw_jax.runtime.run_model import build_run_model
    from tw_jax.train.optimizers import AdamWConfig
    from tw_jax.train.schedules import make_schedule
    from tw_jax.train.trainer import build_train_step

    config = (dataclasses.replace(tiny_config, lora=LoRAConfig(), freeze="base")
              if method == "lora" else tiny_config)
    run = build_run_model(config, (1, 1, 1), devices=jax.devices()[:1])
    step = build_train_step(run, config, optimizer=AdamWConfig(),
                            schedule_fn=functools.partial(make_schedule, "constant", 1e-2),
                            train_steps=1, accumulate_steps=1, seed=0)
    tokens = np.random.RandomState(0).randint(0, config.vocab_size, (2, 16)).astype(np.int32)
    batch = {"decoder_target_tokens": tokens, "decoder_input_tokens": np.roll(tokens, 1, axis=1),
             "decoder_loss_weights": np.ones((2, 16), np.float32),
             "decoder_mask": np.ones((2, 16), np.float32)}
    with activate(run.mesh):
        params = run.init_params(0)
        before = jax.tree.map(np.array, params)
        opt_state = jax.jit(step.tx.init)(params)
        params, _, out = step(params, opt_state, 0, batch)
    assert np.isfinite(float(out["loss"]))
    changed = {"/".join(str(k.key) for k in path): not np.array_equal(np.asarray(a), b)
               for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(params)[0],
                                       jax.tree.leaves(before), strict=True)}
    lora = {name for name in changed if "lora_" in name}
    if method == "lora":  # only LoRA's B moves in the first step (the update is A·B, B = 0)
        assert lora and all(changed[n] for n in lora if n.endswith("lora_b"))
        assert not any(changed[n] for n in changed if n not in lora)
    else:
        assert not lora and all(changed.values())


def test_flops_count_grouped_kv_and_the_gated_mlp(tiny_config):
    from tw_jax.train.flops import train_step_flops

    c = tiny_config
    e, h, k, d, f = (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                     c.intermediate_size)
    per_layer = e * h * d + 2 * e * k * d + h * d * e + 3 * e * f  # q, k and v, o, gate/up/down
    kernels = c.num_hidden_layers * per_layer + c.vocab_size * e  # the tied embedding as head
    flops = train_step_flops(c, 4, {"targets": 32})
    assert flops.matmul_forward == 2 * kernels * 4 * 32
    assert flops.attention_forward == c.num_hidden_layers * 4 * 4 * 32 * 32 * h * d
