"""BART as a Flax linen model, readable top to bottom: config, layers, encoder, decoder, model.

ECBD evaluates BART-large zero-shot (Onoe et al. 2022, Section 3: "We evaluate T5-large (Raffel
et al., 2020), BART-large (Lewis et al., 2020), and GPT-Neo"). The layout follows ``t5.py``: a
frozen hashable config, logical axis names on every parameter and main activation, the decoder's
self-attention keys/values in the linen ``cache`` collection and, in decode mode, the
cross-attention keys/values cached by the first call (which passes the encoder output).

What makes it BART rather than T5 (the numbers are Hugging Face's ``BartForConditionalGeneration``,
which the parity tests hold us to):

- learned absolute positions, one table per stack, looked up at ``position + 2``: fairseq reserved
  the first two rows for its padding scheme and Hugging Face kept the offset, so a table has
  ``max_position_embeddings + 2`` rows;
- token embeddings optionally scaled by ``sqrt(d_model)`` (``scale_embedding``; off for BART);
- ``layernorm_embedding`` over token + position embeddings, then *post*-LN layers
  (``x = norm(x + sublayer(x))``) with biased projections, GELU and attention scaled by
  ``1/sqrt(head_dim)``; no final norm after the last layer;
- a token embedding shared by encoder, decoder and the tied LM head, plus ``final_logits_bias``
  (a buffer in Hugging Face, zero in released checkpoints; a parameter here that the model object
  always labels frozen, so training never moves it);
- decoding starts from ``decoder_start_token_id`` (BART: the EOS id, 2) and teacher forcing feeds
  the targets shifted right after it, as Hugging Face's ``shift_tokens_right``
  (:func:`shift_tokens_right`).

Variants: LoRA wraps any named projection as in GPT-2 and T5; K-Adapter and Modular are refused
(a one-line :class:`~tw_jax.errors.UsageError`): no paper here trains BART with them.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.errors import UsageError
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
    layer_norm,
)
from tw_jax.models.variants import KAdapterConfig, LoRAConfig, ModularConfig

# fairseq's learned positions start at ``padding_idx + 1 = 2``; Hugging Face adds the same offset.
POSITION_OFFSET = 2

ACTIVATIONS = activations("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")

# Keys of older BART config.json files that select architectures Hugging Face's BART no longer
# builds; a value other than the one given would describe another model (mBART-style pre-LN).
_FIXED_OPTIONS = {"normalize_before": False, "add_final_layer_norm": False,
                  "add_bias_logits": False, "static_position_embeddings": False,
                  "normalize_embedding": True}


@dataclasses.dataclass(frozen=True)
class BARTConfig:
    """Everything that fixes a BART's shapes and numerics; hashable so jit can key on it.

    Field names follow Hugging Face's ``BartConfig`` except ``dropout_rate`` (its ``dropout``), as
    in the other families. Defaults are Hugging Face's, i.e. BART-large's shapes.
    """

    vocab_size: int = 50265
    max_position_embeddings: int = 1024
    d_model: int = 1024
    encoder_layers: int = 12
    decoder_layers: int = 12
    encoder_attention_heads: int = 16
    decoder_attention_heads: int = 16
    encoder_ffn_dim: int = 4096
    decoder_ffn_dim: int = 4096
    activation_function: str = "gelu"
    dropout_rate: float = 0.1  # residual branches and embeddings
    attention_dropout: float = 0.0  # attention probabilities
    activation_dropout: float = 0.0  # the feed-forward hidden units
    init_std: float = 0.02
    layer_norm_epsilon: float = 1e-5  # torch.nn.LayerNorm's default, which Hugging Face uses
    scale_embedding: bool = False  # multiply token embeddings by sqrt(d_model)
    tie_word_embeddings: bool = True  # False: a separate lm_head kernel
    dtype: str = "float32"  # compute dtype; "bfloat16" on accelerators.
    param_dtype: str = "float32"
    remat: bool = False  # rematerialise each layer in the backward pass (saves activation memory).
    pad_token_id: int = 1
    bos_token_id: int = 0
    eos_token_id: int = 2
    decoder_start_token_id: int = 2
    # Continual-learning variants: LoRA only (see the module docstring).
    lora: LoRAConfig | None = None
    kadapter: KAdapterConfig | None = None
    modular: ModularConfig | None = None
    freeze: str | None = None  # "none" | "base"; None: "base" with LoRA, else "none".

    model_type = "bart"

    def __post_init__(self) -> None:
        for name, label in (("kadapter", "K-Adapter"), ("modular", "Modular")):
            if getattr(self, name) is not None:
                raise UsageError(f"{label} is not supported on the BART family (bart); use LoRA "
                                 "or full training, or a T5 or GPT-2 model for this method")
        for heads, what in ((self.encoder_attention_heads, "encoder_attention_heads"),
                            (self.decoder_attention_heads, "decoder_attention_heads")):
            if self.d_model % heads:
                raise ValueError(f"d_model={self.d_model} is not divisible by {what}={heads}")
        if self.activation_function not in ACTIVATIONS:
            raise ValueError(f"unsupported activation {self.activation_function!r}; known: "
                             f"{sorted(ACTIVATIONS)}")

    @property
    def position_rows(self) -> int:
        """Rows of each position table: the positions plus fairseq's offset."""
        return self.max_position_embeddings + POSITION_OFFSET

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], **overrides: Any) -> BARTConfig:
        """Read a Hugging Face BART ``config.json`` (as a dict); refuse options we do not model."""
        if hf.get("model_type", "bart") != "bart":
            raise ValueError(f"not a BART config: model_type={hf.get('model_type')!r}")
        for key, expected in _FIXED_OPTIONS.items():
            if key in hf and bool(hf[key]) != expected:
                raise ValueError(f"BART option {key}={hf[key]!r} is not supported (only "
                                 f"{key}={expected}, as facebook/bart-* checkpoints have)")
        for key in ("encoder_layerdrop", "decoder_layerdrop"):
            if hf.get(key):
                logging.warning("BART %s=%s is not modelled: every layer always runs", key, hf[key])

        def token(key: str, default: int) -> int:
            value = hf.get(key, default)
            value = value[0] if isinstance(value, list) else value
            return default if value is None else int(value)

        tie = hf.get("tie_word_embeddings", True)
        fields = dict(
            vocab_size=hf.get("vocab_size", 50265),
            max_position_embeddings=hf.get("max_position_embeddings", 1024),
            d_model=hf.get("d_model", 1024),
            encoder_layers=hf.get("encoder_layers", 12),
            decoder_layers=hf.get("decoder_layers", 12),
            encoder_attention_heads=hf.get("encoder_attention_heads", 16),
            decoder_attention_heads=hf.get("decoder_attention_heads", 16),
            encoder_ffn_dim=hf.get("encoder_ffn_dim", 4096),
            decoder_ffn_dim=hf.get("decoder_ffn_dim", 4096),
            activation_function=hf.get("activation_function", "gelu"),
            dropout_rate=float(hf.get("dropout", 0.1) or 0.0),
            attention_dropout=float(hf.get("attention_dropout", 0.0) or 0.0),
            activation_dropout=float(hf.get("activation_dropout", 0.0) or 0.0),
            init_std=hf.get("init_std", 0.02),
            scale_embedding=bool(hf.get("scale_embedding", False)),
            tie_word_embeddings=True if tie is None else bool(tie),
            pad_token_id=token("pad_token_id", 1),
            bos_token_id=token("bos_token_id", 0),
            eos_token_id=token("eos_token_id", 2),
            decoder_start_token_id=token("decoder_start_token_id", 2),
        )
        fields.update(overrides)
        return cls(**fields)

    def to_hf_config(self) -> dict[str, Any]:
        """The Hugging Face ``config.json`` that describes this model (for export).

        ``forced_eos_token_id`` is written as None: our decoding never forces EOS at the length
        limit, so a model exported here decodes the same under Hugging Face's ``generate``.
        """
        return {
            "architectures": ["BartForConditionalGeneration"],
            "model_type": "bart",
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "d_model": self.d_model,
            "encoder_layers": self.encoder_layers,
            "decoder_layers": self.decoder_layers,
            "encoder_attention_heads": self.encoder_attention_heads,
            "decoder_attention_heads": self.decoder_attention_heads,
            "encoder_ffn_dim": self.encoder_ffn_dim,
            "decoder_ffn_dim": self.decoder_ffn_dim,
            "activation_function": self.activation_function,
            "dropout": self.dropout_rate,
            "attention_dropout": self.attention_dropout,
            "activation_dropout": self.activation_dropout,
            "encoder_layerdrop": 0.0,
            "decoder_layerdrop": 0.0,
            "init_std": self.init_std,
            "scale_embedding": self.scale_embedding,
            "tie_word_embeddings": self.tie_word_embeddings,
            "is_encoder_decoder": True,
            "pad_token_id": self.pad_token_id,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "decoder_start_token_id": self.decoder_start_token_id,
            "forced_eos_token_id": None,
            "torch_dtype": "float32",
        }


def shift_tokens_right(ids: Any, pad_token_id: int, decoder_start_token_id: int) -> np.ndarray:
    """Hugging Face's ``shift_tokens_right``: the start id, then ``ids[:, :-1]``, with the label
    mask value -100 replaced by the pad id (decoder inputs of teacher forcing)."""
    ids = np.asarray(ids)
    shifted = np.empty_like(ids)
    shifted[:, 1:] = ids[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return np.where(shifted == -100, pad_token_id, shifted)


def _layer_norm(config: BARTConfig, name: str) -> nn.LayerNorm:
    return layer_norm(config.layer_norm_epsilon, jnp.dtype(config.dtype),
                      jnp.dtype(config.param_dtype), name)


def _dense(config: BARTConfig, features: tuple[int, ...], axes: tuple[str, ...], name: str,
           n_axes: int = 1) -> DenseGeneral:
    """A biased projection initialised N(0, init_std); LoRA wraps it when targeted by name."""
    return dense(config, features, axes, config.init_std, name, n_axes=n_axes, use_bias=True)


def _positions(config: BARTConfig, name: str) -> nn.Embed:
    return embed(config, config.position_rows, config.d_model, config.init_std,
                 ("position", "embed"), name)


def _check_length(config: BARTConfig, length: int, what: str) -> None:
    if length > config.max_position_embeddings:
        raise ValueError(f"BART reads at most max_position_embeddings="
                         f"{config.max_position_embeddings} {what} positions, got {length}")


class Attention(nn.Module):
    """Multi-head attention scaled by ``1/sqrt(head_dim)``; self-attention or cross-attention.

    ``mask`` is ``(batch, 1, q_len, kv_len)`` booleans. In decode mode self-attention appends its
    keys/values to the cache at ``cache_index``; cross-attention stores the keys/values of ``kv``
    and reuses them when ``kv`` is None.
    """

    config: BARTConfig
    num_heads: int
    cross: bool = False

    @nn.compact
    def __call__(
        self, x: jax.Array, kv: jax.Array | None, mask: jax.Array,
        cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        head_dim = cfg.d_model // self.num_heads

        def projected(name: str, source: jax.Array) -> jax.Array:
            projection = _dense(cfg, (self.num_heads, head_dim), ("embed", "heads", "kv"), name)
            return nn.with_logical_constraint(projection(source), HEADS_AXES)

        query = projected("query", x)
        key, value = attention_key_value(self, projected, x, kv, cross=self.cross,
                                         cache_index=cache_index, decode=decode)
        out = attend(query, key, value, mask, dropout_rate=cfg.attention_dropout,
                     deterministic=deterministic, dtype=jnp.dtype(cfg.dtype),
                     divide_by=jnp.sqrt(jnp.float32(head_dim)))
        return _dense(cfg, (cfg.d_model,), ("heads", "kv", "embed"), "out", n_axes=2)(out)


def _feed_forward(cfg: BARTConfig, x: jax.Array, ffn_dim: int, deterministic: bool) -> jax.Array:
    """``fc2(dropout(act(fc1(x))))``: call inside a compact layer (the projections are its own)."""
    return feed_forward(
        x, [_dense(cfg, (ffn_dim,), ("embed", "mlp"), "fc1")],
        _dense(cfg, (cfg.d_model,), ("mlp", "embed"), "fc2"),
        ACTIVATIONS[cfg.activation_function], dropout_rate=cfg.activation_dropout,
        deterministic=deterministic,
    )


class EncoderLayer(nn.Module):
    """Post-LN: ``x = norm(x + attn(x))``, then ``x = norm(x + ffn(x))``."""

    config: BARTConfig

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, deterministic: bool) -> jax.Array:
        cfg = self.config
        drop = nn.Dropout(cfg.dropout_rate)
        h = Attention(cfg, cfg.encoder_attention_heads, name="self_attn")(
            x, None, mask, None, False, deterministic)
        x = add_residual(x, h, drop, deterministic, _layer_norm(cfg, "self_attn_layer_norm"))
        h = _feed_forward(cfg, x, cfg.encoder_ffn_dim, deterministic)
        return add_residual(x, h, drop, deterministic, _layer_norm(cfg, "final_layer_norm"))


class DecoderLayer(nn.Module):
    """Post-LN causal self-attention, cross-attention over the encoder output, then the FFN."""

    config: BARTConfig

    @nn.compact
    def __call__(
        self, x: jax.Array, encoded: jax.Array | None, self_mask: jax.Array,
        cross_mask: jax.Array, cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        drop = nn.Dropout(cfg.dropout_rate)
        heads = cfg.decoder_attention_heads
        h = Attention(cfg, heads, name="self_attn")(
            x, None, self_mask, cache_index, decode, deterministic)
        x = add_residual(x, h, drop, deterministic, _layer_norm(cfg, "self_attn_layer_norm"))
        h = Attention(cfg, heads, cross=True, name="encoder_attn")(
            x, encoded, cross_mask, None, decode, deterministic)
        x = add_residual(x, h, drop, deterministic, _layer_norm(cfg, "encoder_attn_layer_norm"))
        h = _feed_forward(cfg, x, cfg.decoder_ffn_dim, deterministic)
        return add_residual(x, h, drop, deterministic, _layer_norm(cfg, "final_layer_norm"))


class Encoder(nn.Module):
    """Token embeddings ``(batch, length, d_model)`` (already scaled) to the encoder output."""

    config: BARTConfig

    @nn.compact
    def __call__(self, x: jax.Array, attention_mask: jax.Array, deterministic: bool,
                 segment_ids: jax.Array | None = None,
                 positions: jax.Array | None = None) -> jax.Array:
        cfg = self.config
        batch, length = x.shape[:2]
        _check_length(cfg, length, "encoder")
        where = jnp.arange(length)[None] if positions is None else positions
        x = x + _positions(cfg, "embed_positions")(where + POSITION_OFFSET)
        x = _layer_norm(cfg, "layernorm_embedding")(x)
        x = nn.Dropout(cfg.dropout_rate)(x, deterministic=deterministic)
        x = nn.with_logical_constraint(x, EMBED_AXES)
        if segment_ids is not None:
            mask = decode_cache.segment_mask(segment_ids, segment_ids)
        else:
            mask = jnp.broadcast_to(attention_mask[:, None, None, :], (batch, 1, length, length))
        layer = nn.remat(EncoderLayer, static_argnums=(3,)) if cfg.remat else EncoderLayer
        for i in range(cfg.encoder_layers):
            x = layer(cfg, name=f"layer_{i}")(x, mask, deterministic)
        return x


class Decoder(nn.Module):
    """Decoder token embeddings and the encoder output to the decoder output (post-LN: no final
    norm). In decode mode the first call (from :func:`init_cache`) sizes the cache; each later
    call appends a prefix or one step at the cache index, its positions continuing from there.
    ``encoded`` may be None after the first filling call: cross-attention then reuses its cached
    keys/values and the cached encoder mask."""

    config: BARTConfig

    @nn.compact
    def __call__(
        self, y: jax.Array, encoded: jax.Array | None, encoder_mask: jax.Array | None,
        attention_mask: jax.Array | None, decode: bool, deterministic: bool,
        segment_ids: jax.Array | None = None, encoder_segment_ids: jax.Array | None = None,
        positions: jax.Array | None = None,
    ) -> jax.Array:
        cfg = self.config
        causal = decode_cache.causal_mask(self, attention_mask, y.shape[:2], decode, segment_ids)
        source_mask = decode_cache.cross_mask(
            self, encoded, encoder_mask, decode,
            None if segment_ids is None else (segment_ids, encoder_segment_ids))
        _check_length(cfg, causal.key_pos.shape[0], "decoder")

        where = causal.query_pos[None] if positions is None else positions
        y = y + _positions(cfg, "embed_positions")(where + POSITION_OFFSET)
        y = _layer_norm(cfg, "layernorm_embedding")(y)
        y = nn.Dropout(cfg.dropout_rate)(y, deterministic=deterministic)
        y = nn.with_logical_constraint(y, EMBED_AXES)
        layer = nn.remat(DecoderLayer, static_argnums=(6, 7)) if cfg.remat else DecoderLayer
        for i in range(cfg.decoder_layers):
            y = layer(cfg, name=f"layer_{i}")(
                y, encoded, causal.mask, source_mask, causal.cache_index, decode, deterministic)
        return y


class BART(nn.Module):
    """BART encoder-decoder: shared token embedding, tied (or separate) LM head plus
    ``final_logits_bias``.

    ``__call__(input_ids, decoder_input_ids)`` returns float32 logits ``(batch, dec_len, vocab)``;
    ``encode`` and ``decode`` are the two halves (same signatures as :class:`~tw_jax.models.t5.T5`),
    for decoding step by step. Masks are 1 for real tokens.
    """

    config: BARTConfig

    def setup(self) -> None:
        cfg = self.config
        self.shared = embed(cfg, cfg.vocab_size, cfg.d_model, cfg.init_std, ("vocab", "embed"))
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        self.final_logits_bias = self.param(
            "final_logits_bias", nn.with_logical_partitioning(nn.initializers.zeros, ("vocab",)),
            (cfg.vocab_size,), jnp.dtype(cfg.param_dtype),
        )
        if not cfg.tie_word_embeddings:
            self.lm_head = DenseGeneral(
                (cfg.vocab_size,), ("embed", "vocab"), cfg.init_std,
                dtype=jnp.dtype(cfg.dtype), param_dtype=jnp.dtype(cfg.param_dtype),
            )

    def _embed(self, ids: jax.Array) -> jax.Array:
        x = self.shared(ids)
        if self.config.scale_embedding:
            x = x * jnp.asarray(math.sqrt(self.config.d_model), x.dtype)
        return x

    def encode(
        self, input_ids: jax.Array, attention_mask: jax.Array | None = None,
        deterministic: bool = True, segment_ids: jax.Array | None = None,
        positions: jax.Array | None = None,
    ) -> jax.Array:
        """Encoder output ``(batch, length, d_model)``; ``segment_ids`` and ``positions`` (each
        example's own, from 0) for packed rows."""
        if attention_mask is None:
            attention_mask = jnp.ones(input_ids.shape, bool)
        return self.encoder(self._embed(input_ids), attention_mask.astype(bool), deterministic,
                            segment_ids, positions)

    def decode(
        self,
        decoder_input_ids: jax.Array,
        encoded: jax.Array | None,
        encoder_mask: jax.Array | None = None,
        decoder_attention_mask: jax.Array | None = None,
        decode: bool = False,
        deterministic: bool = True,
        segment_ids: jax.Array | None = None,
        encoder_segment_ids: jax.Array | None = None,
        positions: jax.Array | None = None,
    ) -> jax.Array:
        """Float32 logits of the decoder given the encoder output (None: cached, decode mode);
        ``segment_ids`` (and the encoder's) and ``positions`` for packed rows."""
        cfg = self.config
        y = self.decoder(self._embed(decoder_input_ids), encoded, encoder_mask,
                         decoder_attention_mask, decode, deterministic, segment_ids,
                         encoder_segment_ids, positions)
        logits = self.shared.attend(y) if cfg.tie_word_embeddings else self.lm_head(y)
        logits = logits.astype(jnp.float32) + self.final_logits_bias.astype(jnp.float32)
        return nn.with_logical_constraint(logits, ("batch", "length", "activation_vocab"))

    def __call__(
        self,
        input_ids: jax.Array,
        decoder_input_ids: jax.Array,
        attention_mask: jax.Array | None = None,
        decoder_attention_mask: jax.Array | None = None,
        deterministic: bool = True,
        segment_ids: jax.Array | None = None,
        decoder_segment_ids: jax.Array | None = None,
        positions: jax.Array | None = None,
        decoder_positions: jax.Array | None = None,
    ) -> jax.Array:
        if attention_mask is None:
            attention_mask = jnp.ones(input_ids.shape, bool)
        encoded = self.encode(input_ids, attention_mask, deterministic, segment_ids, positions)
        return self.decode(decoder_input_ids, encoded, attention_mask, decoder_attention_mask,
                           deterministic=deterministic, segment_ids=decoder_segment_ids,
                           encoder_segment_ids=segment_ids, positions=decoder_positions)


# Step-by-step decoding (``decoding.py`` calls these by family): one implementation serves every
# encoder-decoder, see :mod:`tw_jax.models.decode_cache`.
init_cache = decode_cache.init_cache
decode_step = decode_cache.decode_step
