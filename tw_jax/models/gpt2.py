"""GPT-2 as a Flax linen model, readable top to bottom: config, attention, MLP, block, model.

TemporalWiki continually trains GPT-2 Large. The layout follows MaxText/T5X: the config is a plain
frozen dataclass (data, not code), every parameter carries logical axis names (see ``sharding.py``),
the main activations are constrained with logical names, and decoding keeps keys and values in the
linen ``cache`` collection so that one call runs a whole prefix or a single step.

Query, key and value are separate ``(embed, heads, kv)`` kernels rather than Hugging Face's fused
``c_attn``: that shards per head and lets LoRA (on W_q and W_v) wrap one projection alone.
``hf_io.py`` splits and re-fuses ``c_attn`` exactly.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from tw_jax.models import decode_cache
from tw_jax.models.layers import (
    EMBED_AXES,
    HEADS_AXES,
    DenseGeneral,
    activations,
    add_residual,
    attend,
    attention_key_value,
    dense,
    embed,
    feed_forward,
    kadapter_output,
    layer_norm,
)
from tw_jax.models.variants import KAdapterConfig, LoRAConfig

ACTIVATIONS = activations("gelu_new", "gelu_pytorch_tanh", "gelu", "relu")


@dataclasses.dataclass(frozen=True)
class GPT2Config:
    """Everything that fixes a GPT-2's shapes and numerics; hashable so jit can key on it."""

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None  # MLP width; None means 4 * n_embd, as in Hugging Face.
    layer_norm_epsilon: float = 1e-5
    activation: str = "gelu_new"
    dropout_rate: float = 0.1
    initializer_range: float = 0.02
    dtype: str = "float32"  # compute dtype; "bfloat16" on accelerators.
    param_dtype: str = "float32"
    remat: bool = False  # rematerialise each block in the backward pass (saves activation memory).
    bos_token_id: int = 50256
    eos_token_id: int = 50256
    # Continual-learning variants (see variants.py) and which base parameters train.
    lora: LoRAConfig | None = None
    kadapter: KAdapterConfig | None = None
    freeze: str | None = None  # "none" | "base"; None: "base" with a variant, else "none".

    model_type = "gpt2"

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def mlp_dim(self) -> int:
        return self.n_inner or 4 * self.n_embd

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unsupported activation {self.activation!r}; known: {sorted(ACTIVATIONS)}")

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], **overrides: Any) -> GPT2Config:
        """Read a Hugging Face GPT-2 ``config.json`` (as a dict); refuse options we do not model."""
        if hf.get("model_type", "gpt2") != "gpt2":
            raise ValueError(f"not a GPT-2 config: model_type={hf.get('model_type')!r}")
        unsupported = {
            "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": False,
            "reorder_and_upcast_attn": False,
        }
        for key, expected in unsupported.items():
            if hf.get(key, expected) != expected:
                raise ValueError(f"GPT-2 option {key}={hf[key]!r} is not supported")
        eos = hf.get("eos_token_id")
        eos = 50256 if eos is None else eos
        bos = hf.get("bos_token_id")
        fields = dict(
            vocab_size=hf["vocab_size"],
            n_positions=hf.get("n_positions", 1024),
            n_embd=hf.get("n_embd", 768),
            n_layer=hf.get("n_layer", 12),
            n_head=hf.get("n_head", 12),
            n_inner=hf.get("n_inner"),
            layer_norm_epsilon=hf.get("layer_norm_epsilon", 1e-5),
            activation=hf.get("activation_function", "gelu_new"),
            dropout_rate=hf.get("resid_pdrop", 0.1),
            initializer_range=hf.get("initializer_range", 0.02),
            bos_token_id=eos if bos is None else bos,
            eos_token_id=eos,
        )
        fields.update(overrides)
        return cls(**fields)

    def to_hf_config(self) -> dict[str, Any]:
        """The Hugging Face ``config.json`` that describes this model (for export)."""
        return {
            "architectures": ["GPT2LMHeadModel"],
            "model_type": "gpt2",
            "vocab_size": self.vocab_size,
            "n_positions": self.n_positions,
            "n_embd": self.n_embd,
            "n_layer": self.n_layer,
            "n_head": self.n_head,
            "n_inner": self.n_inner,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "activation_function": self.activation,
            "resid_pdrop": self.dropout_rate,
            "embd_pdrop": self.dropout_rate,
            "attn_pdrop": self.dropout_rate,
            "initializer_range": self.initializer_range,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "tie_word_embeddings": True,
            "torch_dtype": "float32",
        }


def _layer_norm(config: GPT2Config, name: str) -> nn.LayerNorm:
    return layer_norm(
        config.layer_norm_epsilon, jnp.dtype(config.dtype), jnp.dtype(config.param_dtype), name
    )


def _dense(
    config: GPT2Config, features: tuple[int, ...], axes: tuple[str, ...], name: str,
    n_axes: int = 1, init_scale: float = 1.0,
) -> DenseGeneral:
    """A biased projection; LoRA wraps it when the config's LoRA targets its name."""
    return dense(config, features, axes, config.initializer_range * init_scale, name,
                 n_axes=n_axes, use_bias=True)


class Attention(nn.Module):
    """Causal multi-head self-attention; in decode mode keys/values go to the ``cache`` collection.

    ``mask`` is ``(batch, 1, q_len, kv_len)`` booleans made once by the model; ``cache_index`` is where
    this call's keys are written (decode mode only). The cache holds ``max_length`` positions, fixed
    by the first (initialising) call, so the decode loop has static shapes.
    """

    config: GPT2Config

    @nn.compact
    def __call__(
        self, x: jax.Array, mask: jax.Array, cache_index: jax.Array | None, decode: bool,
        deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)

        def projected(name: str, source: jax.Array) -> jax.Array:
            projection = _dense(cfg, (cfg.n_head, cfg.head_dim), ("embed", "heads", "kv"), name)
            return nn.with_logical_constraint(projection(source), HEADS_AXES)

        query = projected("query", x)
        key, value = attention_key_value(self, projected, x, None, cross=False,
                                         cache_index=cache_index, decode=decode)
        out = attend(query, key, value, mask, dropout_rate=cfg.dropout_rate,
                     deterministic=deterministic, dtype=dtype,
                     divide_by=jnp.sqrt(jnp.float32(cfg.head_dim)))
        return _dense(
            cfg, (cfg.n_embd,), ("heads", "kv", "embed"), "out", n_axes=2,
            init_scale=(2 * cfg.n_layer) ** -0.5,
        )(out)


class MLP(nn.Module):
    """The position-wise feed-forward network: ``c_proj(act(c_fc(x)))``."""

    config: GPT2Config

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool) -> jax.Array:
        cfg = self.config
        return feed_forward(
            x, [_dense(cfg, (cfg.mlp_dim,), ("embed", "mlp"), "c_fc")],
            _dense(cfg, (cfg.n_embd,), ("mlp", "embed"), "c_proj",
                   init_scale=(2 * cfg.n_layer) ** -0.5),
            ACTIVATIONS[cfg.activation],
        )


class Block(nn.Module):
    """One pre-LayerNorm transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    config: GPT2Config

    @nn.compact
    def __call__(
        self, x: jax.Array, mask: jax.Array, cache_index: jax.Array | None, decode: bool,
        deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        h = Attention(cfg, name="attn")(
            _layer_norm(cfg, "ln_1")(x), mask, cache_index, decode, deterministic
        )
        x = add_residual(x, h, nn.Dropout(cfg.dropout_rate), deterministic)
        h = MLP(cfg, name="mlp")(_layer_norm(cfg, "ln_2")(x), deterministic)
        return add_residual(x, h, nn.Dropout(cfg.dropout_rate), deterministic)


class KAdapter(nn.Module):
    """K-Adapter on the decoder stack: GPT-2 blocks fed from tapped hidden states, chained.

    Adapter ``i`` reads ``tapped[i] + previous adapter output``; the result is added to the base
    model's final hidden state as ``0.1 * LayerNorm(adapter output)``. The adapter blocks are full
    causal GPT-2 blocks with their own key/value caches, so decoding runs them step by step too.
    """

    config: GPT2Config

    @nn.compact
    def __call__(
        self, base: jax.Array, tapped: list[jax.Array], mask: jax.Array,
        cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        block = nn.remat(Block, static_argnums=(4, 5)) if cfg.remat else Block
        return kadapter_output(
            base, tapped,
            lambda i, h: block(cfg, name=f"adapter_{i}")(h, mask, cache_index, decode, deterministic),
            cfg.kadapter, jnp.dtype(cfg.dtype), jnp.dtype(cfg.param_dtype),
        )


class GPT2(nn.Module):
    """GPT-2 language model with learned positions and an LM head tied to the token embedding.

    Call with ``input_ids`` ``(batch, length)``; returns float32 logits ``(batch, length, vocab)``.
    ``attention_mask`` (1 = real token) hides padding keys; ``positions`` default to ``0..length-1``
    (or, in decode mode, continue from the cache index); ``segment_ids`` with ``positions`` (each
    example's own, from 0) describe packed rows. With ``decode=True`` the first call
    creates an empty cache sized by its input (see ``decoding.init_cache``); later calls append a prefix
    or one step to it.
    """

    config: GPT2Config

    @nn.compact
    def __call__(
        self,
        input_ids: jax.Array,
        positions: jax.Array | None = None,
        attention_mask: jax.Array | None = None,
        decode: bool = False,
        deterministic: bool = True,
        segment_ids: jax.Array | None = None,
    ) -> jax.Array:
        cfg = self.config
        causal = decode_cache.causal_mask(self, attention_mask, input_ids.shape, decode,
                                          segment_ids)
        mask, cache_index = causal.mask, causal.cache_index
        if positions is None:
            positions = jnp.broadcast_to(causal.query_pos, input_ids.shape)

        std = cfg.initializer_range
        wte = embed(cfg, cfg.vocab_size, cfg.n_embd, std, ("vocab", "embed"), "wte")
        wpe = embed(cfg, cfg.n_positions, cfg.n_embd, std, ("position", "embed"), "wpe")
        x = wte(input_ids) + wpe(positions)
        x = nn.Dropout(cfg.dropout_rate)(x, deterministic=deterministic)
        x = nn.with_logical_constraint(x, EMBED_AXES)

        block = nn.remat(Block, static_argnums=(4, 5)) if cfg.remat else Block
        taps = cfg.kadapter.tap_layers(cfg.n_layer) if cfg.kadapter is not None else ()
        tapped = []
        for i in range(cfg.n_layer):
            x = block(cfg, name=f"h_{i}")(x, mask, cache_index, decode, deterministic)
            if i in taps:
                tapped.append(x)

        x = _layer_norm(cfg, "ln_f")(x)
        if cfg.kadapter is not None:
            x = KAdapter(cfg, name="kadapter")(x, tapped, mask, cache_index, decode, deterministic)
        logits = wte.attend(x).astype(jnp.float32)
        return nn.with_logical_constraint(logits, ("batch", "length", "activation_vocab"))
