"""A third model family, written as a user would add one: a decoder-only transformer with rotary
positions, RMSNorm, no biases and an untied LM head (Llama-style), in one module plus one gin
file (``rope_tiny.gin``). It is registered with the model protocol and otherwise reaches the
trainer, the evaluators and ``tw-jax eval``/``infer`` unchanged. Its pieces are the shared ones of
:mod:`tw_jax.models.layers` (projections with LoRA, the key/value cache, initialisers)."""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import gin
import jax
import jax.numpy as jnp

from tw_jax.models import DecoderOnlyModel, LoRAConfig, register_family
from tw_jax.models.decode_cache import causal_mask
from tw_jax.models.flop_layout import DECODER, Part
from tw_jax.models.layers import (
    DenseGeneral,
    attend,
    cached_key_value,
    feed_forward,
    normal_init,
)


@dataclasses.dataclass(frozen=True)
class RopeConfig:
    vocab_size: int = 50257
    n_positions: int = 256
    d_model: int = 64
    n_layer: int = 2
    n_head: int = 4
    mlp_dim: int = 128
    rope_base: float = 10_000.0
    initializer_range: float = 0.02
    dropout_rate: float = 0.0
    dtype: str = "float32"
    param_dtype: str = "float32"
    remat: bool = False
    eos_token_id: int = 50256
    lora: LoRAConfig | None = None
    freeze: str | None = None

    model_type = "rope_gpt"

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


gin.external_configurable(RopeConfig, module="rope_family")


def _dense(cfg: RopeConfig, features: tuple[int, ...], axes: tuple[str, ...], name: str,
           n_axes: int = 1) -> DenseGeneral:
    lora = cfg.lora if cfg.lora is not None and cfg.lora.applies_to(name) else None
    return DenseGeneral(features, axes, cfg.initializer_range, n_axes=n_axes,
                        dtype=jnp.dtype(cfg.dtype), param_dtype=jnp.dtype(cfg.param_dtype),
                        lora=lora, name=name)


def _rotate(x: jax.Array, positions: jax.Array, base: float) -> jax.Array:
    """Rotary position embedding of ``(batch, length, heads, head_dim)`` at ``positions``."""
    half = x.shape[-1] // 2
    freq = base ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angle = positions[..., None].astype(jnp.float32) * freq  # (batch, length, half)
    cos, sin = jnp.cos(angle)[:, :, None, :], jnp.sin(angle)[:, :, None, :]
    a, b = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], -1).astype(x.dtype)


class RMSNorm(nn.Module):
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        scale = self.param("scale", nn.with_logical_partitioning(nn.initializers.ones, ("norm",)),
                           (x.shape[-1],))
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-6)
        return (normed * scale).astype(self.dtype)


class Block(nn.Module):
    config: RopeConfig

    @nn.compact
    def __call__(self, x, mask, positions, cache_index, decode):
        cfg = self.config
        h = RMSNorm(jnp.dtype(cfg.dtype), name="attn_norm")(x)
        q, k, v = (_dense(cfg, (cfg.n_head, cfg.head_dim), ("embed", "heads", "kv"), n)(h)
                   for n in ("query", "key", "value"))
        q, k = _rotate(q, positions, cfg.rope_base), _rotate(k, positions, cfg.rope_base)
        if decode:
            k, v = cached_key_value(self, k, v, cache_index)
        out = attend(q, k, v, mask, dropout_rate=0.0, deterministic=True, dtype=q.dtype,
                     divide_by=jnp.sqrt(jnp.float32(cfg.head_dim)))
        x = x + _dense(cfg, (cfg.d_model,), ("heads", "kv", "embed"), "out", n_axes=2)(out)
        h = RMSNorm(jnp.dtype(cfg.dtype), name="mlp_norm")(x)
        return x + feed_forward(
            h, [_dense(cfg, (cfg.mlp_dim,), ("embed", "mlp"), n) for n in ("gate", "up")],
            _dense(cfg, (cfg.d_model,), ("mlp", "embed"), "down"), jax.nn.silu,
        )


class RopeGPT(nn.Module):
    """Same call as GPT-2: ``(input_ids, positions=None, attention_mask=None, decode=False,
    deterministic=True, segment_ids=None)``, with the decode cache in the ``cache``
    collection."""

    config: RopeConfig

    @nn.compact
    def __call__(self, input_ids, positions=None, attention_mask=None, decode=False,
                 deterministic=True, segment_ids=None):
        cfg = self.config
        batch, length = input_ids.shape
        # the decode cache's bookkeeping and packed rows' masks, as GPT-2's: a new family reuses
        # them (a packed batch brings each example's positions, so its rotations restart too)
        mask, query_pos, _, cache_index = causal_mask(self, attention_mask, (batch, length),
                                                      decode, segment_ids)
        if positions is None:
            positions = jnp.broadcast_to(query_pos, (batch, length))
        embed = nn.Embed(cfg.vocab_size, cfg.d_model, dtype=jnp.dtype(cfg.dtype),
                         embedding_init=normal_init(cfg.initializer_range, ("vocab", "embed")),
                         name="embed")
        x = embed(input_ids)
        for i in range(cfg.n_layer):
            x = Block(cfg, name=f"layer_{i}")(x, mask, positions, cache_index, decode)
        x = RMSNorm(jnp.dtype(cfg.dtype), name="final_norm")(x)
        logits = _dense(cfg, (cfg.vocab_size,), ("embed", "vocab"), "lm_head")(x)
        return logits.astype(jnp.float32)


@register_family
class RopeModel(DecoderOnlyModel):
    config_class = RopeConfig
    module_class = RopeGPT
    model_type = "rope_gpt"
    objective = "lm"  # trains on the LM DiffSets, like GPT-2
    vocabulary_kind = "gpt2"

    @classmethod
    def load_hf(cls, folder: str, **overrides: Any) -> tuple[Any, Any]:
        raise NotImplementedError("no Hugging Face checkpoints of this toy family")

    def save_hf(self, folder: str, params: Any) -> None:
        raise NotImplementedError("no Hugging Face checkpoints of this toy family")

    def answer_text(self, text: str) -> str:
        return text.strip().split("\n", 1)[0].strip()

    def flop_layout(self):
        cfg = self.config
        layers = [f"layer_{i}" for i in range(cfg.n_layer)]
        parts = {"embed": Part(set())}
        for i, name in enumerate(layers):
            parts[name] = Part({"embed", *layers[:i]}, attention=[(DECODER, DECODER, cfg.d_model)])
        parts["final_norm"] = Part({"embed", *layers})
        parts["lm_head"] = Part(set(parts))

        def locate(names):
            matmul = names[-1] in ("kernel", "lora_a", "lora_b")
            return [(names[0], DECODER, matmul and names[0] != "embed")]

        return parts, locate
