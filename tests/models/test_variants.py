"""LoRA, K-Adapter and Modular: identity or wiring, action in decoding, freeze labels, counts."""

from __future__ import annotations

import dataclasses
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tw_jax.models import (
    GPT2Config,
    KAdapterConfig,
    LoRAConfig,
    ModularConfig,
    T5Config,
    abstract_variables,
    build_model,
    count_params,
    decoding,
    forward_logits,
    layers,
    param_labels,
)
from tw_jax.models import gpt2 as gpt2_lib
from tw_jax.models import t5 as t5_lib
from tw_jax.models.variants import export_params, fill_missing, merge_lora, path_names

GPT = GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=3, n_head=4,
                 initializer_range=0.2, dropout_rate=0.0, bos_token_id=99, eos_token_id=99)
T5 = T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=3, num_heads=4,
              relative_attention_num_buckets=8, relative_attention_max_distance=20,
              dropout_rate=0.0)
SMALL_MODULAR = ModularConfig(d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4)


def _inputs(config) -> tuple[jax.Array, ...]:
    dummy = jnp.zeros((1, 8), jnp.int32)
    return (dummy, dummy) if config.model_type == "t5" else (dummy,)


def _init(config, seed: int = 0) -> dict:
    """Eager on purpose: compiling a whole init graph costs seconds for each of the many configs
    here, while eager init compiles each random draw once per shape, which the configs share."""
    model = build_model(config)
    return nn.unbox(model.init(jax.random.key(seed), *_inputs(config))["params"])


def _ids(seed: int, shape: tuple[int, int]) -> jax.Array:
    return jnp.asarray(np.random.RandomState(seed).randint(2, 99, shape), jnp.int32)


def _logits(config, params, ids, dec=None) -> np.ndarray:
    """The full forward pass, jitted (``forward_logits``: one compile per model and shape)."""
    return forward_logits(build_model(config), params, ids, dec)


def _paths(tree) -> set[str]:
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {"/".join(path_names(path)) for path, _ in flat}


@pytest.fixture(scope="module")
def base_params() -> dict:
    return {"gpt2": _init(GPT), "t5": _init(T5)}


def _variant(base_config, base_params, **variant) -> tuple[object, dict, list[str]]:
    """A variant config and its parameters: pretrained base weights, fresh variant weights."""
    config = dataclasses.replace(base_config, **variant)
    params, missing = fill_missing(_init(config, seed=1), base_params)
    return config, params, missing


def _perturb_new(params: dict, seed: int = 3, scale: float = 0.5) -> dict:
    """Move every variant weight (LoRA B included) away from its initial value."""
    rng = np.random.RandomState(seed)

    def move(path, x):  # in numpy: the same float32 products and sums, no eager op per shape
        names = path_names(path)
        if any(n in ("lora_a", "lora_b", "kadapter", "modular") for n in names):
            x = np.asarray(x)
            return jnp.asarray(x + x.dtype.type(scale) * rng.standard_normal(x.shape).astype(x.dtype))
        return x

    return jax.tree_util.tree_map_with_path(move, params)


# --- LoRA -----------------------------------------------------------------------------------------

def test_lora_sits_on_query_and_value_of_every_attention_t5_cross_attention_included(base_params):
    _, _, missing = _variant(T5, base_params["t5"], lora=LoRAConfig())
    expected = set()
    for stack, kinds in (("encoder", ("self_attn",)), ("decoder", ("self_attn", "cross_attn"))):
        for i in range(3):
            for kind in kinds:
                for proj in ("query", "value"):
                    for name in ("lora_a", "lora_b"):
                        expected.add(f"{stack}/block_{i}/{kind}/{proj}/{name}")
    assert set(missing) == expected
    _, params, missing = _variant(GPT, base_params["gpt2"], lora=LoRAConfig(rank=2))
    assert set(missing) == {f"h_{i}/attn/{p}/lora_{m}" for i in range(3) for p in ("query", "value")
                            for m in "ab"}
    assert params["h_0"]["attn"]["query"]["lora_a"].shape == (32, 2)
    assert params["h_0"]["attn"]["query"]["lora_b"].shape == (2, 4, 8)
    assert float(jnp.std(params["h_0"]["attn"]["query"]["lora_a"])) == pytest.approx(0.02, rel=0.3)
    assert not np.any(np.asarray(params["h_0"]["attn"]["query"]["lora_b"]))


@pytest.mark.parametrize("arch", ["gpt2", "t5"])
def test_fresh_lora_is_the_identity(arch, base_params):
    base = GPT if arch == "gpt2" else T5
    config, params, _ = _variant(base, base_params[arch], lora=LoRAConfig())
    ids = _ids(0, (2, 9))
    dec = _ids(1, (2, 5)) if arch == "t5" else None
    np.testing.assert_array_equal(
        _logits(config, params, ids, dec), _logits(base, base_params[arch], ids, dec)
    )


def test_lora_scale_is_the_reference_codes_rank_over_alpha_by_default():
    """rank / alpha = 4 / 16 = 0.25 (the reference code), Hu et al.'s alpha / rank = 4 by name;
    the update a projection adds is exactly ``0.25 * (x A) B``, and merging folds exactly
    ``0.25 * A @ B`` into the kernel."""
    lora = LoRAConfig()
    assert (lora.rank, lora.alpha, lora.scaling, lora.scale) == (4, 16.0, "rank_over_alpha", 0.25)
    assert LoRAConfig(scaling="alpha_over_rank").scale == 4.0
    assert LoRAConfig(rank=8, alpha=32.0).scale == 0.25
    with pytest.raises(ValueError, match="LoRA scaling 'hu' is not one of"):
        LoRAConfig(scaling="hu")

    dense = layers.DenseGeneral((3,), ("embed", "mlp"), 0.02, use_bias=True, lora=lora)
    x = jnp.asarray([[1.0, 2.0]])
    rng = np.random.RandomState(0)
    w = {  # small integers: every product and sum below is exact in float32
        "kernel": rng.randint(-3, 4, (2, 3)), "bias": rng.randint(-3, 4, (3,)),
        "lora_a": rng.randint(-3, 4, (2, 4)), "lora_b": rng.randint(-3, 4, (4, 3)),
    }
    w = {k: jnp.asarray(v, jnp.float32) for k, v in w.items()}
    y = np.asarray(dense.apply({"params": w}, x))
    base = np.asarray(x @ w["kernel"] + w["bias"])
    delta = np.asarray(x @ w["lora_a"] @ w["lora_b"])
    assert np.abs(delta).max() > 0
    np.testing.assert_array_equal(y - base, 0.25 * delta)
    merged = merge_lora({"dense": w}, dataclasses.replace(GPT, lora=lora))["dense"]
    assert set(merged) == {"kernel", "bias"}
    np.testing.assert_array_equal(merged["kernel"], w["kernel"] + 0.25 * (w["lora_a"] @ w["lora_b"]))
    plain = layers.DenseGeneral((3,), ("embed", "mlp"), 0.02, use_bias=True)
    np.testing.assert_array_equal(np.asarray(plain.apply({"params": merged}, x)), y)


@pytest.mark.parametrize("scaling", ["alpha_over_rank", "rank_over_alpha"])
@pytest.mark.parametrize("arch", ["gpt2", "t5"])
def test_trained_lora_equals_its_merged_kernels(arch, scaling, base_params):
    """``W + scale A B`` with scale alpha/rank (Hu et al.) or the reference's rank/alpha."""
    base = GPT if arch == "gpt2" else T5
    lora = LoRAConfig(rank=4, alpha=8.0, scaling=scaling)
    assert lora.scale == (0.5 if scaling == "rank_over_alpha" else 2.0)
    config, params, _ = _variant(base, base_params[arch], lora=lora)
    params = _perturb_new(params, scale=0.05)
    ids = _ids(2, (2, 9))
    dec = _ids(3, (2, 5)) if arch == "t5" else None
    with_lora = _logits(config, params, ids, dec)
    merged = merge_lora(params, config)
    assert not any("lora" in p for p in _paths(merged))
    np.testing.assert_allclose(with_lora, _logits(base, merged, ids, dec), atol=2e-5)
    assert np.abs(with_lora - _logits(base, base_params[arch], ids, dec)).max() > 1e-3


# --- K-Adapter ------------------------------------------------------------------------------------

def test_default_taps_are_the_second_and_last_layer():
    assert KAdapterConfig().tap_layers(24) == (1, 23)
    assert KAdapterConfig(num_adapters=3).tap_layers(24) == (1, 12, 23)
    assert KAdapterConfig(num_adapters=2, taps=(0, -1)).tap_layers(6) == (0, 5)
    with pytest.raises(ValueError, match="taps"):
        KAdapterConfig(num_adapters=2, taps=(3,))
    with pytest.raises(ValueError, match="distinct increasing"):
        KAdapterConfig().tap_layers(2)  # the 2nd layer is the last: nothing to chain


@pytest.mark.parametrize(
    "model_file,taps",
    [("models/gpt2_large.gin", (0, 10)), ("models/t5_large.gin", (1, 23)),
     ("models/gpt2_tiny.gin", (1, 2))],
)
def test_shipped_kadapter_taps(model_file, taps):
    """TemporalWiki's GPT-2 Large reads Hugging Face's hidden_states[1] and [11] (the outputs of
    the 1st and 11th block: 0-based 0 and 10); T5 (CKL, EvolvingQA) the 2nd and the last layer."""
    import gin

    from tw_jax.runtime import gin_setup

    try:
        gin_setup.parse(["kadapter.gin", model_file, "runs/cpu_smoke.gin"], ["MODEL_DIR='m'"])
        config = gin.query_parameter("%MODEL").scoped_configurable_fn()
    finally:
        gin.clear_config()
    layers_of = getattr(config, "n_layer", None) or config.num_layers
    assert config.kadapter.tap_layers(layers_of) == taps


def _layer_norm(params: dict, x: jax.Array) -> jax.Array:
    return nn.LayerNorm(epsilon=1e-5).apply({"params": params}, x)


def test_gpt2_kadapter_wiring_reads_taps_chains_and_adds_a_tenth_of_its_layer_norm(base_params):
    config, params, missing = _variant(GPT, base_params["gpt2"], kadapter=KAdapterConfig())
    assert {m.split("/")[1] for m in missing} == {"adapter_0", "adapter_1", "output_norm"}
    params = _perturb_new(params)
    ids = _ids(4, (2, 7))
    model = build_model(config)

    @jax.jit  # the model and the reference wiring, both compiled
    def run(params):
        logits, state = model.apply({"params": params}, ids, capture_intermediates=True,
                                    mutable=["intermediates"])
        inter = state["intermediates"]
        h1, h2 = inter["h_1"]["__call__"][0], inter["h_2"]["__call__"][0]
        mask = jnp.tril(jnp.ones((7, 7), bool))[None, None]
        block = gpt2_lib.Block(config)
        adapters = params["kadapter"]
        out0 = block.apply({"params": adapters["adapter_0"]}, h1, mask, None, False, True)
        out1 = block.apply({"params": adapters["adapter_1"]}, h2 + out0, mask, None, False, True)
        base = inter["ln_f"]["__call__"][0]
        expected = base + 0.1 * _layer_norm(adapters["output_norm"], out1)
        tied = expected @ params["wte"]["embedding"].T
        return logits, inter["kadapter"]["__call__"][0], expected, tied

    logits, kadapter, expected, tied = run(params)
    np.testing.assert_allclose(kadapter, expected, atol=1e-5)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(tied), atol=1e-4)


def test_t5_kadapter_wiring_sits_on_the_encoder(base_params):
    config, params, missing = _variant(T5, base_params["t5"], kadapter=KAdapterConfig())
    assert all(m.startswith("encoder/kadapter/") for m in missing)
    params = _perturb_new(params)
    ids = _ids(5, (2, 7))
    model = build_model(config)

    @jax.jit  # the model and the reference wiring, both compiled
    def run(params, base_params):
        encoded, state = model.apply({"params": params}, ids, method=t5_lib.T5.encode,
                                     capture_intermediates=True, mutable=["intermediates"])
        enc = state["intermediates"]["encoder"]
        h1, h2 = enc["block_1"]["__call__"][0], enc["block_2"]["__call__"][0]
        positions = jnp.arange(7)
        bias = t5_lib.RelativePositionBias(config, bidirectional=True).apply(
            {"params": params["encoder"]["relative_attention_bias"]}, positions, positions
        )
        mask = jnp.ones((2, 1, 7, 7), bool)
        block = t5_lib.EncoderBlock(config)
        adapters = params["encoder"]["kadapter"]
        out0 = block.apply({"params": adapters["adapter_0"]}, h1, mask, bias, True)
        out1 = block.apply({"params": adapters["adapter_1"]}, h2 + out0, mask, bias, True)
        base = build_model(T5).apply({"params": base_params}, ids, method=t5_lib.T5.encode)
        return encoded, base + 0.1 * _layer_norm(adapters["output_norm"], out1)

    encoded, expected = run(params, base_params["t5"])
    np.testing.assert_allclose(np.asarray(encoded), np.asarray(expected), atol=1e-5)


# --- Modular --------------------------------------------------------------------------------------

def test_modular_adds_a_twentieth_of_the_projected_small_encoder(base_params):
    config, params, missing = _variant(T5, base_params["t5"], modular=SMALL_MODULAR)
    assert {m.split("/")[1] for m in missing} == {"shared", "encoder", "projection"}
    params = _perturb_new(params, scale=0.1)
    small = params["modular"]
    assert small["shared"]["embedding"].shape == (100, 16)
    assert small["projection"]["kernel"].shape == (16, 32)
    assert small["encoder"]["block_0"]["self_attn"]["query"]["kernel"].shape == (16, 4, 4)
    ids = _ids(6, (2, 7))

    @jax.jit  # the model and the reference wiring, both compiled
    def run(params, base_params):
        mask = jnp.ones((2, 7), bool)
        encoded = build_model(config).apply({"params": params}, ids, method=t5_lib.T5.encode)
        base = build_model(T5).apply({"params": base_params}, ids, method=t5_lib.T5.encode)
        small = params["modular"]
        embedded = jnp.take(small["shared"]["embedding"], ids, axis=0)
        small_out = t5_lib.Encoder(config.modular_encoder_config).apply(
            {"params": small["encoder"]}, embedded, mask, True)
        projected = small_out @ small["projection"]["kernel"] + small["projection"]["bias"]
        return encoded, base + 0.05 * projected

    encoded, expected = run(params, base_params["t5"])
    np.testing.assert_allclose(np.asarray(encoded), np.asarray(expected), atol=1e-5)


# --- Decoding -------------------------------------------------------------------------------------

VARIANTS = [
    ("gpt2", dict(lora=LoRAConfig())),
    ("gpt2", dict(kadapter=KAdapterConfig())),
    ("t5", dict(lora=LoRAConfig())),
    ("t5", dict(kadapter=KAdapterConfig())),
    ("t5", dict(modular=SMALL_MODULAR)),
]


@pytest.mark.parametrize("arch,variant", VARIANTS, ids=[f"{a}-{next(iter(v))}" for a, v in VARIANTS])
def test_variants_act_in_decoding_as_in_the_forward_pass(arch, variant, base_params):
    base = GPT if arch == "gpt2" else T5
    config, params, _ = _variant(base, base_params[arch], **variant)
    params = _perturb_new(params)
    model = build_model(config)
    prompts = _ids(7, (3, 5))
    steps = 6
    ours = np.asarray(decoding.greedy_decode(model, params, prompts, max_new_tokens=steps,
                                             eos_id=None))
    plain = np.asarray(decoding.greedy_decode(build_model(base), base_params[arch], prompts,
                                              max_new_tokens=steps, eos_id=None))
    assert (ours != plain).any(), "a changed variant must change the decode"
    # Every cached step picks the argmax of the full teacher-forced forward pass of the same model.
    if arch == "gpt2":
        logits = _logits(config, params, jnp.concatenate([prompts, ours], axis=1))
        np.testing.assert_array_equal(logits[:, 4:-1].argmax(-1), ours)
    else:
        dec = jnp.concatenate([jnp.zeros((3, 1), jnp.int32), ours[:, :-1]], axis=1)
        np.testing.assert_array_equal(_logits(config, params, prompts, dec).argmax(-1), ours)
    beams, _ = decoding.beam_search(model, params, prompts, beam_size=1, max_new_tokens=steps,
                                    eos_id=None)
    np.testing.assert_array_equal(np.asarray(beams[:, 0]), ours)


# --- Freezing -------------------------------------------------------------------------------------

def _trainable(config) -> set[str]:
    params = nn.unbox(abstract_variables(config)["params"])
    labels = param_labels(config, params)
    flat = jax.tree_util.tree_flatten_with_path(labels)[0]
    return {"/".join(path_names(p)) for p, label in flat if label == "trainable"}


def test_freeze_labels_cover_exactly_the_intended_paths():
    every_t5 = _paths(nn.unbox(abstract_variables(T5)["params"]))
    assert _trainable(T5) == every_t5  # vanilla: everything trains

    kadapter = _trainable(dataclasses.replace(T5, kadapter=KAdapterConfig()))
    base_trainable = {p for p in every_t5 if not p.startswith("encoder/")}
    assert {p for p in kadapter if "kadapter" not in p} == base_trainable
    assert {p for p in kadapter if "kadapter" in p} and all(
        p.startswith("encoder/kadapter/") for p in kadapter - base_trainable
    )

    lora = _trainable(dataclasses.replace(T5, lora=LoRAConfig()))
    assert {p for p in lora if p.startswith("encoder/")} == {
        f"encoder/block_{i}/self_attn/{proj}/lora_{m}" for i in range(3)
        for proj in ("query", "value") for m in "ab"
    }

    modular = _trainable(dataclasses.replace(T5, modular=SMALL_MODULAR, freeze="base"))
    assert modular and all(p.startswith("modular/") for p in modular)

    gpt_lora = _trainable(dataclasses.replace(GPT, lora=LoRAConfig()))
    assert gpt_lora == {f"h_{i}/attn/{p}/lora_{m}" for i in range(3) for p in ("query", "value")
                        for m in "ab"}
    gpt_adapter = _trainable(dataclasses.replace(GPT, kadapter=KAdapterConfig()))
    assert gpt_adapter and all(p.startswith("kadapter/") for p in gpt_adapter)
    with_adapter = dataclasses.replace(GPT, kadapter=KAdapterConfig())
    assert _trainable(dataclasses.replace(with_adapter, freeze="none")) == _paths(
        nn.unbox(abstract_variables(with_adapter)["params"])
    )
    with pytest.raises(ValueError, match="encoder-decoder"):
        param_labels(dataclasses.replace(GPT, freeze="encoder"), {})


# --- Parameter counts -----------------------------------------------------------------------------

T5_LARGE = T5Config(vocab_size=32128, d_model=1024, d_kv=64, d_ff=4096, num_layers=24, num_heads=16)


@pytest.mark.parametrize(
    "variant,millions,total",
    [
        ({}, 737, 737_668_096),
        ({"lora": LoRAConfig()}, 738, 738_847_744),
        ({"kadapter": KAdapterConfig()}, 762, 762_840_064),
        ({"kadapter": KAdapterConfig(num_adapters=3)}, 775, 775_425_024),
        ({"modular": ModularConfig()}, 773, 773_524_224),
    ],
    ids=["base", "lora", "kadapter2", "kadapter3", "modular"],
)
def test_t5_large_counts_match_ckl_table_2(variant, millions, total):
    """CKL Table 2 reports millions rounded down; counts come from shapes alone."""
    count = count_params(dataclasses.replace(T5_LARGE, **variant))
    assert count.total == total
    assert math.floor(count.total / 1e6) == millions
    new = total - 737_668_096
    encoder = 24 * (4 * 1024 * 1024 + 2 * 1024 * 4096 + 2 * 1024) + 1024 + 32 * 16
    expected_trainable = 737_668_096 - encoder + new if variant else total
    assert count.trainable == expected_trainable


def test_gpt2_large_lora_trains_only_its_low_rank_matrices():
    large = GPT2Config(n_embd=1280, n_layer=36, n_head=20)
    count = count_params(dataclasses.replace(large, lora=LoRAConfig()))
    assert count.trainable == 36 * 2 * (1280 * 4 + 4 * 1280)
    assert count.total == 774_030_080 + count.trainable


def test_gpt2_large_kadapter_adds_two_blocks_and_the_papers_103m_counts_the_lm_head_again():
    """TemporalWiki, Section 5.2: K-Adapter adds "an increase of 103M parameters". Ours adds two
    GPT-2 Large blocks and the output LayerNorm, exactly the reference's adapter module; the
    paper's figure also counts the LM head (the tied token embedding, with the reference's five
    added special tokens), which the reference selects by name with the adapters but which is
    no new parameter. Shapes only (``jax.eval_shape``): nothing is allocated."""
    large = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=1280, n_layer=36, n_head=20)
    config = dataclasses.replace(large, kadapter=KAdapterConfig(taps=(0, 10)))
    d, inner = 1280, 4 * 1280
    block = (2 * d + (d * 3 * d + 3 * d) + (d * d + d)  # ln_1, query/key/value, out
             + 2 * d + (d * inner + inner) + (inner * d + d))  # ln_2, c_fc, c_proj
    assert block == 19_677_440
    new = 2 * block + 2 * d  # two adapter blocks + the output LayerNorm
    assert new == 39_357_440
    count = count_params(config)
    assert count.total == 774_030_080 + new == 813_387_520
    assert count.trainable == new  # freeze "base": the adapters alone train
    shapes = nn.unbox(abstract_variables(config)["params"])
    assert sum(math.prod(x.shape) for x in jax.tree.leaves(shapes["kadapter"])) == new
    vocab, width = shapes["wte"]["embedding"].shape
    assert (vocab, width) == (50257, 1280)
    reference_head = (vocab + 5) * width  # </s> <s> <unk> <pad> <mask> added by the reference
    assert reference_head == 64_335_360
    assert new + reference_head == 103_692_800
    assert (new + reference_head) // 10**6 == 103  # the paper's "103M"
    assert new + vocab * width == 103_686_400  # with GPT-2's own vocabulary: 103M too


def test_export_folds_lora_and_refuses_adapters(base_params, tmp_path):
    from tw_jax.models.hf_io import load_gpt2, save_gpt2

    config, params, _ = _variant(GPT, base_params["gpt2"], lora=LoRAConfig())
    params = _perturb_new(params, scale=0.05)
    save_gpt2(tmp_path / "lora", config, params)
    loaded_config, loaded = load_gpt2(tmp_path / "lora")
    assert loaded_config.lora is None
    ids = _ids(8, (2, 6))
    np.testing.assert_allclose(_logits(GPT, loaded, ids), _logits(config, params, ids), atol=2e-5)
    adapter_config = dataclasses.replace(GPT, kadapter=KAdapterConfig())
    with pytest.raises(ValueError, match="kadapter cannot be exported"):
        export_params(_init(adapter_config), adapter_config)


def test_fill_missing_names_what_does_not_fit(base_params):
    config = dataclasses.replace(GPT, n_embd=64, n_head=4)
    expected = r"h_0/attn/key/bias has shape \(4, 8\), the model expects \(4, 16\)"
    with pytest.raises(ValueError, match=expected):
        fill_missing(abstract_variables(config)["params"], base_params["gpt2"])
    extra = dict(base_params["gpt2"], stray={"kernel": np.zeros(3)})
    with pytest.raises(ValueError, match="stray"):
        fill_missing(abstract_variables(GPT)["params"], extra)
