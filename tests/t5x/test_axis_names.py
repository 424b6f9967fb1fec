"""Every logical axis name tw_jax's modules emit has a rule on T5X's mesh and, for parameters, an
Adafactor factor rule: a name T5X's tables do not know would be silently replicated (sharding)
or a KeyError (Adafactor)."""

from __future__ import annotations

from dataclasses import replace

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest

pytest.importorskip("t5x")

from tw_jax.models import (  # noqa: E402
    BARTConfig,
    GPT2Config,
    KAdapterConfig,
    LoRAConfig,
    ModularConfig,
    T5Config,
    model_for,
)
from tw_jax.t5x import factor_rules, logical_axis_rules  # noqa: E402
from tw_jax.t5x.partitioning import translate_rules  # noqa: E402

GPT2 = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=3, n_head=2)
T5 = T5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=3, num_heads=2)
BART = BARTConfig(vocab_size=64, max_position_embeddings=32, d_model=16, encoder_layers=2,
                  decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                  encoder_ffn_dim=32, decoder_ffn_dim=32)
SMALL_MODULAR = ModularConfig(d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2)

CONFIGS = {
    "gpt2": GPT2, "gpt2-lora": replace(GPT2, lora=LoRAConfig()),
    "gpt2-kadapter": replace(GPT2, kadapter=KAdapterConfig()),
    "t5": T5, "t5-lora": replace(T5, lora=LoRAConfig()),
    "t5-kadapter": replace(T5, kadapter=KAdapterConfig()),
    "t5-modular": replace(T5, modular=SMALL_MODULAR),
    "bart": BART, "bart-lora": replace(BART, lora=LoRAConfig()),
}


def emitted_names(config, monkeypatch) -> tuple[set[str], set[str]]:
    """``(parameter axis names, activation axis names)`` of a forward pass and a decode step."""
    activations: set[str] = set()
    original = nn.with_logical_constraint

    def recording(x, logical_axis_resources, *args, **kwargs):
        activations.update(n for n in logical_axis_resources if n is not None)
        return original(x, logical_axis_resources, *args, **kwargs)

    monkeypatch.setattr(nn, "with_logical_constraint", recording)
    model = model_for(config)
    boxed = model.abstract_variables(2, 8)
    params = {
        name for leaf in jax.tree.leaves(boxed, is_leaf=lambda x: isinstance(x, nn.Partitioned))
        if isinstance(leaf, nn.Partitioned) for name in leaf.names if name is not None
    }
    zeros = jnp.zeros((2, 8), jnp.int32)
    batch = {"encoder_input_tokens": zeros, "encoder_mask": zeros + 1,
             "decoder_input_tokens": zeros, "decoder_mask": zeros + 1}
    jax.eval_shape(lambda p: model.logits(p, batch, deterministic=False,
                                          rng=jax.random.key(0)), nn.unbox(boxed["params"]))
    return params, activations


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_t5x_rules_map_every_name_a_module_emits(name, monkeypatch):
    params, activations = emitted_names(CONFIGS[name], monkeypatch)
    assert params and activations
    rules = dict(logical_axis_rules())
    assert sorted((params | activations) - set(rules)) == []
    assert sorted(params - set(factor_rules())) == []
    for axes in rules.values():  # only T5X's two mesh axes, each at most once
        axes = axes if isinstance(axes, tuple) else (axes,)
        assert set(axes) <= {"data", "model", None} and len(set(axes)) == len(axes)


def test_fsdp_becomes_the_data_axis_only_with_two_dimensional_parameter_partitioning():
    rules = [("batch", ("data", "fsdp")), ("embed", "fsdp"), ("mlp", "model"), ("kv", None)]
    assert translate_rules(rules) == [("batch", "data"), ("embed", None), ("mlp", "model"),
                                      ("kv", None)]
    assert translate_rules(rules, parameter_partitioning_dims=2) == [
        ("batch", "data"), ("embed", "data"), ("mlp", "model"), ("kv", None)]
    with pytest.raises(ValueError, match="1 or 2"):
        translate_rules(rules, parameter_partitioning_dims=3)
