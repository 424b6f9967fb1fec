"""T5 as a Flax linen model, readable top to bottom: config, layers, encoder, decoder, model, decoding.

CKL and EvolvingQA continually train T5-large-ssm: the original T5 recipe (ReLU feed-forward, LM head
tied to the token embedding with the decoder output rescaled by ``d_model ** -0.5``). T5 v1.1
(gated GELU, a separate ``lm_head``, no rescale) is the same code under other config values.

The layout follows ``gpt2.py``: a frozen hashable config, logical axis names on every parameter and
main activation, and the decoder's self-attention keys/values in the linen ``cache`` collection.
In decode mode the cross-attention keys/values are cached as well: the first call after the cache
is made passes the encoder output and fills them, later single-step calls pass ``encoded=None``.
T5 specifics: relative position buckets (bidirectional in the encoder, causal in the decoder),
one bias table per stack, owned by the stack and added in every layer (Hugging Face keeps it in
the first layer and passes it on: the same numbers); RMS layer norm without bias or mean; no
``1/sqrt(d)`` in attention (T5 folds it into the initialisation); no biases anywhere.
"""

from __future__ import annotations

import dataclasses
import math
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
    normal_init,
)
from tw_jax.models.variants import KAdapterConfig, LoRAConfig, ModularConfig

ACTIVATIONS = activations("relu", "gelu", "gelu_new", "gelu_pytorch_tanh", "silu")


@dataclasses.dataclass(frozen=True)
class T5Config:
    """Everything that fixes a T5's shapes and numerics; hashable so jit can key on it."""

    vocab_size: int = 32128
    d_model: int = 512
    d_kv: int = 64
    d_ff: int = 2048
    num_layers: int = 6
    num_decoder_layers: int | None = None  # None means num_layers, as in Hugging Face.
    num_heads: int = 8
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    dropout_rate: float = 0.1
    layer_norm_epsilon: float = 1e-6
    initializer_factor: float = 1.0
    feed_forward_proj: str = "relu"  # "relu" (original T5) or "gated-gelu" (v1.1).
    tie_word_embeddings: bool = True  # False: a separate lm_head kernel (v1.1 checkpoints).
    scale_decoder_outputs: bool = True  # multiply the decoder output by d_model ** -0.5 (original).
    dtype: str = "float32"  # compute dtype; "bfloat16" on accelerators.
    param_dtype: str = "float32"
    remat: bool = False  # rematerialise each block in the backward pass (saves activation memory).
    pad_token_id: int = 0
    eos_token_id: int = 1
    decoder_start_token_id: int = 0
    # Continual-learning variants (see variants.py) and which base parameters train.
    lora: LoRAConfig | None = None
    kadapter: KAdapterConfig | None = None  # adapters on the encoder
    modular: ModularConfig | None = None
    freeze: str | None = None  # "none" | "encoder" | "base"; None: "encoder" with a variant.

    model_type = "t5"

    @property
    def decoder_layers(self) -> int:
        return self.num_layers if self.num_decoder_layers is None else self.num_decoder_layers

    @property
    def modular_encoder_config(self) -> T5Config:
        """The config of Modular's small encoder: the Modular dimensions, no variants of its own."""
        m = self.modular or ModularConfig()
        return dataclasses.replace(
            self, d_model=m.d_model, d_kv=m.d_kv, d_ff=m.d_ff, num_layers=m.num_layers,
            num_decoder_layers=None, num_heads=m.num_heads, lora=None, kadapter=None, modular=None,
            freeze=None,
        )

    @property
    def is_gated(self) -> bool:
        return self.feed_forward_proj.startswith("gated-")

    @property
    def activation(self) -> str:
        """Hugging Face's name of the feed-forward activation ("gated-gelu" means tanh GELU)."""
        if self.feed_forward_proj == "gated-gelu":
            return "gelu_new"
        return self.feed_forward_proj.removeprefix("gated-")

    def __post_init__(self) -> None:
        parts = self.feed_forward_proj.split("-")
        if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
            raise ValueError(f"feed_forward_proj={self.feed_forward_proj!r} is not 'ACT' or 'gated-ACT'")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unsupported activation {self.activation!r}; known: {sorted(ACTIVATIONS)}")

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], **overrides: Any) -> T5Config:
        """Read a Hugging Face T5 ``config.json`` (as a dict).

        ``tie_word_embeddings`` (default True) says whether the LM head is the token embedding;
        ``scale_decoder_outputs`` (written by transformers 5, which always ties) says whether the
        decoder output is rescaled, and defaults to ``tie_word_embeddings`` as older versions did.
        """
        if hf.get("model_type", "t5") != "t5":
            raise ValueError(f"not a T5 config: model_type={hf.get('model_type')!r}")
        tie = hf.get("tie_word_embeddings", True)
        tie = True if tie is None else bool(tie)
        eos = hf.get("eos_token_id", 1)
        fields = dict(
            vocab_size=hf["vocab_size"],
            d_model=hf.get("d_model", 512),
            d_kv=hf.get("d_kv", 64),
            d_ff=hf.get("d_ff", 2048),
            num_layers=hf.get("num_layers", 6),
            num_decoder_layers=hf.get("num_decoder_layers"),
            num_heads=hf.get("num_heads", 8),
            relative_attention_num_buckets=hf.get("relative_attention_num_buckets", 32),
            relative_attention_max_distance=hf.get("relative_attention_max_distance", 128),
            dropout_rate=hf.get("dropout_rate", 0.1),
            layer_norm_epsilon=hf.get("layer_norm_epsilon", 1e-6),
            initializer_factor=hf.get("initializer_factor", 1.0),
            feed_forward_proj=hf.get("feed_forward_proj", "relu"),
            tie_word_embeddings=tie,
            scale_decoder_outputs=bool(hf.get("scale_decoder_outputs", tie)),
            pad_token_id=hf.get("pad_token_id", 0) or 0,
            eos_token_id=(eos[0] if isinstance(eos, list) else eos) if eos is not None else 1,
            decoder_start_token_id=hf.get("decoder_start_token_id", 0) or 0,
        )
        if fields["num_decoder_layers"] == fields["num_layers"]:
            fields["num_decoder_layers"] = None
        fields.update(overrides)
        return cls(**fields)

    def to_hf_config(self) -> dict[str, Any]:
        """The Hugging Face ``config.json`` that describes this model (for export)."""
        return {
            "architectures": ["T5ForConditionalGeneration"],
            "model_type": "t5",
            "vocab_size": self.vocab_size,
            "d_model": self.d_model,
            "d_kv": self.d_kv,
            "d_ff": self.d_ff,
            "num_layers": self.num_layers,
            "num_decoder_layers": self.decoder_layers,
            "num_heads": self.num_heads,
            "relative_attention_num_buckets": self.relative_attention_num_buckets,
            "relative_attention_max_distance": self.relative_attention_max_distance,
            "dropout_rate": self.dropout_rate,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_factor": self.initializer_factor,
            "feed_forward_proj": self.feed_forward_proj,
            "tie_word_embeddings": self.tie_word_embeddings,
            "scale_decoder_outputs": self.scale_decoder_outputs,
            "is_encoder_decoder": True,
            "pad_token_id": self.pad_token_id,
            "eos_token_id": self.eos_token_id,
            "decoder_start_token_id": self.decoder_start_token_id,
            "torch_dtype": "float32",
        }


def _rms_norm(config: T5Config, name: str) -> nn.RMSNorm:
    """T5's layer norm: ``x / rms(x) * scale`` (statistics in float32), no bias, no mean."""
    return nn.RMSNorm(
        epsilon=config.layer_norm_epsilon,
        dtype=jnp.dtype(config.dtype),
        param_dtype=jnp.dtype(config.param_dtype),
        scale_init=nn.with_logical_partitioning(nn.initializers.ones, ("norm",)),
        name=name,
    )


def relative_position_bucket(
    relative_position: jax.Array, bidirectional: bool, num_buckets: int, max_distance: int
) -> jax.Array:
    """T5's bucket of ``key_position - query_position``: exact for small distances, log-spaced up
    to ``max_distance``; the encoder tells the two directions apart, the decoder sees only the past.
    """
    buckets = jnp.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).astype(relative_position.dtype) * num_buckets
        distance = jnp.abs(relative_position)
    else:
        distance = -jnp.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # The float32 log, then truncation towards zero, as Hugging Face and Mesh TensorFlow do.
    large = max_exact + (
        jnp.log(jnp.maximum(distance, 1).astype(jnp.float32) / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).astype(relative_position.dtype)
    large = jnp.minimum(large, num_buckets - 1)
    return buckets + jnp.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
    """The ``(1, heads, q_len, kv_len)`` additive attention bias of one stack."""

    config: T5Config
    bidirectional: bool

    @nn.compact
    def __call__(self, query_pos: jax.Array, key_pos: jax.Array) -> jax.Array:
        cfg = self.config
        stddev = cfg.initializer_factor * cfg.d_model**-0.5
        table = self.param(
            "embedding", normal_init(stddev, ("position", "heads")),
            (cfg.relative_attention_num_buckets, cfg.num_heads), jnp.dtype(cfg.param_dtype),
        )
        bucket = relative_position_bucket(
            key_pos[None, :] - query_pos[:, None], self.bidirectional,
            cfg.relative_attention_num_buckets, cfg.relative_attention_max_distance,
        )
        values = jnp.take(table, bucket, axis=0).astype(jnp.float32)  # (q, k, heads)
        return jnp.transpose(values, (2, 0, 1))[None]


class Attention(nn.Module):
    """Multi-head attention without scaling; self-attention (``kv is None``) or cross-attention.

    ``mask`` is ``(batch, 1, q_len, kv_len)`` booleans and ``bias`` the relative position bias (or
    None for cross-attention). In decode mode self-attention appends its keys/values to the cache at
    ``cache_index``; cross-attention stores the keys/values of ``kv`` and reuses them when ``kv``
    is None.
    """

    config: T5Config
    cross: bool = False

    @nn.compact
    def __call__(
        self, x: jax.Array, kv: jax.Array | None, mask: jax.Array, bias: jax.Array | None,
        cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        f, h, dk = cfg.initializer_factor, cfg.num_heads, cfg.d_kv
        kv_stddev = f * cfg.d_model**-0.5  # keys and values; the query's also folds in d_kv

        def projected(name: str, source: jax.Array, stddev: float = kv_stddev) -> jax.Array:
            projection = dense(cfg, (h, dk), ("embed", "heads", "kv"), stddev, name)
            return nn.with_logical_constraint(projection(source), HEADS_AXES)

        query = projected("query", x, f * (cfg.d_model * dk) ** -0.5)
        key, value = attention_key_value(self, projected, x, kv, cross=self.cross,
                                         cache_index=cache_index, decode=decode)
        out = attend(query, key, value, mask, dropout_rate=cfg.dropout_rate,
                     deterministic=deterministic, dtype=dtype, bias=bias)
        return dense(
            cfg, (cfg.d_model,), ("heads", "kv", "embed"), f * (h * dk) ** -0.5, "out", n_axes=2
        )(out)


class MLP(nn.Module):
    """``wo(act(wi(x)))``, or gated ``wo(act(wi_0(x)) * wi_1(x))`` for T5 v1.1."""

    config: T5Config

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool) -> jax.Array:
        cfg = self.config
        f = cfg.initializer_factor
        act = ACTIVATIONS[cfg.activation]

        def dense_in(name: str) -> DenseGeneral:
            return dense(cfg, (cfg.d_ff,), ("embed", "mlp"), f * cfg.d_model**-0.5, name)

        inputs = [dense_in("wi_0"), dense_in("wi_1")] if cfg.is_gated else [dense_in("wi")]
        return feed_forward(
            x, inputs, dense(cfg, (cfg.d_model,), ("mlp", "embed"), f * cfg.d_ff**-0.5, "wo"),
            act, dropout_rate=cfg.dropout_rate, deterministic=deterministic,
        )


class EncoderBlock(nn.Module):
    """``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    config: T5Config

    @nn.compact
    def __call__(
        self, x: jax.Array, mask: jax.Array, bias: jax.Array, deterministic: bool
    ) -> jax.Array:
        cfg = self.config
        drop = nn.Dropout(cfg.dropout_rate)
        h = Attention(cfg, name="self_attn")(
            _rms_norm(cfg, "self_attn_norm")(x), None, mask, bias, None, False, deterministic
        )
        x = add_residual(x, h, drop, deterministic)
        h = MLP(cfg, name="mlp")(_rms_norm(cfg, "mlp_norm")(x), deterministic)
        return add_residual(x, h, drop, deterministic)


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention over the encoder output, then the MLP; pre-norm."""

    config: T5Config

    @nn.compact
    def __call__(
        self, x: jax.Array, encoded: jax.Array | None, self_mask: jax.Array, bias: jax.Array,
        cross_mask: jax.Array, cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        drop = nn.Dropout(cfg.dropout_rate)
        h = Attention(cfg, name="self_attn")(
            _rms_norm(cfg, "self_attn_norm")(x), None, self_mask, bias, cache_index, decode,
            deterministic,
        )
        x = add_residual(x, h, drop, deterministic)
        h = Attention(cfg, cross=True, name="cross_attn")(
            _rms_norm(cfg, "cross_attn_norm")(x), encoded, cross_mask, None, None, decode,
            deterministic,
        )
        x = add_residual(x, h, drop, deterministic)
        h = MLP(cfg, name="mlp")(_rms_norm(cfg, "mlp_norm")(x), deterministic)
        return add_residual(x, h, drop, deterministic)


class Encoder(nn.Module):
    """Embedded inputs ``(batch, length, d_model)`` to the normalised encoder output."""

    config: T5Config

    @nn.compact
    def __call__(self, x: jax.Array, attention_mask: jax.Array, deterministic: bool,
                 segment_ids: jax.Array | None = None) -> jax.Array:
        cfg = self.config
        length = x.shape[1]
        # Relative positions from the row's indices: in a packed row (``segment_ids``) only
        # pairs inside one example attend, and there index and position differences agree.
        positions = jnp.arange(length)
        bias = RelativePositionBias(cfg, bidirectional=True, name="relative_attention_bias")(
            positions, positions
        )
        if segment_ids is not None:
            mask = decode_cache.segment_mask(segment_ids, segment_ids)
        else:
            mask = jnp.broadcast_to(attention_mask[:, None, None, :],
                                    (x.shape[0], 1, length, length))
        x = nn.Dropout(cfg.dropout_rate)(x, deterministic=deterministic)
        x = nn.with_logical_constraint(x, EMBED_AXES)
        block = nn.remat(EncoderBlock, static_argnums=(4,)) if cfg.remat else EncoderBlock
        taps = cfg.kadapter.tap_layers(cfg.num_layers) if cfg.kadapter is not None else ()
        tapped = []
        for i in range(cfg.num_layers):
            x = block(cfg, name=f"block_{i}")(x, mask, bias, deterministic)
            if i in taps:
                tapped.append(x)
        x = _rms_norm(cfg, "final_norm")(x)
        x = nn.Dropout(cfg.dropout_rate)(x, deterministic=deterministic)
        if cfg.kadapter is not None:
            x = KAdapter(cfg, name="kadapter")(x, tapped, mask, bias, deterministic)
        return x


class KAdapter(nn.Module):
    """K-Adapter on the encoder: T5 encoder blocks fed from tapped hidden states, chained.

    Adapter ``i`` reads ``tapped[i] + previous adapter output`` (with the encoder's relative
    position bias and mask); the result is added to the encoder output as
    ``0.1 * LayerNorm(adapter output)`` (a LayerNorm with bias, as in the K-Adapter code).
    """

    config: T5Config

    @nn.compact
    def __call__(
        self, base: jax.Array, tapped: list[jax.Array], mask: jax.Array, bias: jax.Array,
        deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        block = nn.remat(EncoderBlock, static_argnums=(4,)) if cfg.remat else EncoderBlock
        return kadapter_output(
            base, tapped, lambda i, h: block(cfg, name=f"adapter_{i}")(h, mask, bias, deterministic),
            cfg.kadapter, jnp.dtype(cfg.dtype), jnp.dtype(cfg.param_dtype),
        )


class ModularEncoder(nn.Module):
    """CKL's Modular: a smaller encoder with its own embedding, projected to the main width.

    Returns ``0.05 * Linear(small_encoder(input_ids))``, which :class:`T5` adds to the main encoder
    output. The small encoder is a plain T5 encoder of the Modular dimensions (T5-small by default).
    """

    config: T5Config

    @nn.compact
    def __call__(
        self, input_ids: jax.Array, attention_mask: jax.Array, deterministic: bool,
        segment_ids: jax.Array | None = None,
    ) -> jax.Array:
        cfg = self.config
        small = cfg.modular_encoder_config
        shared = embed(cfg, cfg.vocab_size, small.d_model, cfg.initializer_factor,
                       ("vocab", "embed"), "shared")
        encoded = Encoder(small, name="encoder")(shared(input_ids), attention_mask, deterministic,
                                                 segment_ids)
        projected = DenseGeneral(
            (cfg.d_model,), ("modular_embed", "embed"), cfg.initializer_factor * small.d_model**-0.5,
            use_bias=True, dtype=jnp.dtype(cfg.dtype), param_dtype=jnp.dtype(cfg.param_dtype),
            name="projection",
        )(encoded)
        return jnp.asarray(cfg.modular.output_scale, projected.dtype) * projected


class Decoder(nn.Module):
    """Embedded decoder inputs and the encoder output to the (normalised) decoder output.

    In decode mode the first call (from :func:`init_cache`) sizes the cache; then each call appends
    a prefix or one step at the cache index. ``encoded`` may be None after the first filling call:
    cross-attention then reuses its cached keys/values and the cached encoder mask.
    """

    config: T5Config

    @nn.compact
    def __call__(
        self, y: jax.Array, encoded: jax.Array | None, encoder_mask: jax.Array | None,
        attention_mask: jax.Array | None, decode: bool, deterministic: bool,
        segment_ids: jax.Array | None = None, encoder_segment_ids: jax.Array | None = None,
    ) -> jax.Array:
        cfg = self.config
        causal = decode_cache.causal_mask(self, attention_mask, y.shape[:2], decode, segment_ids)
        source_mask = decode_cache.cross_mask(
            self, encoded, encoder_mask, decode,
            None if segment_ids is None else (segment_ids, encoder_segment_ids))
        bias = RelativePositionBias(cfg, bidirectional=False, name="relative_attention_bias")(
            causal.query_pos, causal.key_pos
        )

        y = nn.Dropout(cfg.dropout_rate)(y, deterministic=deterministic)
        y = nn.with_logical_constraint(y, EMBED_AXES)
        block = nn.remat(DecoderBlock, static_argnums=(7, 8)) if cfg.remat else DecoderBlock
        for i in range(cfg.decoder_layers):
            y = block(cfg, name=f"block_{i}")(
                y, encoded, causal.mask, bias, source_mask, causal.cache_index, decode,
                deterministic,
            )
        y = _rms_norm(cfg, "final_norm")(y)
        return nn.Dropout(cfg.dropout_rate)(y, deterministic=deterministic)


class T5(nn.Module):
    """T5 encoder-decoder with a shared token embedding and an LM head (tied or separate).

    ``__call__(input_ids, decoder_input_ids)`` returns float32 logits ``(batch, dec_len, vocab)``;
    ``encode`` and ``decode`` are the two halves, for decoding step by step or scoring many targets
    against one encoding. Masks are 1 for real tokens.
    """

    config: T5Config

    def setup(self) -> None:
        cfg = self.config
        self.shared = embed(cfg, cfg.vocab_size, cfg.d_model, cfg.initializer_factor,
                            ("vocab", "embed"))
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        if cfg.modular is not None:
            self.modular = ModularEncoder(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = DenseGeneral(
                (cfg.vocab_size,), ("embed", "vocab"), cfg.initializer_factor,
                dtype=jnp.dtype(cfg.dtype), param_dtype=jnp.dtype(cfg.param_dtype),
            )

    def encode(
        self, input_ids: jax.Array, attention_mask: jax.Array | None = None,
        deterministic: bool = True, segment_ids: jax.Array | None = None,
        positions: jax.Array | None = None,
    ) -> jax.Array:
        """Encoder output ``(batch, length, d_model)``. ``segment_ids`` mark the examples of
        packed rows; ``positions`` are not needed (relative positions, see :class:`Encoder`)."""
        del positions
        if attention_mask is None:
            attention_mask = jnp.ones(input_ids.shape, bool)
        attention_mask = attention_mask.astype(bool)
        encoded = self.encoder(self.shared(input_ids), attention_mask, deterministic, segment_ids)
        if self.config.modular is not None:
            encoded = encoded + self.modular(input_ids, attention_mask, deterministic, segment_ids)
        return encoded

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
        ``segment_ids`` (and the encoder's) for packed rows."""
        del positions
        cfg = self.config
        y = self.decoder(
            self.shared(decoder_input_ids), encoded, encoder_mask, decoder_attention_mask, decode,
            deterministic, segment_ids, encoder_segment_ids,
        )
        if cfg.scale_decoder_outputs:
            y = y * jnp.asarray(cfg.d_model**-0.5, y.dtype)
        logits = self.shared.attend(y) if cfg.tie_word_embeddings else self.lm_head(y)
        return nn.with_logical_constraint(
            logits.astype(jnp.float32), ("batch", "length", "activation_vocab")
        )

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
        """Logits of a batch; ``segment_ids`` / ``decoder_segment_ids`` (and positions, which
        T5's relative attention does not need) describe packed rows."""
        del positions, decoder_positions
        if attention_mask is None:
            attention_mask = jnp.ones(input_ids.shape, bool)
        encoded = self.encode(input_ids, attention_mask, deterministic, segment_ids)
        return self.decode(
            decoder_input_ids, encoded, attention_mask, decoder_attention_mask,
            deterministic=deterministic, segment_ids=decoder_segment_ids,
            encoder_segment_ids=segment_ids,
        )


# Step-by-step decoding (``decoding.py`` calls these by family): one implementation serves every
# encoder-decoder, see :mod:`tw_jax.models.decode_cache`.
init_cache = decode_cache.init_cache
decode_step = decode_cache.decode_step
