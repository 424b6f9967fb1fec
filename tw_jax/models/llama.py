"""Llama-style decoders as a Flax linen model, readable top to bottom: config, RoPE, RMSNorm,
block, model.

One module covers the Hugging Face families that share Llama's layout: a pre-RMSNorm decoder with
rotary positions, grouped-query attention and a SiLU-gated MLP, no biases by default. What
differs is data in the config, named by ``model_type``:

- ``llama`` (Llama 3, 3.1, 3.2): ``rope_scaling`` of the ``llama3`` type (3.1 and 3.2), an LM head
  tied to the token embedding (3.2 1B and 3B), ``attention_bias`` on q, k, v and o;
- ``qwen2`` (Qwen 2 and 2.5): biases on q, k and v, never on o (``Qwen2Attention``);
- ``qwen3``: RMSNorm over ``head_dim`` on queries and keys before RoPE (``qk_norm``), a
  ``head_dim`` set independently of ``hidden_size / num_attention_heads``;
- ``mistral``: a ``sliding_window``: a query at position ``q`` sees keys in ``(q - window, q]``.

Each type has its config class (:class:`LlamaConfig`, :class:`Qwen2Config`, :class:`Qwen3Config`,
:class:`MistralConfig`, one dataclass with the type as a field): the family registry is keyed by
config class, so each ``model_type`` of a ``config.json`` finds its family and gin names each.

As in ``gpt2.py`` (MaxText/T5X layout), every parameter carries logical axis names, the main
activations are constrained with them, projections are ``DenseGeneral`` (LoRA by name: ``query``,
``key``, ``value``, ``out``, ``gate``, ``up``, ``down``) and decoding keeps keys and values in
the linen ``cache`` collection. The cache holds the ``num_key_value_heads`` heads only; they are
repeated to the query heads inside attention (``repeat_kv`` in ``modeling_llama.py``). The
pieces every decoder family shares (RoPE's rotation, grouped-query self-attention, the gated MLP,
the model's ends, the config's common methods) are ``decoder.py``'s; this file holds Llama's
config, RoPE frequencies, RMSNorm and layer. ``llama_io.py`` reads and writes Hugging Face
checkpoints.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import flax.linen as nn
import gin
import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.models.decoder import (
    LOGIT_AXES,
    Attention,
    DecoderConfig,
    GatedMLP,
    causal_inputs,
    default_inverse_frequencies,
    lm_logits,
    remat_block,
    sliding_window_mask,
    token_embedding,
)
from tw_jax.models.layers import EMBED_AXES, kadapter_output
from tw_jax.models.variants import KAdapterConfig, LoRAConfig

MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral")
# Hugging Face's class of each type, written to an exported config.json's ``architectures``.
ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM"}


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1's RoPE frequency scaling (``rope_type: llama3``), the one scaling modelled:
    frequencies whose wavelength exceeds ``original_max_position_embeddings / low_freq_factor``
    are divided by ``factor``, those below ``... / high_freq_factor`` kept, those between
    interpolated (:func:`rope_inverse_frequencies`)."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192
    rope_type: str = "llama3"

    def __post_init__(self) -> None:
        if self.rope_type != "llama3":
            raise ValueError(f"rope_type {self.rope_type!r} is not supported (only 'llama3')")
        if self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(f"high_freq_factor={self.high_freq_factor} must exceed "
                             f"low_freq_factor={self.low_freq_factor}")

    def to_hf(self) -> dict[str, Any]:
        return {"rope_type": "llama3", "factor": self.factor,
                "low_freq_factor": self.low_freq_factor, "high_freq_factor": self.high_freq_factor,
                "original_max_position_embeddings": self.original_max_position_embeddings}


# A gin file sets it as ``LlamaConfig.rope_scaling = @tw_jax.models.RopeScaling()``; the config
# classes themselves are registered by tw_jax.runtime.gin_setup, as every family's are.
gin.external_configurable(RopeScaling, module="tw_jax.models")


@dataclasses.dataclass(frozen=True)
class LlamaConfig(DecoderConfig):
    """Everything that fixes a Llama-style decoder's shapes and numerics; hashable so jit can
    key on it. Field names are Hugging Face's; the defaults are Llama 3.2 1B's."""

    vocab_size: int = 128256
    hidden_size: int = 2048
    intermediate_size: int = 8192
    num_hidden_layers: int = 16
    num_attention_heads: int = 32
    num_key_value_heads: int = 8  # grouped-query attention: each serves heads / kv_heads queries
    head_dim: int = 64  # explicit: Qwen3 sets it apart from hidden_size / num_attention_heads
    rms_norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    rope_scaling: RopeScaling | None = RopeScaling(factor=32.0)
    max_position_embeddings: int = 131072
    tie_word_embeddings: bool = True
    attention_bias: bool = False  # biases on q, k, v (and o, except in qwen2)
    qk_norm: bool = False  # qwen3: RMSNorm over head_dim on queries and keys before RoPE
    sliding_window: int | None = None  # mistral: keys in (q - window, q]
    bos_token_id: int | None = 128000
    eos_token_id: int = 128001
    extra_eos_token_ids: tuple[int, ...] = ()  # a config.json's further EOS ids (kept for export)
    pad_token_id: int | None = None
    initializer_range: float = 0.02
    attention_dropout: float = 0.0
    dtype: str = "float32"  # compute dtype; "bfloat16" on accelerators.
    param_dtype: str = "float32"
    remat: bool = False  # rematerialise each block in the backward pass
    # "xla" (einsum, softmax in float32), "fused" (jax.nn.dot_product_attention: cuDNN's fused
    # kernel on GPU, XLA elsewhere) or "cudnn" (that kernel or an error): decoder.py
    attention_kernel: str = "xla"
    # Continual-learning variants (see variants.py) and which base parameters train.
    lora: LoRAConfig | None = None
    kadapter: KAdapterConfig | None = None  # Llama layers fed from tapped hidden states
    freeze: str | None = None  # "none" | "base"; None: "base" with a variant, else "none".
    # The model's tokenizer by name (its tasks are ``*_lm_<name>``; the folder's tokenizer.json,
    # tw_jax.data.hf_tokenizer); None: GPT-2's vocabulary (the tiny configs). Not in config.json.
    tokenizer: str | None = None
    model_type: str = "llama"

    fixed_model_type: ClassVar[str] = "llama"

    @property
    def out_bias(self) -> bool:
        """Whether the output projection has a bias: ``attention_bias``, except in Qwen2, whose
        ``o_proj`` never has one (``modeling_qwen2.py``)."""
        return self.attention_bias and self.model_type != "qwen2"

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_eos_token_ids", tuple(self.extra_eos_token_ids))
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type {self.model_type!r} is not one of {MODEL_TYPES}")
        self._check_model_type()
        self._check_heads()
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"sliding_window={self.sliding_window} must be None or >= 1")
        # What each Hugging Face architecture can hold, so that export round-trips.
        required = {
            "qwen2": [("attention_bias", True), ("qk_norm", False), ("sliding_window", None)],
            "qwen3": [("qk_norm", True), ("sliding_window", None)],
            "mistral": [("attention_bias", False), ("qk_norm", False)],
            "llama": [("qk_norm", False), ("sliding_window", None)],
        }[self.model_type]
        for name, expected in required:
            if getattr(self, name) != expected:
                raise ValueError(f"{self.model_type} needs {name}={expected!r}, got "
                                 f"{getattr(self, name)!r}")

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], **overrides: Any) -> LlamaConfig:
        """Read a Hugging Face ``config.json`` (as a dict) of this class's ``model_type``;
        refuse options the module does not model rather than compute something else."""
        model_type = cls._hf_model_type(hf)
        for key, expected in (("hidden_act", "silu"), ("mlp_bias", False),
                              ("partial_rotary_factor", 1.0), ("use_sliding_window", False)):
            if hf.get(key, expected) != expected:
                raise ValueError(f"{model_type} option {key}={hf[key]!r} is not supported")
        layer_types = set(hf.get("layer_types") or ["full_attention"])
        if model_type != "mistral" and layer_types != {"full_attention"}:
            raise ValueError(f"{model_type} layer_types {sorted(layer_types)} are not supported "
                             "(only full attention in every layer)")
        heads = hf.get("num_attention_heads", 32)
        token_ids = cls._hf_token_ids(hf, model_type)
        fields = dict(
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_hidden_layers=hf["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=hf.get("num_key_value_heads") or heads,
            head_dim=hf.get("head_dim") or hf["hidden_size"] // heads,
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            max_position_embeddings=hf.get("max_position_embeddings", 2048),
            tie_word_embeddings=hf.get("tie_word_embeddings", False),
            attention_bias=(True if model_type == "qwen2"
                            else bool(hf.get("attention_bias", False))),
            qk_norm=model_type == "qwen3",
            sliding_window=hf.get("sliding_window") if model_type == "mistral" else None,
            pad_token_id=hf.get("pad_token_id"),
            initializer_range=hf.get("initializer_range", 0.02),
            attention_dropout=hf.get("attention_dropout", 0.0),
            model_type=model_type,
            **token_ids,
            **_rope_fields(hf),
        )
        fields.update(overrides)
        return cls(**fields)

    def to_hf_config(self) -> dict[str, Any]:
        """The Hugging Face ``config.json`` that describes this model (for export): RoPE both
        as transformers 5 writes it (``rope_parameters``) and as earlier versions read it
        (``rope_theta``, ``rope_scaling``)."""
        scaling = None if self.rope_scaling is None else self.rope_scaling.to_hf()
        hf = self._hf_config(
            ARCHITECTURES[self.model_type],
            hidden_act="silu",
            rope_theta=self.rope_theta,
            rope_scaling=scaling,
            rope_parameters={**(scaling or {"rope_type": "default"}), "rope_theta": self.rope_theta},
        )
        if self.model_type in ("llama", "qwen3"):
            hf["attention_bias"] = self.attention_bias
        if self.model_type == "llama":
            hf["mlp_bias"] = False
        if self.model_type == "mistral":
            hf["sliding_window"] = self.sliding_window
        if self.model_type in ("qwen2", "qwen3"):
            hf.update(use_sliding_window=False, sliding_window=None)
        return hf


@dataclasses.dataclass(frozen=True)
class Qwen2Config(LlamaConfig):
    """Qwen 2 / 2.5 (defaults: Qwen2.5-0.5B's shapes): biases on q, k and v."""

    vocab_size: int = 151936
    hidden_size: int = 896
    intermediate_size: int = 4864
    num_hidden_layers: int = 24
    num_attention_heads: int = 14
    num_key_value_heads: int = 2
    head_dim: int = 64
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1000000.0
    rope_scaling: RopeScaling | None = None
    max_position_embeddings: int = 32768
    attention_bias: bool = True
    bos_token_id: int | None = 151643
    eos_token_id: int = 151643
    model_type: str = "qwen2"

    fixed_model_type: ClassVar[str] = "qwen2"


@dataclasses.dataclass(frozen=True)
class Qwen3Config(LlamaConfig):
    """Qwen 3 (defaults: Qwen3-0.6B's shapes): RMSNorm on queries and keys, head_dim 128 over
    a hidden size of 1024 and 16 heads."""

    vocab_size: int = 151936
    hidden_size: int = 1024
    intermediate_size: int = 3072
    num_hidden_layers: int = 28
    num_attention_heads: int = 16
    num_key_value_heads: int = 8
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1000000.0
    rope_scaling: RopeScaling | None = None
    max_position_embeddings: int = 40960
    qk_norm: bool = True
    bos_token_id: int | None = 151643
    eos_token_id: int = 151645
    model_type: str = "qwen3"

    fixed_model_type: ClassVar[str] = "qwen3"


@dataclasses.dataclass(frozen=True)
class MistralConfig(LlamaConfig):
    """Mistral (defaults: Mistral-7B-v0.1's shapes): sliding-window attention."""

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 14336
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 8
    head_dim: int = 128
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = False
    sliding_window: int | None = 4096
    bos_token_id: int | None = 1
    eos_token_id: int = 2
    model_type: str = "mistral"

    fixed_model_type: ClassVar[str] = "mistral"


CONFIG_CLASSES: dict[str, type[LlamaConfig]] = {
    "llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config, "mistral": MistralConfig,
}


def _rope_fields(hf: dict[str, Any]) -> dict[str, Any]:
    """``rope_theta`` and ``rope_scaling`` of a ``config.json`` in either form: transformers 5's
    ``rope_parameters`` or the earlier ``rope_theta`` + ``rope_scaling`` (which transformers 5
    prefers when both are there; ``standardize_rope_params`` in ``modeling_rope_utils.py``)."""
    rope = hf.get("rope_scaling") or hf.get("rope_parameters") or {}
    if any(isinstance(value, dict) for value in rope.values()):
        raise ValueError("RoPE parameters per layer type are not supported")
    theta = float(rope.get("rope_theta", hf.get("rope_theta", 10000.0)))
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"partial_rotary_factor={rope['partial_rotary_factor']} is not supported")
    if rope_type == "default":
        return {"rope_theta": theta, "rope_scaling": None}
    if rope_type != "llama3":
        raise ValueError(f"rope_type {rope_type!r} is not supported (only 'default', 'llama3')")
    original = rope.get("original_max_position_embeddings", hf.get("max_position_embeddings"))
    scaling = RopeScaling(factor=float(rope["factor"]),
                          low_freq_factor=float(rope["low_freq_factor"]),
                          high_freq_factor=float(rope["high_freq_factor"]),
                          original_max_position_embeddings=int(original))
    return {"rope_theta": theta, "rope_scaling": scaling}


def config_from_hf(hf: dict[str, Any], **overrides: Any) -> LlamaConfig:
    """The config of a ``config.json`` of any of :data:`MODEL_TYPES`, in its type's class."""
    model_type = hf.get("model_type")
    if model_type not in CONFIG_CLASSES:
        raise ValueError(f"model_type {model_type!r} is not one of {MODEL_TYPES}")
    return CONFIG_CLASSES[model_type].from_hf_config(hf, **overrides)


# --- rotary positions --------------------------------------------------------------------


def rope_inverse_frequencies(config: LlamaConfig) -> np.ndarray:
    """``(head_dim // 2,)`` float32 inverse frequencies, computed as transformers does in
    float32: ``compute_default_rope_parameters`` (``1 / theta ** (2i / head_dim)``), then, with
    ``rope_scaling``, ``_compute_llama3_parameters`` of ``transformers/modeling_rope_utils.py``
    step for step (wavelengths above ``original / low_freq_factor`` divided by ``factor``,
    below ``original / high_freq_factor`` kept, in between interpolated by the smooth factor)."""
    inv_freq = default_inverse_frequencies(config.head_dim, config.rope_theta)
    scaling = config.rope_scaling
    if scaling is None:
        return inv_freq.astype(np.float32)
    factor = np.float32(scaling.factor)
    low, high = np.float32(scaling.low_freq_factor), np.float32(scaling.high_freq_factor)
    old_context_len = np.float32(scaling.original_max_position_embeddings)
    low_freq_wavelen = old_context_len / low
    high_freq_wavelen = old_context_len / high
    wavelen = np.float32(2 * math.pi) / inv_freq
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(is_medium_freq, smoothed, inv_freq_llama).astype(np.float32)


# --- layers --------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    """``scale * x / sqrt(mean(x²) + eps)`` over the last axis, normalised in float32 and
    scaled in the compute dtype (``LlamaRMSNorm``)."""

    epsilon: float
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        scale = self.param("scale", nn.with_logical_partitioning(nn.initializers.ones, ("norm",)),
                           (x.shape[-1],), self.param_dtype)
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.epsilon)
        return scale.astype(self.dtype) * normed.astype(self.dtype)


def _norm(config: LlamaConfig, name: str) -> RMSNorm:
    return RMSNorm(config.rms_norm_eps, jnp.dtype(config.dtype), jnp.dtype(config.param_dtype),
                   name=name)


class Block(nn.Module):
    """One pre-RMSNorm decoder layer: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``.
    Attention is grouped-query with rotary positions, biases on q, k, v with ``attention_bias``
    (on o too, except in Qwen2), Qwen3's q/k norms, scores scaled by ``head_dim ** -0.5``; the
    MLP is SiLU-gated: ``down(silu(gate(x)) * up(x))``."""

    config: LlamaConfig

    @nn.compact
    def __call__(
        self, x: jax.Array, mask: jax.Array, positions: jax.Array,
        cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        attention = Attention(cfg, rope_inverse_frequencies(cfg), cfg.head_dim,
                              qk_norm=_norm if cfg.qk_norm else None, bias=cfg.attention_bias,
                              out_bias=cfg.out_bias, name="attn")
        h = attention(_norm(cfg, "input_norm")(x), mask, positions, cache_index, decode,
                      deterministic)
        x = nn.with_logical_constraint(x + h, EMBED_AXES)
        h = GatedMLP(cfg, jax.nn.silu, name="mlp")(_norm(cfg, "post_attention_norm")(x))
        return nn.with_logical_constraint(x + h, EMBED_AXES)


class KAdapter(nn.Module):
    """K-Adapter on the decoder stack, as GPT-2's (``gpt2.py``): Llama layers named
    ``adapter_{i}`` fed from the tapped hidden states and chained, ``0.1 * LayerNorm(out)``
    added to the final (normed) hidden state; each adapter layer has its own key/value cache
    and the base model's RoPE, so decoding runs it step by step too."""

    config: LlamaConfig

    @nn.compact
    def __call__(
        self, base: jax.Array, tapped: list[jax.Array], mask: jax.Array, positions: jax.Array,
        cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        block = remat_block(Block, cfg)
        return kadapter_output(
            base, tapped,
            lambda i, h: block(cfg, name=f"adapter_{i}")(h, mask, positions, cache_index,
                                                          decode, deterministic),
            cfg.kadapter, jnp.dtype(cfg.dtype), jnp.dtype(cfg.param_dtype),
        )


class Llama(nn.Module):
    """A Llama-style language model; the same call as GPT-2's.

    Call with ``input_ids`` ``(batch, length)``; returns float32 logits ``(batch, length,
    vocab)``. ``attention_mask`` (1 = real token) hides padding keys; ``positions`` default to
    ``0..length-1`` (in decode mode, continuing from the cache index); ``segment_ids`` with
    ``positions`` (each example's own, from 0) describe packed rows. With ``decode=True`` the
    first call creates an empty cache sized by its input (``decoding.init_cache``); later calls
    append a prefix or one step to it.
    """

    config: LlamaConfig

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
        causal, positions = causal_inputs(self, input_ids, positions, attention_mask, decode,
                                          segment_ids)
        mask = sliding_window_mask(causal, cfg.sliding_window)

        tokens = token_embedding(cfg)
        x = nn.with_logical_constraint(tokens(input_ids), EMBED_AXES)

        block = remat_block(Block, cfg)
        taps = cfg.kadapter.tap_layers(cfg.num_hidden_layers) if cfg.kadapter else ()
        tapped = []
        for i in range(cfg.num_hidden_layers):
            x = block(cfg, name=f"layer_{i}")(x, mask, positions, causal.cache_index, decode,
                                              deterministic)
            if i in taps:
                tapped.append(x)

        x = _norm(cfg, "final_norm")(x)
        if cfg.kadapter is not None:
            x = KAdapter(cfg, name="kadapter")(x, tapped, mask, positions, causal.cache_index,
                                               decode, deterministic)
        return nn.with_logical_constraint(lm_logits(cfg, tokens, x), LOGIT_AXES)
