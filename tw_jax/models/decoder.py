"""What the Hugging Face decoder families share, so that each family file (``llama.py``: Llama,
Qwen2, Qwen3, Mistral; ``gemma.py``: Gemma 3) holds only its config fields, its Hugging Face
names and the numerics that are its own.

- :class:`DecoderConfig`: the methods every decoder config has besides its fields (grouped-query
  checks, the ``model_type`` a config class is for, the token ids of a ``config.json``, the keys
  every exported ``config.json`` carries); the fields stay in each family's dataclass, in its
  order.
- Rotary positions in Hugging Face's half-split layout (:func:`default_inverse_frequencies`,
  :func:`apply_rope`); each family computes its own frequencies from these.
- Attention: the sliding-window mask (:func:`sliding_window_mask`), grouped-query attention over
  the decode cache (:func:`grouped_query_attention`) and a layer's whole self-attention
  (:class:`Attention`: q/k/v projections, optional q/k norms, RoPE, the output projection),
  which a family's layer builds with what differs (RoPE frequencies, score scale, norms,
  biases).
- :class:`GatedMLP`: ``down(act(gate(x)) * up(x))``, SiLU in Llama, tanh GELU in Gemma.
- The model's ends: :func:`causal_inputs` (mask and positions), :func:`token_embedding`,
  :func:`remat_block` and :func:`lm_logits` (the tied or separate LM head, in float32).

Parameter names, logical axes and LoRA targets (``query``, ``key``, ``value``, ``out``,
``gate``, ``up``, ``down``) are the same in every family, as ``llama_io.py`` and ``gemma_io.py``
(through ``decoder_io.py``) read and write them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.models import decode_cache
from tw_jax.models.layers import (
    HEADS_AXES,
    DenseGeneral,
    attend,
    cached_key_value,
    dense,
    embed,
    feed_forward,
)

LOGIT_AXES = ("batch", "length", "activation_vocab")
KV_HEADS_AXES = ("batch", "length", "activation_kv_heads", "activation_kv")

# --- config ------------------------------------------------------------------------------


class DecoderConfig:
    """The methods of a decoder config dataclass beyond its fields (a mixin with no fields of
    its own, so each family's dataclass keeps its fields in its order). The dataclass has
    Hugging Face's shape fields (``vocab_size``, ``hidden_size``, ``intermediate_size``,
    ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``,
    ``rms_norm_eps``, ``max_position_embeddings``, ``tie_word_embeddings``) and token ids
    (``bos_token_id``, ``eos_token_id``, ``extra_eos_token_ids``, ``pad_token_id``),
    ``initializer_range``, ``attention_dropout``, the dtypes and ``model_type``."""

    # The model_type of a config class: its ``model_type`` field must be this one.
    fixed_model_type: ClassVar[str]

    @property
    def num_key_value_groups(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    def _check_model_type(self) -> None:
        if self.model_type != self.fixed_model_type:
            raise ValueError(f"{type(self).__name__} is for model_type {self.fixed_model_type!r}, "
                             f"got {self.model_type!r}")

    def _check_heads(self) -> None:
        """Query heads in whole groups per key/value head; an even ``head_dim`` for RoPE."""
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads={self.num_attention_heads} is not a multiple "
                             f"of num_key_value_heads={self.num_key_value_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even (rotary halves)")

    @classmethod
    def _hf_model_type(cls, hf: dict[str, Any]) -> str:
        """A ``config.json``'s ``model_type``, which must be this class's."""
        model_type = hf.get("model_type")
        if model_type != cls.fixed_model_type:
            raise ValueError(f"not a {cls.fixed_model_type} config: model_type={model_type!r}")
        return model_type

    @staticmethod
    def _hf_token_ids(hf: dict[str, Any], model_type: str, *, bos: int | None = None,
                      eos: int | None = None) -> dict[str, Any]:
        """The BOS and EOS fields of a ``config.json`` (``bos``, ``eos``: where it has none):
        an EOS list (Llama 3.1 Instruct) is the first id and the others, kept for export; a
        BOS list its first id."""
        eos_value = hf.get("eos_token_id", eos)
        eos_ids = list(eos_value) if isinstance(eos_value, list | tuple) else [eos_value]
        if eos_ids[0] is None:
            raise ValueError(f"{model_type} config has no eos_token_id")
        bos_value = hf.get("bos_token_id", bos)
        return {"bos_token_id": bos_value[0] if isinstance(bos_value, list | tuple) else bos_value,
                "eos_token_id": int(eos_ids[0]),
                "extra_eos_token_ids": tuple(int(i) for i in eos_ids[1:])}

    def _hf_config(self, architecture: str, **family: Any) -> dict[str, Any]:
        """The exported ``config.json``: the keys every decoder has, and ``family``'s."""
        eos = ([self.eos_token_id, *self.extra_eos_token_ids] if self.extra_eos_token_ids
               else self.eos_token_id)
        return {
            "architectures": [architecture],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "rms_norm_eps": self.rms_norm_eps,
            **family,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": eos,
            "pad_token_id": self.pad_token_id,
            "use_cache": True,
            "torch_dtype": self.param_dtype,
        }


# --- rotary positions --------------------------------------------------------------------


def default_inverse_frequencies(dim: int, theta: float) -> np.ndarray:
    """``(dim // 2,)`` float32 ``1 / theta ** (2i / dim)``, computed in float32 as transformers
    does (``compute_default_rope_parameters``); every family's unscaled RoPE starts here."""
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    return (np.float32(1.0) / np.power(np.float32(theta), exponents)).astype(np.float32)


def apply_rope(x: jax.Array, positions: jax.Array, inv_freq: np.ndarray) -> jax.Array:
    """Rotary embedding of ``(batch, length, heads, head_dim)`` at ``positions`` ``(batch,
    length)``, in Hugging Face's half-split layout: ``x * cos + rotate_half(x) * sin`` with
    ``rotate_half(x) = (-x2, x1)`` and the angles ``positions * inv_freq`` repeated over both
    halves (``LlamaRotaryEmbedding``, ``apply_rotary_pos_emb``); angles in float32, the product
    in ``x``'s dtype, as there."""
    freqs = positions[..., None].astype(jnp.float32) * jnp.asarray(inv_freq, jnp.float32)
    angles = jnp.concatenate([freqs, freqs], axis=-1)[:, :, None, :]
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


# --- attention -----------------------------------------------------------------------------


def projection(config: Any, features: tuple[int, ...], axes: tuple[str, ...], name: str,
               n_axes: int = 1, use_bias: bool = False) -> DenseGeneral:
    """A projection initialised N(0, initializer_range), as Hugging Face initialises every
    Linear of these models; LoRA wraps it when the config's LoRA targets its name."""
    return dense(config, features, axes, config.initializer_range, name, n_axes=n_axes,
                 use_bias=use_bias)


def sliding_window_mask(causal: decode_cache.CausalMask, window: int | None) -> jax.Array:
    """The causal mask with a sliding window: key ``k`` visible to query ``q`` only when
    ``k > q - window`` (``sliding_window_overlay`` in ``transformers/masking_utils.py``), on the
    row indices (the cache slots when decoding, each example's own positions in a packed row),
    which differ from positions by the same left padding for keys and queries alike."""
    if window is None:
        return causal.mask
    near = causal.key_pos[None, :] > causal.query_pos[:, None] - window
    return causal.mask & near[None, None, :, :]


def grouped_query_attention(
    module: nn.Module, query: jax.Array, key: jax.Array, value: jax.Array, mask: jax.Array,
    cache_index: jax.Array | None, decode: bool, deterministic: bool, *, divide_by: Any,
) -> jax.Array:
    """Attention of ``num_attention_heads`` queries over ``num_key_value_heads`` keys and values
    (after RoPE), shared by the families with grouped-query attention: in decode mode the keys
    and values go to ``module``'s ``cache`` collection as they are (the cache holds the key/value
    heads only), then each is repeated to its ``heads / kv_heads`` query heads (``repeat_kv``:
    query head h reads key/value head h // groups) and :func:`attend` runs, scores divided by
    ``divide_by``. Call it inside ``module``'s compact ``__call__`` (its dropout layer and cache
    variables are that module's); ``module.config`` gives the dropout rate and compute dtype."""
    cfg = module.config
    if decode:
        key, value = cached_key_value(module, key, value, cache_index)
    kernel = getattr(cfg, "attention_kernel", "xla")
    if kernel != "xla":
        return fused_attention(query, key, value, mask, kernel=kernel, divide_by=divide_by,
                               dropout=0.0 if deterministic else cfg.attention_dropout)
    groups = query.shape[2] // key.shape[2]
    key, value = jnp.repeat(key, groups, axis=2), jnp.repeat(value, groups, axis=2)
    return attend(query, key, value, mask, dropout_rate=cfg.attention_dropout,
                  deterministic=deterministic, dtype=jnp.dtype(cfg.dtype), divide_by=divide_by)


# attention_kernel -> jax.nn.dot_product_attention's ``implementation`` (None: XLA's own choice,
# cuDNN's fused kernel on a GPU where it applies, the XLA computation elsewhere, CPU included)
ATTENTION_KERNELS = {"xla": None, "fused": None, "cudnn": "cudnn"}


def fused_attention(query: jax.Array, key: jax.Array, value: jax.Array, mask: jax.Array, *,
                    kernel: str, divide_by: Any, dropout: float) -> jax.Array:
    """:func:`grouped_query_attention` through ``jax.nn.dot_product_attention`` (the config's
    ``attention_kernel``: ``fused``, or ``cudnn`` to insist on cuDNN's kernel): grouped
    key/value heads as they are (the function repeats them itself), the same boolean mask and
    scale; the numbers of the ``xla`` path within float rounding (tests/models). It has no
    attention dropout: a rate above 0 while training is refused rather than ignored."""
    if kernel not in ATTENTION_KERNELS:
        raise ValueError(f"attention_kernel={kernel!r}; expected one of {sorted(ATTENTION_KERNELS)}")
    if dropout > 0:
        raise ValueError(f"attention_kernel={kernel!r} has no attention dropout (the config's "
                         f"attention_dropout is {dropout}): use attention_kernel='xla'")
    out = jax.nn.dot_product_attention(query, key.astype(query.dtype),
                                       value.astype(query.dtype), mask=mask,
                                       scale=float(1.0 / np.asarray(divide_by)),
                                       implementation=ATTENTION_KERNELS[kernel])
    return nn.with_logical_constraint(out, HEADS_AXES)


class Attention(nn.Module):
    """A layer's causal grouped-query self-attention with rotary positions, what differs between
    the families given by the layer: the ``query``, ``key`` and ``value`` projections
    (``num_attention_heads`` and ``num_key_value_heads`` heads of ``head_dim``, biased with
    ``bias``), with ``qk_norm`` (the family's norm, ``(config, name)``) ``query_norm`` and
    ``key_norm`` over ``head_dim`` before the rotation by ``inv_freq``, then
    :func:`grouped_query_attention` (scores divided by ``sqrt(score_dim)``: ``head_dim`` in
    Llama, ``query_pre_attn_scalar`` in Gemma) and the ``out`` projection (biased with
    ``out_bias``). In decode mode keys and values (after RoPE) go to the ``cache``
    collection."""

    config: Any
    inv_freq: np.ndarray  # (head_dim // 2,) float32: the layer's RoPE inverse frequencies
    score_dim: float
    qk_norm: Callable[[Any, str], nn.Module] | None = None
    bias: bool = False
    out_bias: bool = False

    @nn.compact
    def __call__(
        self, x: jax.Array, mask: jax.Array, positions: jax.Array,
        cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config

        def projected(name: str, heads: int, axis: str, activation: tuple[str, ...]) -> jax.Array:
            layer = projection(cfg, (heads, cfg.head_dim), ("embed", axis, "kv"), name,
                               use_bias=self.bias)
            return nn.with_logical_constraint(layer(x), activation)

        # Key/value heads have names of their own: a model axis wider than them (8 key/value
        # heads of Llama 3 8B on 16 chips) can leave them whole while it splits the queries.
        query = projected("query", cfg.num_attention_heads, "heads", HEADS_AXES)
        key = projected("key", cfg.num_key_value_heads, "kv_heads", KV_HEADS_AXES)
        value = projected("value", cfg.num_key_value_heads, "kv_heads", KV_HEADS_AXES)
        if self.qk_norm is not None:  # per head, before the rotation
            query, key = self.qk_norm(cfg, "query_norm")(query), self.qk_norm(cfg, "key_norm")(key)
        query = apply_rope(query, positions, self.inv_freq)
        key = apply_rope(key, positions, self.inv_freq)
        out = grouped_query_attention(self, query, key, value, mask, cache_index, decode,
                                      deterministic,
                                      divide_by=np.sqrt(np.float32(self.score_dim)))
        return projection(cfg, (cfg.hidden_size,), ("heads", "kv", "embed"), "out", n_axes=2,
                          use_bias=self.out_bias)(out)


# --- feed-forward --------------------------------------------------------------------------


class GatedMLP(nn.Module):
    """The gated feed-forward network: ``down(activation(gate(x)) * up(x))``."""

    config: Any
    activation: Callable[[jax.Array], jax.Array]

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.config
        return feed_forward(
            x, [projection(cfg, (cfg.intermediate_size,), ("embed", "mlp"), name)
                for name in ("gate", "up")],
            projection(cfg, (cfg.hidden_size,), ("mlp", "embed"), "down"), self.activation,
        )


# --- the model's ends ----------------------------------------------------------------------


def causal_inputs(
    module: nn.Module, input_ids: jax.Array, positions: jax.Array | None,
    attention_mask: jax.Array | None, decode: bool, segment_ids: jax.Array | None,
) -> tuple[decode_cache.CausalMask, jax.Array]:
    """The causal mask of a model call (padding, packing, the decode cache) and the positions:
    ``positions`` where given, else the mask's query positions (``0..length-1``, in decode
    mode continuing from the cache index)."""
    causal = decode_cache.causal_mask(module, attention_mask, input_ids.shape, decode,
                                      segment_ids)
    if positions is None:
        positions = jnp.broadcast_to(causal.query_pos, input_ids.shape)
    return causal, positions


def token_embedding(config: Any) -> nn.Embed:
    """``embed_tokens``, initialised N(0, initializer_range)."""
    return embed(config, config.vocab_size, config.hidden_size, config.initializer_range,
                 ("vocab", "embed"), "embed_tokens")


def remat_block(block: type[nn.Module], config: Any) -> Any:
    """The layer class, rematerialised in the backward pass with ``config.remat`` (its
    ``decode`` and ``deterministic`` arguments static)."""
    return nn.remat(block, static_argnums=(5, 6)) if config.remat else block


def lm_logits(config: Any, tokens: nn.Embed, x: jax.Array) -> jax.Array:
    """Float32 logits of the final hidden states: the token embedding as the head when
    ``tie_word_embeddings``, else ``lm_head``."""
    if config.tie_word_embeddings:
        logits = tokens.attend(x)
    else:
        logits = projection(config, (config.vocab_size,), ("embed", "vocab"), "lm_head")(x)
    return logits.astype(jnp.float32)
