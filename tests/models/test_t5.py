"""T5 without PyTorch: shapes and counts, cached decoding, export/import, sharding, clear errors."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import textwrap

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec
from safetensors.numpy import load_file, save_file
from xla_flags import forced_devices

from tw_jax.models import (
    T5,
    T5Config,
    abstract_variables,
    count_params,
    decoding,
    forward_logits,
    load_pretrained,
    scoring,
    t5,
)
from tw_jax.models.sharding import make_mesh, mesh_shardings
from tw_jax.models.t5_io import load_t5, save_t5

TINY = dict(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
            relative_attention_num_buckets=8, relative_attention_max_distance=20,
            dropout_rate=0.0, initializer_factor=1.0)
ORIGINAL = T5Config(**TINY)
V1_1 = T5Config(**TINY, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                scale_decoder_outputs=False)


def _init(config: T5Config) -> tuple[T5, dict]:
    """The model and its parameters: initialised once per config for the whole file; each call
    gets its own copy of the tree's dicts, so a test may edit its copy in place."""
    model, params = _init_once(config)
    return model, jax.tree.map(lambda x: x, params)


@functools.cache
def _init_once(config: T5Config) -> tuple[T5, dict]:
    model = T5(config)
    dummy = jnp.zeros((1, 8), jnp.int32)
    variables = jax.jit(model.init)(jax.random.key(0), dummy, dummy)
    return model, nn.unbox(variables["params"])


def _ids(seed: int, shape: tuple[int, int]) -> np.ndarray:
    return np.random.RandomState(seed).randint(2, 100, shape)


def _assert_trees_equal(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_t5_large_has_737m_parameters():
    large = T5Config(d_model=1024, d_ff=4096, num_layers=24, num_heads=16, d_kv=64, vocab_size=32128)
    assert count_params(large).total == 737_668_096  # CKL's "737M" T5-large(-ssm)
    untied = dataclasses.replace(large, tie_word_embeddings=False)
    assert count_params(untied).total == 737_668_096 + 32128 * 1024


def _shapes(config: T5Config) -> dict:
    return nn.unbox(abstract_variables(config)["params"])


def test_parameter_tree_layout():
    params = _shapes(ORIGINAL)
    assert set(params) == {"shared", "encoder", "decoder"}
    assert params["encoder"]["relative_attention_bias"]["embedding"].shape == (8, 4)
    assert "relative_attention_bias" not in params["encoder"]["block_1"]["self_attn"]
    assert params["decoder"]["block_0"]["self_attn"]["query"]["kernel"].shape == (32, 4, 8)
    assert params["decoder"]["block_0"]["cross_attn"]["out"]["kernel"].shape == (4, 8, 32)
    assert set(params["encoder"]["block_0"]["mlp"]) == {"wi", "wo"}
    params = _shapes(V1_1)
    assert params["lm_head"]["kernel"].shape == (32, 100)
    assert set(params["decoder"]["block_1"]["mlp"]) == {"wi_0", "wi_1", "wo"}


@pytest.mark.parametrize("config", [ORIGINAL, V1_1], ids=["original", "v1_1"])
def test_cached_step_by_step_decoding_equals_the_full_forward(config):
    model, params = _init(config)
    ids, dec = _ids(0, (2, 11)), _ids(1, (2, 7))
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    full = np.asarray(jax.jit(lambda p: model.apply({"params": p}, ids, dec, attention_mask=mask))(params))
    encoded = jax.jit(lambda p: model.apply({"params": p}, ids, mask, method=T5.encode))(params)
    cache = t5.init_cache(model, params, 2, 7, 11)
    step = jax.jit(t5.decode_step, static_argnums=0)
    # A two-token prefix (which fills the cross-attention cache), then single steps.
    logits, cache = step(model, params, cache, dec[:, :2], encoded, mask)
    steps = [logits]
    for i in range(2, 7):
        logits, cache = step(model, params, cache, dec[:, i:i + 1])
        steps.append(logits)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-4, rtol=1e-5)
    assert int(cache["decoder"]["cache_index"]) == 7


def test_greedy_decode_follows_the_teacher_forced_argmax():
    model, params = _init(ORIGINAL)
    ids = _ids(2, (3, 9))
    out = np.asarray(decoding.greedy_decode(model, params, ids, max_new_tokens=6, eos_id=None))
    dec = np.concatenate([np.zeros((3, 1), int), out[:, :-1]], axis=1)
    expected = forward_logits(model, params, ids, dec).argmax(-1)
    np.testing.assert_array_equal(out, expected)


def test_scoring_is_the_teacher_forced_log_softmax_and_beams_score_what_they_return():
    model, params = _init(ORIGINAL)
    ids, targets = _ids(5, (3, 9)), _ids(6, (3, 5))
    mask = np.ones_like(ids)
    mask[2, 6:] = 0
    scores = np.asarray(scoring.seq2seq_log_likelihoods(model, params, ids, targets, mask))
    dec = np.concatenate([np.zeros((3, 1), int), targets[:, :-1]], axis=1)
    logits = jax.jit(lambda p: model.apply({"params": p}, ids, dec, attention_mask=mask))(params)
    expected = np.take_along_axis(np.asarray(jax.nn.log_softmax(logits)), targets[..., None], -1)
    np.testing.assert_allclose(scores, expected[..., 0], atol=1e-5)

    beams, beam_scores = decoding.beam_search(model, params, ids, mask, beam_size=3,
                                              max_new_tokens=5, eos_id=None)
    greedy = decoding.greedy_decode(model, params, ids, mask, max_new_tokens=5, eos_id=None)
    for b in range(3):
        rescored = np.asarray(scoring.seq2seq_log_likelihoods(
            model, params, ids, np.asarray(beams[:, b]), mask)).sum(-1)
        np.testing.assert_allclose(rescored, np.asarray(beam_scores[:, b]), atol=1e-4)
    greedy_score = np.asarray(
        scoring.seq2seq_log_likelihoods(model, params, ids, np.asarray(greedy), mask)
    ).sum(-1)
    assert (np.asarray(beam_scores[:, 0]) >= greedy_score - 1e-5).all()
    assert (np.diff(np.asarray(beam_scores), axis=1) <= 1e-6).all()  # best first


def test_dropout_only_when_not_deterministic_and_remat_changes_nothing():
    config = dataclasses.replace(ORIGINAL, dropout_rate=0.3)
    model, params = _init(config)
    ids, dec = _ids(3, (2, 8)), _ids(4, (2, 5))

    @functools.partial(jax.jit, static_argnums=(0, 2))
    def apply(m: T5, p, deterministic: bool = True, rng=None):
        rngs = None if rng is None else {"dropout": rng}
        return m.apply({"params": p}, ids, dec, deterministic=deterministic, rngs=rngs)

    base = np.asarray(apply(model, params))
    noisy = apply(model, params, False, jax.random.key(1))
    assert np.max(np.abs(np.asarray(noisy) - base)) > 1e-3
    remat = T5(dataclasses.replace(config, remat=True))
    np.testing.assert_allclose(np.asarray(apply(remat, params)), base, atol=1e-6)

    @functools.partial(jax.jit, static_argnums=0)
    def grad(m: T5, p):
        return jax.grad(lambda q: jnp.mean(apply(m, q) ** 2))(p)

    for a, b in zip(jax.tree.leaves(grad(model, params)), jax.tree.leaves(grad(remat, params)),
                    strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("config", [ORIGINAL, V1_1], ids=["original", "v1_1"])
def test_export_import_round_trip_is_exact(tmp_path, config):
    model, params = _init(config)
    save_t5(tmp_path / "a", config, params)
    loaded_config, loaded = load_t5(tmp_path / "a")
    assert loaded_config == config
    _assert_trees_equal(loaded, params)
    save_t5(tmp_path / "b", loaded_config, loaded)
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    tensors = load_file(tmp_path / "a" / "model.safetensors")
    assert tensors["encoder.block.0.layer.0.SelfAttention.q.weight"].shape == (32, 32)
    assert tensors["decoder.block.1.layer.2.DenseReluDense.wo.weight"].shape == (32, 64)  # (out, in)
    assert ("lm_head.weight" in tensors) == (not config.tie_word_embeddings)
    assert not any("block.1.layer.0.SelfAttention.relative_attention_bias" in k for k in tensors)
    save_t5(tmp_path / "c", config, params, max_shard_bytes=20_000)
    index = json.loads((tmp_path / "c" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    loaded_model, sharded = load_pretrained(tmp_path / "c")
    _assert_trees_equal(sharded, params)
    ids, dec = _ids(5, (1, 10)), _ids(6, (1, 4))
    np.testing.assert_array_equal(forward_logits(loaded_model, sharded, ids, dec),
                                  forward_logits(model, params, ids, dec))


def test_import_refuses_missing_leftover_and_untied_tensors(tmp_path):
    _, params = _init(ORIGINAL)
    save_t5(tmp_path, ORIGINAL, params)
    path = tmp_path / "model.safetensors"
    tensors = load_file(path)

    def write(t: dict) -> None:
        save_file(t, str(path), metadata={"format": "pt"})

    write({k: v for k, v in tensors.items() if k != "decoder.final_layer_norm.weight"})
    with pytest.raises(KeyError, match="decoder.final_layer_norm.weight"):
        load_t5(tmp_path)
    write({**tensors, "decoder.block.2.layer.0.layer_norm.weight": np.ones(32, np.float32)})
    with pytest.raises(ValueError, match="not part of a T5"):
        load_t5(tmp_path)
    write({**tensors, "lm_head.weight": tensors["shared.weight"] + 1})
    with pytest.raises(ValueError, match="lm_head.weight differs"):
        load_t5(tmp_path)
    write({**tensors, "encoder.embed_tokens.weight": tensors["shared.weight"].copy()})
    load_t5(tmp_path)  # an equal copy of the embedding is accepted
    with pytest.raises(ValueError, match="decoder_input_ids"):
        model, loaded = load_pretrained(tmp_path)
        forward_logits(model, loaded, _ids(0, (1, 4)))


def test_config_from_hugging_face_fields():
    hf = {"model_type": "t5", "vocab_size": 32128, "d_model": 1024, "num_layers": 24,
          "num_decoder_layers": 24, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
    config = T5Config.from_hf_config(hf, dtype="bfloat16")
    assert config.is_gated and config.activation == "gelu_new" and config.dtype == "bfloat16"
    assert not config.tie_word_embeddings and not config.scale_decoder_outputs
    assert config.num_decoder_layers is None and config.decoder_layers == 24
    # transformers 5 writes v1.1 as tied but unscaled.
    config = T5Config.from_hf_config({**hf, "tie_word_embeddings": True, "scale_decoder_outputs": False})
    assert config.tie_word_embeddings and not config.scale_decoder_outputs
    assert T5Config.from_hf_config(config.to_hf_config()) == config
    with pytest.raises(ValueError, match="feed_forward_proj"):
        T5Config(feed_forward_proj="fancy-gelu")
    with pytest.raises(ValueError, match="not a T5"):
        T5Config.from_hf_config({"model_type": "gpt2", "vocab_size": 10})


def test_shardings_follow_the_rules_table():
    shardings = mesh_shardings(abstract_variables(V1_1), make_mesh((-1, 1, 1)))["params"]
    assert shardings["shared"]["embedding"].spec == PartitionSpec("model", "fsdp")
    block = shardings["decoder"]["block_0"]
    assert block["cross_attn"]["query"]["kernel"].spec == PartitionSpec("fsdp", "model", None)
    assert block["mlp"]["wo"]["kernel"].spec == PartitionSpec("model", "fsdp")
    assert shardings["lm_head"]["kernel"].spec == PartitionSpec("fsdp", "model")
    assert shardings["encoder"]["relative_attention_bias"]["embedding"].spec == PartitionSpec(None, "model")


# Runs in a fresh interpreter: the device count is fixed when jax first initialises its backend.
_EIGHT_DEVICES = textwrap.dedent(
    """
    import flax.linen as nn, jax, jax.numpy as jnp, numpy as np
    from tw_jax.models import abstract_variables
    from tw_jax.models.t5 import T5, T5Config
    from tw_jax.models.sharding import activate, batch_sharding, make_mesh, mesh_shardings

    assert len(jax.devices()) == 8
    config = T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, dropout_rate=0.0,
                      feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    model = T5(config)
    ids = jnp.asarray(np.random.RandomState(0).randint(0, 100, (4, 12)), jnp.int32)
    init = lambda rng: model.init(rng, ids[:1, :8], ids[:1, :8])
    apply = lambda variables, x: model.apply(variables, x, x[:, :6])
    one = jax.jit(init)(jax.random.key(0))
    reference = np.asarray(jax.jit(apply)(one, ids))
    mesh = make_mesh((2, 2, 2))
    with activate(mesh):
        sharded = jax.jit(init, out_shardings=mesh_shardings(abstract_variables(config), mesh))(
            jax.random.key(0))
        logits = jax.jit(apply)(sharded, jax.device_put(ids, batch_sharding(mesh, 2)))
    for a, b in zip(jax.tree.leaves(nn.unbox(one)), jax.tree.leaves(nn.unbox(sharded))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    diff = float(np.max(np.abs(np.asarray(logits) - reference)))
    assert diff <= 1e-5, diff
    print("OK", diff)
    """
)


def test_sharded_init_and_forward_on_eight_devices_match_one_device():
    env = dict(os.environ, XLA_FLAGS=forced_devices(8), JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", _EIGHT_DEVICES], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK" in result.stdout
