"""The Llama-style decoders (``tw_jax/models/llama.py``) against transformers' PyTorch models.

For each of Llama (llama3 RoPE scaling, tied embeddings), Qwen2 (q/k/v biases), Qwen3 (q/k norms,
a head_dim apart from hidden / heads) and Mistral (a sliding window shorter than the inputs), a
tiny random model is built with ``torch.manual_seed``, saved with ``save_pretrained`` in float32
and read with ``tw_jax.models.load_pretrained``: logits agree to 1e-4 on left-padded rows, greedy
KV-cache decoding equals ``generate`` token for token, and an export loads back into
transformers with the same logits. For one family, beam search equals transformers' beams and
scores; sharded and bf16-stored checkpoints load; broken checkpoints fail on one line. LoRA and
DIFF each run a train step on ``gin/models/llama_tiny.gin``. Skipped where torch is absent. The
checks shared with Gemma's tests are ``decoder_parity.py``'s.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from decoder_parity import (  # noqa: E402
    PAD,
    VOCAB,
    check_beam_search,
    check_broken_checkpoints,
    check_export,
    check_flops,
    check_fused_attention,
    check_greedy_equals_generate,
    check_logits_match,
    check_sharded_and_bf16,
    check_train_step,
    gin_config,
    hf_logits,
    logits,
    max_diff,
    rows,
)
from safetensors.numpy import load_file, save_file  # noqa: E402

from tw_jax.models import (  # noqa: E402
    LoRAConfig,
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
    # 20 tokens: longer than Mistral's window of 4
    ids, mask, ours = check_logits_match(family, hf, model, params)
    if family == "mistral":  # the window matters at this length: without it, other logits
        unbounded = model_for(dataclasses.replace(model.config, sliding_window=None)).module
        assert max_diff(logits(unbounded, params, ids, mask), ours, mask) > 1e-2


def test_greedy_kv_cache_decoding_equals_generate(reference):
    _, hf, _, model, params = reference
    check_greedy_equals_generate(hf, model, params)


def test_fused_attention_gives_the_same_logits_and_tokens(reference):
    family, hf, _, model, params = reference
    check_fused_attention(family, hf, model, params)  # Mistral: past its sliding window


def test_export_loads_back_into_transformers_with_the_same_logits(reference, tmp_path):
    family, hf, folder, model, params = reference
    hf_config, _ = check_export(save_llama, hf, folder, model, params, tmp_path)
    assert hf_config["model_type"] == family
    assert hf_config["architectures"] == [type(hf).__name__]


def test_beam_search_equals_transformers_beams_and_scores(root):
    hf, _, model, params = _reference("llama", root)
    check_beam_search(hf, model, params)


def test_sharded_and_bf16_checkpoints_load(root, tmp_path):
    hf, _, _, params = _reference("qwen3", root)
    check_sharded_and_bf16(hf, params, tmp_path, max_shard_size="20KB")


def test_a_broken_checkpoint_fails_on_one_line_naming_the_tensor(root, tmp_path):
    _, folder, _, _ = _reference("mistral", root)
    check_broken_checkpoints(folder, tmp_path, "model.layers.1.self_attn.k_proj.weight",
                             wrong=(8, 32), stored=(16, 32))


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
    ids, mask = rows(5, 12)
    ours = logits(model, params, ids, mask)
    plain = logits(model_for(dataclasses.replace(model.config, lora=None)).module,
                   load_pretrained(folder)[1], ids, mask)
    assert max_diff(ours, plain, mask) > 1e-2  # LoRA changed the model
    assert max_diff(hf_logits(reloaded, ids, mask), ours, mask) <= 1e-4


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
    return gin_config("models/llama_tiny.gin", LlamaConfig, *bindings)


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


@pytest.mark.parametrize("method", ["lora", "kadapter", "diff"])
def test_a_train_step_runs_on_the_tiny_config(tiny_config, method):
    check_train_step(tiny_config, method)


def test_flops_count_grouped_kv_and_the_gated_mlp(tiny_config):
    check_flops(tiny_config)
