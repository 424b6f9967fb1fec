"""BERT as a Flax linen encoder, for DPR's dense retriever: config, embeddings, layers, encoder.

EvolvingQA's retrieval row is DPR (Karpukhin et al., 2020), which "encodes passages into dense
representations and retrieves context representations closest to the question representations"
(EvolvingQA, Section 3.1). DPR's encoders are BERT-base networks: "we use two independent BERT
networks (base, uncased) and take the representation at the [CLS] token as the output"
(Karpukhin et al. 2020, Section 3.1). So this module is an encoder only, with no pooler and no
LM head: :class:`BertEncoder` returns the last hidden state of the first ([CLS]) position,
optionally through a linear ``encode_proj`` (``projection_dim > 0``), exactly what Hugging Face's
``DPRQuestionEncoder`` / ``DPRContextEncoder`` return as ``pooler_output`` (the parity tests in
``tests/retrieval/test_dpr_parity.py`` hold us to it).

The layout follows ``bart.py``: a frozen hashable config, logical axis names on every parameter
and main activation (``sharding.py`` maps them onto the mesh), a compute ``dtype`` separate from
``param_dtype``. What makes it BERT (numbers are Hugging Face's ``BertModel``):

- word + learned absolute position + token-type (segment) embeddings, summed, then LayerNorm and
  dropout; positions start at 0 whatever the padding (pads sit on the right);
- *post*-LN layers, ``x = norm(x + attn(x))`` then ``x = norm(x + ffn(x))``, every projection
  biased, attention scaled by ``1/sqrt(head_dim)``, exact (erf) GELU by default;
- LayerNorm epsilon 1e-12 (BERT's, not torch's 1e-5).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from tw_jax.models.layers import (
    EMBED_AXES,
    HEADS_AXES,
    DenseGeneral,
    activations,
    add_residual,
    attend,
    dense,
    embed,
    feed_forward,
    layer_norm,
)

ACTIVATIONS = activations("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")

# The logical axes of the pooled output ``(batch, embedding_dim)``.
POOLED_AXES = ("batch", "activation_embed")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Everything that fixes a BERT encoder's shapes and numerics; hashable so jit can key on it.

    Field names follow Hugging Face's ``BertConfig`` / ``DPRConfig`` except the dropout rates
    (``dropout_rate`` is its ``hidden_dropout_prob``, ``attention_dropout`` its
    ``attention_probs_dropout_prob``), as in the other families. Defaults are BERT-base's shapes
    with DPR's ``projection_dim = 0`` (the [CLS] hidden state itself is the embedding).
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    dropout_rate: float = 0.1  # embeddings and residual branches
    attention_dropout: float = 0.1  # attention probabilities
    projection_dim: int = 0  # > 0: a Linear(hidden_size, projection_dim) after [CLS] (DPR's encode_proj)
    pad_token_id: int = 0
    dtype: str = "float32"  # compute dtype; "bfloat16" on accelerators.
    param_dtype: str = "float32"

    model_type = "bert"

    def __post_init__(self) -> None:
        if self.hidden_size <= 0 or self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size={self.hidden_size} is not a positive multiple of "
                             f"num_attention_heads={self.num_attention_heads}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"unsupported activation {self.hidden_act!r}; known: "
                             f"{sorted(ACTIVATIONS)}")
        if self.projection_dim < 0:
            raise ValueError(f"projection_dim must be >= 0, got {self.projection_dim}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_dim(self) -> int:
        """Size of the output vector: ``projection_dim`` if set, else ``hidden_size``."""
        return self.projection_dim or self.hidden_size

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], **overrides: Any) -> BertConfig:
        """Read a Hugging Face ``config.json`` (as a dict) of a BERT (``model_type`` ``bert``) or a
        DPR encoder (``dpr``); refuse options this encoder does not model."""
        model_type = hf.get("model_type", "bert")
        if model_type not in ("bert", "dpr"):
            raise ValueError(f"not a BERT or DPR config: model_type={model_type!r}")
        position = hf.get("position_embedding_type", "absolute")
        if position != "absolute":
            raise ValueError(f"position_embedding_type={position!r} is not supported (only "
                             "'absolute', as BERT and DPR checkpoints have)")
        if hf.get("is_decoder") or hf.get("add_cross_attention"):
            raise ValueError("a BERT decoder (is_decoder / add_cross_attention) is not supported: "
                             "this is an encoder for retrieval")
        if hf.get("chunk_size_feed_forward"):
            logging.info("BERT chunk_size_feed_forward=%s only saves memory; ignored",
                         hf["chunk_size_feed_forward"])

        def rate(key: str) -> float:
            return float(hf.get(key, 0.1) or 0.0)

        fields = dict(
            vocab_size=hf.get("vocab_size", 30522),
            hidden_size=hf.get("hidden_size", 768),
            num_hidden_layers=hf.get("num_hidden_layers", 12),
            num_attention_heads=hf.get("num_attention_heads", 12),
            intermediate_size=hf.get("intermediate_size", 3072),
            hidden_act=hf.get("hidden_act", "gelu"),
            max_position_embeddings=hf.get("max_position_embeddings", 512),
            type_vocab_size=hf.get("type_vocab_size", 2),
            layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
            initializer_range=hf.get("initializer_range", 0.02),
            dropout_rate=rate("hidden_dropout_prob"),
            attention_dropout=rate("attention_probs_dropout_prob"),
            projection_dim=int(hf.get("projection_dim", 0) or 0) if model_type == "dpr" else 0,
            pad_token_id=int(hf.get("pad_token_id", 0) or 0),
        )
        fields.update(overrides)
        return cls(**fields)

    def to_hf_config(self, architecture: str = "DPRQuestionEncoder") -> dict[str, Any]:
        """The Hugging Face ``config.json`` of this encoder as ``architecture``
        (``DPRQuestionEncoder``, ``DPRContextEncoder`` or ``BertModel``), for export."""
        dpr = architecture.startswith("DPR")
        if not dpr and self.projection_dim:
            raise ValueError("a BertModel has no encode_proj: export with a DPR architecture")
        hf: dict[str, Any] = {
            "architectures": [architecture],
            "model_type": "dpr" if dpr else "bert",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "layer_norm_eps": self.layer_norm_eps,
            "initializer_range": self.initializer_range,
            "hidden_dropout_prob": self.dropout_rate,
            "attention_probs_dropout_prob": self.attention_dropout,
            "position_embedding_type": "absolute",
            "pad_token_id": self.pad_token_id,
            "torch_dtype": "float32",
        }
        if dpr:
            hf["projection_dim"] = self.projection_dim
        return hf


def _layer_norm(config: BertConfig, name: str) -> nn.LayerNorm:
    return layer_norm(config.layer_norm_eps, jnp.dtype(config.dtype),
                      jnp.dtype(config.param_dtype), name)


def _dense(config: BertConfig, features: tuple[int, ...], axes: tuple[str | None, ...],
           name: str, n_axes: int = 1) -> DenseGeneral:
    """A biased projection initialised N(0, initializer_range), as BERT's ``nn.Linear``s."""
    return dense(config, features, axes, config.initializer_range, name, n_axes=n_axes,
                 use_bias=True)


def _embed(config: BertConfig, rows: int, axes: tuple[str | None, ...], name: str) -> nn.Embed:
    return embed(config, rows, config.hidden_size, config.initializer_range, axes, name)


class SelfAttention(nn.Module):
    """Bidirectional multi-head attention over the real tokens, scaled by ``1/sqrt(head_dim)``."""

    config: BertConfig

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, deterministic: bool) -> jax.Array:
        cfg = self.config
        heads, head_dim = cfg.num_attention_heads, cfg.head_dim

        def projected(name: str) -> jax.Array:
            projection = _dense(cfg, (heads, head_dim), ("embed", "heads", "kv"), name)
            return nn.with_logical_constraint(projection(x), HEADS_AXES)

        out = attend(projected("query"), projected("key"), projected("value"), mask,
                     dropout_rate=cfg.attention_dropout, deterministic=deterministic,
                     dtype=jnp.dtype(cfg.dtype), divide_by=jnp.sqrt(jnp.float32(head_dim)))
        return _dense(cfg, (cfg.hidden_size,), ("heads", "kv", "embed"), "out", n_axes=2)(out)


class Layer(nn.Module):
    """Post-LN: ``x = norm(x + attn(x))``, then ``x = norm(x + ffn(x))``."""

    config: BertConfig

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, deterministic: bool) -> jax.Array:
        cfg = self.config
        drop = nn.Dropout(cfg.dropout_rate)
        h = SelfAttention(cfg, name="attention")(x, mask, deterministic)
        x = add_residual(x, h, drop, deterministic, _layer_norm(cfg, "attention_norm"))
        h = feed_forward(
            x, [_dense(cfg, (cfg.intermediate_size,), ("embed", "mlp"), "intermediate")],
            _dense(cfg, (cfg.hidden_size,), ("mlp", "embed"), "output"),
            ACTIVATIONS[cfg.hidden_act],
        )
        return add_residual(x, h, drop, deterministic, _layer_norm(cfg, "output_norm"))


class BertEncoder(nn.Module):
    """BERT over ``input_ids`` ``(batch, length)``; returns the float32 embedding
    ``(batch, embedding_dim)``: the last hidden state at position 0 ([CLS]), through
    ``encode_proj`` when ``projection_dim > 0``. With ``sequence=True`` it returns the whole last
    layer ``(batch, length, hidden_size)`` in the compute dtype instead.

    ``attention_mask`` is 1 for real tokens (default: all); ``token_type_ids`` default to 0.
    """

    config: BertConfig

    @nn.compact
    def __call__(
        self, input_ids: jax.Array, attention_mask: jax.Array | None = None,
        token_type_ids: jax.Array | None = None, deterministic: bool = True,
        sequence: bool = False,
    ) -> jax.Array:
        cfg = self.config
        batch, length = input_ids.shape
        if length > cfg.max_position_embeddings:
            raise ValueError(f"BERT reads at most max_position_embeddings="
                             f"{cfg.max_position_embeddings} positions, got {length}")
        if attention_mask is None:
            attention_mask = jnp.ones((batch, length), bool)
        if token_type_ids is None:
            token_type_ids = jnp.zeros((batch, length), jnp.int32)
        x = _embed(cfg, cfg.vocab_size, ("vocab", "embed"), "word_embeddings")(input_ids)
        x = x + _embed(cfg, cfg.max_position_embeddings, ("position", "embed"),
                       "position_embeddings")(jnp.arange(length))[None]
        x = x + _embed(cfg, cfg.type_vocab_size, (None, "embed"),
                       "token_type_embeddings")(token_type_ids)
        x = _layer_norm(cfg, "embeddings_norm")(x)
        x = nn.Dropout(cfg.dropout_rate)(x, deterministic=deterministic)
        x = nn.with_logical_constraint(x, EMBED_AXES)
        mask = attention_mask.astype(bool)[:, None, None, :]
        for i in range(cfg.num_hidden_layers):
            x = Layer(cfg, name=f"layer_{i}")(x, mask, deterministic)
        if sequence:
            return x
        cls = x[:, 0]
        if cfg.projection_dim:
            cls = _dense(cfg, (cfg.projection_dim,), ("embed", None), "encode_proj")(cls)
        return nn.with_logical_constraint(cls.astype(jnp.float32), POOLED_AXES)


@functools.lru_cache(maxsize=8)
def _jitted_init(config: BertConfig) -> Callable[[jax.Array], Any]:
    model = BertEncoder(config)
    return jax.jit(lambda key: model.init(key, jnp.zeros((1, 2), jnp.int32))["params"])


def init_params(config: BertConfig, seed: int = 0) -> Any:
    """Freshly initialised (unboxed) parameters of :class:`BertEncoder` for ``config``
    (BERT's recipe: N(0, initializer_range) weights, zero biases, unit LayerNorms)."""
    return nn.unbox(_jitted_init(config)(jax.random.key(seed)))
