"""Gemma 3's text decoder (``tw_jax/models/gemma.py``) against transformers' PyTorch
``Gemma3ForCausalLM``.

A tiny random model (``torch.manual_seed``) with two sliding-window layers (window 4, RoPE base
100) around a global one (RoPE base 10k, linear scaling by 8), a ``query_pre_attn_scalar``
apart from ``head_dim`` and random norm weights (transformers starts them at zero, where
``1 + w`` and ``w`` would look alike) is saved with ``save_pretrained`` in float32 and read with
``tw_jax.models.load_pretrained``: logits agree to 1e-4 on left-padded rows longer than the
window, greedy KV-cache decoding equals ``generate`` token for token, beam search equals its
beams and scores, and an export loads back into transformers with the same logits. Sharded,
bf16-stored and multimodal (``gemma3``) checkpoints load; broken ones fail on one line. LoRA and
DIFF each run a train step on ``gin/models/gemma_tiny.gin``. Skipped where torch is absent. The
checks shared with the Llama family's tests are ``decoder_parity.py``'s.
"""

from __future__ import annotations

import dataclasses
import json

import jax
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
    families_by_type,
    load_pretrained,
    model_for,
)
from tw_jax.models.gemma import (  # noqa: E402
    FULL,
    SLIDING,
    Gemma3MultimodalConfig,
    GemmaConfig,
    rope_inverse_frequencies,
)
from tw_jax.models.gemma_io import save_gemma  # noqa: E402

WINDOW = 4
TEXT = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24,
            max_position_embeddings=128, initializer_range=0.2, rms_norm_eps=1e-6,
            sliding_window=WINDOW, layer_types=[SLIDING, FULL, SLIDING],
            rope_parameters={SLIDING: {"rope_type": "default", "rope_theta": 100.0},
                             FULL: {"rope_type": "linear", "factor": 8.0, "rope_theta": 10000.0}},
            bos_token_id=1, eos_token_id=2, pad_token_id=PAD)


def _randomise_norms(hf, seed: int) -> None:
    """Norm weights N(0, 1), the post-attention/-MLP ones + 3, so that each layer's output
    outweighs the scaled embedding and the tied head does not just repeat the last token."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, weight in hf.named_parameters():
            if "norm" in name:
                weight.copy_(torch.randn(weight.shape, generator=generator)
                             + (3.0 if ".post_" in name else 0.0))


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("hf_gemma_family"))


@pytest.fixture(scope="module")
def reference(root):
    """The random tiny ``Gemma3ForCausalLM``, its folder, and the folder read by tw_jax."""
    torch.manual_seed(0)
    hf = transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**TEXT)).eval()
    _randomise_norms(hf, 0)
    folder = f"{root}/gemma3_text"
    hf.save_pretrained(folder)  # float32, one model.safetensors
    model, params = load_pretrained(folder)
    return hf, folder, model, params


def test_the_folder_loads_as_the_gemma_family(reference):
    hf, _, model, _ = reference
    assert type(model.config) is GemmaConfig
    assert type(model_for(model)) is families_by_type()["gemma3_text"]
    assert model.config.layer_types == (SLIDING, FULL, SLIDING)
    assert (model.config.rope_local_base_freq, model.config.rope_theta,
            model.config.rope_scaling_factor) == (100.0, 10000.0, 8.0)
    # config.json -> our config -> config.json -> our config is the identity
    assert GemmaConfig.from_hf_config(model.config.to_hf_config()) == model.config
    for layer_type in (SLIDING, FULL):
        np.testing.assert_allclose(rope_inverse_frequencies(model.config, layer_type),
                                   getattr(hf.model.rotary_emb, f"{layer_type}_inv_freq").numpy(),
                                   rtol=1e-6)


def test_logits_match_transformers_on_left_padded_rows(reference):
    hf, _, model, params = reference
    # 20 tokens: five times the window
    ids, mask, ours = check_logits_match("gemma3_text", hf, model, params)
    # the window and the global layers' RoPE scaling matter at this length
    for changed in ({"sliding_window": 64}, {"rope_scaling_factor": None}):
        other = model_for(dataclasses.replace(model.config, **changed)).module
        assert max_diff(logits(other, params, ids, mask), ours, mask) > 1e-2


def test_final_logit_softcapping_is_honoured(reference):
    """None in Gemma 3; set, logits become ``cap * tanh(logits / cap)`` as in transformers."""
    hf, _, model, params = reference
    ids, mask = rows(6, 12)
    capped = model_for(dataclasses.replace(model.config, final_logit_softcapping=2.0)).module
    hf.config.final_logit_softcapping = 2.0
    try:
        theirs = hf_logits(hf, ids, mask)
    finally:
        hf.config.final_logit_softcapping = None
    ours = logits(capped, params, ids, mask)
    assert max_diff(ours, theirs, mask) <= 1e-4
    assert max_diff(ours, logits(model, params, ids, mask), mask) > 1e-1


def test_greedy_kv_cache_decoding_equals_generate(reference):
    hf, _, model, params = reference
    check_greedy_equals_generate(hf, model, params)


def test_fused_attention_gives_the_same_logits_and_tokens(reference):
    hf, _, model, params = reference
    check_fused_attention("gemma3", hf, model, params)  # sliding and global layers


def test_beam_search_equals_transformers_beams_and_scores(reference):
    hf, _, model, params = reference
    check_beam_search(hf, model, params)


def test_export_loads_back_into_transformers_with_the_same_logits(reference, tmp_path):
    hf, folder, model, params = reference
    hf_config, reloaded = check_export(save_gemma, hf, folder, model, params, tmp_path)
    assert (hf_config["model_type"], hf_config["architectures"]) == (
        "gemma3_text", ["Gemma3ForCausalLM"])
    assert reloaded.config.layer_types == hf.config.layer_types
    assert reloaded.config.rope_parameters == hf.config.rope_parameters


def test_sharded_and_bf16_checkpoints_load(reference, tmp_path):
    hf, _, _, params = reference
    check_sharded_and_bf16(hf, params, tmp_path, max_shard_size="40KB")


def test_a_broken_checkpoint_fails_on_one_line_naming_the_tensor(reference, tmp_path):
    _, folder, _, _ = reference
    broken, tensors = check_broken_checkpoints(
        folder, tmp_path, "model.layers.1.self_attn.k_proj.weight", wrong=(16, 64),
        stored=(32, 64))
    norm = "model.layers.0.pre_feedforward_layernorm.weight"
    assert "is missing" in broken({k: v for k, v in tensors.items() if k != norm}, "no_norm")


def test_a_multimodal_checkpoint_loads_its_text_decoder(tmp_path):
    """``Gemma3ForConditionalGeneration`` (``model_type`` ``gemma3``): the text decoder's
    tensors under either prefix, the vision tower and projector skipped; text logits equal."""
    torch.manual_seed(1)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, image_size=28, patch_size=14)
    config = transformers.Gemma3Config(text_config=TEXT, vision_config=vision,
                                       mm_tokens_per_image=4, image_token_index=VOCAB - 1,
                                       boi_token_index=VOCAB - 3, eoi_token_index=VOCAB - 2)
    hf = transformers.Gemma3ForConditionalGeneration(config).eval()
    _randomise_norms(hf, 1)
    hf.save_pretrained(tmp_path / "mm")
    model, params = load_pretrained(tmp_path / "mm")
    assert type(model.config) is GemmaConfig and type(model_for(model)).__name__ == "GemmaModel"
    assert type(families_by_type()["gemma3"].config_class.from_hf_config(
        json.loads((tmp_path / "mm" / "config.json").read_text()))) is GemmaConfig
    assert issubclass(Gemma3MultimodalConfig, GemmaConfig)
    ids, mask = rows(4, 12)
    assert max_diff(logits(model, params, ids, mask), hf_logits(hf, ids, mask), mask) <= 1e-4
    # transformers 5's module names (model.language_model.*) read the same
    tensors = load_file(tmp_path / "mm" / "model.safetensors")
    renamed = {k.replace("language_model.model.", "model.language_model."): v
               for k, v in tensors.items()}
    (tmp_path / "renamed").mkdir()
    (tmp_path / "renamed" / "config.json").write_text((tmp_path / "mm" / "config.json")
                                                      .read_text())
    save_file(renamed, tmp_path / "renamed" / "model.safetensors", metadata={"format": "pt"})
    jax.tree.map(np.testing.assert_array_equal, load_pretrained(tmp_path / "renamed")[1], params)


def test_older_and_hub_config_json_forms_are_read():
    """transformers 4's form (``rope_theta``, ``rope_local_base_freq``, ``rope_scaling``,
    ``sliding_window_pattern``, no ``layer_types``), as the Hub's gemma-3-1b-pt and
    gemma-3-4b-pt (text part) files have it, reads as transformers 5.24 reads it; options the
    module does not model are refused."""
    one_b = {"model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 1152,
             "intermediate_size": 6912, "num_hidden_layers": 26, "num_attention_heads": 4,
             "num_key_value_heads": 1, "head_dim": 256, "query_pre_attn_scalar": 256,
             "rope_theta": 1000000, "rope_local_base_freq": 10000, "rope_scaling": None,
             "sliding_window": 512, "sliding_window_pattern": 6, "max_position_embeddings": 32768,
             "attn_logit_softcapping": None, "final_logit_softcapping": None,
             "hidden_activation": "gelu_pytorch_tanh", "bos_token_id": 2, "eos_token_id": 1,
             "pad_token_id": 0}
    four_b = {"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
              "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
              "sliding_window": 1024}  # the rest: Gemma3TextConfig's defaults
    for hf in (one_b, four_b):
        ours, theirs = GemmaConfig.from_hf_config(hf), transformers.Gemma3TextConfig(**hf)
        assert list(ours.layer_types) == theirs.layer_types
        full, sliding = theirs.rope_parameters[FULL], theirs.rope_parameters[SLIDING]
        assert ours.rope_theta == full["rope_theta"]
        assert ours.rope_scaling_factor == full.get("factor")
        assert ours.rope_local_base_freq == sliding["rope_theta"]
        for name in ("num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
                     "query_pre_attn_scalar", "sliding_window", "eos_token_id", "bos_token_id"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert GemmaConfig.from_hf_config(ours.to_hf_config()) == ours
    assert GemmaConfig.from_hf_config(one_b).layer_types.count(FULL) == 4  # layers 6, 12, 18, 24
    for key, value, match in (
        ("attn_logit_softcapping", 50.0, "attn_logit_softcapping"),
        ("hidden_activation", "gelu", "hidden_activation"),
        ("use_bidirectional_attention", True, "use_bidirectional_attention"),
        ("rope_scaling", {"rope_type": "yarn", "factor": 4.0}, "yarn"),
        ("rope_parameters", {SLIDING: {"rope_type": "linear", "factor": 2.0}}, SLIDING),
        ("layer_types", ["chunked_attention"] * 26, "chunked_attention"),
    ):
        with pytest.raises(ValueError, match=match):
            GemmaConfig.from_hf_config({**one_b, key: value})


# --- training steps on gin/models/gemma_tiny.gin ------------------------------------------


@pytest.fixture(scope="module")
def tiny_config() -> GemmaConfig:
    """The config ``models/gemma_tiny.gin`` builds, as a plain GemmaConfig."""
    config = gin_config("models/gemma_tiny.gin", GemmaConfig)
    assert (config.num_hidden_layers, config.hidden_size, config.num_key_value_heads) == (2, 64, 1)
    assert config.layer_types == (SLIDING, FULL) and config.tie_word_embeddings
    return config


@pytest.mark.parametrize("method", ["lora", "kadapter", "diff"])
def test_a_train_step_runs_on_the_tiny_config(tiny_config, method):
    check_train_step(tiny_config, method)


def test_flops_count_grouped_kv_and_the_gated_mlp(tiny_config):
    check_flops(tiny_config)
