"""The GPT-2 module: shapes from config, logical axes on every parameter, the KV cache."""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tw_jax.models import abstract_variables, count_params, decoding
from tw_jax.models.gpt2 import GPT2, GPT2Config
from tw_jax.models.sharding import LOGICAL_AXIS_RULES


def test_gpt2_large_parameter_count_from_shapes_alone():
    config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=1280, n_layer=36, n_head=20)
    assert count_params(config).total == 774_030_080


def test_every_parameter_has_logical_axes_known_to_the_rules(tiny_config):
    boxed = abstract_variables(tiny_config)["params"]
    leaves = jax.tree.leaves(boxed, is_leaf=lambda x: isinstance(x, nn.Partitioned))
    known = {name for name, _ in LOGICAL_AXIS_RULES}
    assert leaves and all(isinstance(leaf, nn.Partitioned) for leaf in leaves)
    for leaf in leaves:
        assert len(leaf.names) == leaf.value.ndim
        assert set(leaf.names) <= known


def test_from_hf_config_reads_and_refuses():
    hf = {"model_type": "gpt2", "vocab_size": 100, "n_positions": 64, "n_embd": 32, "n_layer": 2,
          "n_head": 4, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
          "eos_token_id": 99, "bos_token_id": 98}
    config = GPT2Config.from_hf_config(hf, dtype="bfloat16")
    assert (config.n_embd, config.mlp_dim, config.head_dim) == (32, 128, 8)
    assert (config.bos_token_id, config.eos_token_id, config.dtype) == (98, 99, "bfloat16")
    assert GPT2Config.from_hf_config(config.to_hf_config()) == dataclasses.replace(
        config, dtype="float32"
    )
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        GPT2Config.from_hf_config({**hf, "scale_attn_by_inverse_layer_idx": True})
    with pytest.raises(ValueError, match="activation"):
        GPT2Config.from_hf_config({**hf, "activation_function": "swish"})


def test_kv_cache_prefix_then_steps_equals_full_recompute(tiny_model):
    model, params = tiny_model
    tokens = jnp.asarray(np.random.RandomState(1).randint(0, 100, (2, 12)), jnp.int32)
    full = jax.jit(model.apply)({"params": params}, tokens)
    cache = decoding.init_cache(model, params, 2, 12)
    pieces = []
    step = jax.jit(decoding.decode_step, static_argnums=0)
    for start, stop in [(0, 5), (5, 6), (6, 7), (7, 12)]:  # a prefix, single steps, a chunk
        positions = jnp.broadcast_to(jnp.arange(start, stop), (2, stop - start))
        logits, cache = step(model, params, cache, tokens[:, start:stop], positions)
        pieces.append(logits)
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, atol=1e-5, rtol=0)
    assert int(cache["cache_index"]) == 12


def test_remat_and_bfloat16_variants_run(tiny_config, tiny_model):
    _, params = tiny_model
    tokens = jnp.arange(10, dtype=jnp.int32)[None]
    reference = jax.jit(GPT2(tiny_config).apply)({"params": params}, tokens)
    remat = GPT2(dataclasses.replace(tiny_config, remat=True))
    np.testing.assert_allclose(
        jax.jit(remat.apply)({"params": params}, tokens), reference, atol=1e-6
    )
    loss = lambda p: remat.apply({"params": p}, tokens).mean()  # noqa: E731
    grads = jax.jit(jax.grad(loss))(params)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
    bf16 = GPT2(dataclasses.replace(tiny_config, dtype="bfloat16"))
    logits = jax.jit(bf16.apply)({"params": params}, tokens)
    assert logits.dtype == jnp.float32
    assert float(jnp.max(jnp.abs(logits - reference))) < 0.5
