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
DIFF each run a train step on ``gin/models/gemma_tiny.gin``. Skipped where torch is absent.
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
from tw_jax.models.gemma import (  # noqa: E402
    FULL,
    SLIDING,
    Gemma3MultimodalConfig,
    GemmaConfig,
    rope_inverse_frequencies,
)
from tw_jax.models.gemma_io import save_gemma  # noqa: E402

VOCAB, PAD, WINDOW = 101, 0, 4
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


def _rows(seed: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Three rows of ``length`` tokens; rows 1 and 2 left-padded (7 and 3 pads)."""
    ids = np.random.RandomState(seed).randint(3, VOCAB, (3, length))
    mask = np.ones_like(ids)
    for row, pads in ((1, 7), (2, 3)):
        ids[row, :pads], mask[row, :pads] = PAD, 0
    return ids, mask


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
    ids, mask = _rows(0, 20)  # five times the window
    ours, theirs = _logits(model, params, ids, mask), _hf_logits(hf, ids, mask)
    diff = float(np.max(np.abs(ours - theirs)[mask == 1]))
    print(f"gemma3_text: max |logit difference| {diff:.2e}")
    assert diff <= 1e-4, diff
    # the window and the global layers' RoPE scaling matter at this length
    for changed in ({"sliding_window": 64}, {"rope_scaling_factor": None}):
        other = model_for(dataclasses.replace(model.config, **changed)).module
        assert np.max(np.abs(_logits(other, params, ids, mask) - ours)[mask == 1]) > 1e-2


def test_final_logit_softcapping_is_honoured(reference):
    """None in Gemma 3; set, logits become ``cap * tanh(logits / cap)`` as in transformers."""
    hf, _, model, params = reference
    ids, mask = _rows(6, 12)
    capped = model_for(dataclasses.replace(model.config, final_logit_softcapping=2.0)).module
    hf.config.final_logit_softcapping = 2.0
    try:
        theirs = _hf_logits(hf, ids, mask)
    finally:
        hf.config.final_logit_softcapping = None
    ours = _logits(capped, params, ids, mask)
    assert np.max(np.abs(ours - theirs)[mask == 1]) <= 1e-4
    assert np.max(np.abs(ours - _logits(model, params, ids, mask))[mask == 1]) > 1e-1


def test_greedy_kv_cache_decoding_equals_generate(reference):
    hf, _, model, params = reference
    ids, mask = _rows(1, 9)
    ours = np.asarray(decoding.greedy_decode(model, params, jnp.asarray(ids), jnp.asarray(mask),
                                             max_new_tokens=16, eos_id=None))
    with torch.no_grad():
        theirs = hf.generate(torch.tensor(ids), attention_mask=torch.tensor(mask),
                             do_sample=False, max_new_tokens=16, min_new_tokens=16,
                             eos_token_id=None, pad_token_id=PAD).numpy()[:, ids.shape[1]:]
    np.testing.assert_array_equal(ours, theirs)
    assert len(set(ours.ravel().tolist())) > 8  # not one token repeated: the test can fail


def test_beam_search_equals_transformers_beams_and_scores(reference):
    hf, _, model, params = reference
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


def test_export_loads_back_into_transformers_with_the_same_logits(reference, tmp_path):
    hf, folder, model, params = reference
    save_gemma(tmp_path, model.config, params)
    hf_config = json.loads((tmp_path / "config.json").read_text())
    assert (hf_config["model_type"], hf_config["architectures"]) == (
        "gemma3_text", ["Gemma3ForCausalLM"])
    theirs = load_file(f"{folder}/model.safetensors")
    ours = load_file(tmp_path / "model.safetensors")
    assert set(ours) == set(theirs)
    for name, array in ours.items():
        np.testing.assert_array_equal(array, theirs[name], err_msg=name)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(reloaded) is type(hf)
    assert reloaded.config.layer_types == hf.config.layer_types
    assert reloaded.config.rope_parameters == hf.config.rope_parameters
    ids, mask = _rows(2, 12)
    np.testing.assert_array_equal(_hf_logits(reloaded, ids, mask), _hf_logits(hf, ids, mask))


def test_sharded_and_bf16_checkpoints_load(reference, tmp_path):
    hf, _, _, params = reference
    hf.save_pretrained(tmp_path / "sharded", max_shard_size="40KB")
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


def test_a_broken_checkpoint_fails_on_one_line_naming_the_tensor(reference, tmp_path):
    _, folder, _, _ = reference
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

    wrong = broken({**tensors, name: np.zeros((16, 64), np.float32)}, "shape")
    assert f"tensor {name!r} has shape (16, 64), expected (32, 64)" in wrong
    extra = broken({**tensors, "model.layers.1.mlp.extra.weight": np.zeros(3, np.float32)}, "extra")
    assert "model.layers.1.mlp.extra.weight" in extra
    missing = broken({k: v for k, v in tensors.items() if k != name}, "missing")
    assert f"tensor {name!r} (shape (32, 64)) is missing" in missing
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
    ids, mask = _rows(4, 12)
    assert np.max(np.abs(_logits(model, params, ids, mask) - _hf_logits(hf, ids, mask))
                  [mask == 1]) <= 1e-4
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
    import gin

    from tw_jax.runtime import gin_setup

    gin_setup.parse(["models/gemma_tiny.gin"], (), input_pipeline=False)
    try:
        built = gin_setup.model_config()
    finally:
        gin.clear_config()
    config = GemmaConfig(**{f.name: getattr(built, f.name) for f in dataclasses.fields(built)})
    assert (config.num_hidden_layers, config.hidden_size, config.num_key_value_heads) == (2, 64, 1)
    assert config.layer_types == (SLIDING, FULL) and config.tie_word_embeddings
    return config


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
