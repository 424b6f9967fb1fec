"""Gemma 3 text decoders (``model_type`` ``gemma3_text``, Hugging Face's ``Gemma3ForCausalLM``)
as a Flax linen model: config, RoPE per layer type, RMSNorm, block, model.

Gemma 3 is a Llama-style decoder (``llama.py``: rotary positions, grouped-query attention, a
gated MLP, no biases) with these differences, each as ``transformers``' ``modeling_gemma3.py``
(5.24) computes it:

- RMSNorm scales by ``1 + w`` (a zero-centred weight), all in float32 (``Gemma3RMSNorm``);
- each layer norms before *and after* attention and the MLP: ``x + post_attn(attn(in(x)))``,
  then ``x + post_ffw(mlp(pre_ffw(x)))`` (``Gemma3DecoderLayer``);
- the MLP is GeGLU: ``down(gelu_tanh(gate(x)) * up(x))`` (``Gemma3MLP``, ``hidden_activation``);
- queries and keys are RMS-normed over ``head_dim`` before RoPE, and scores are scaled by
  ``query_pre_attn_scalar ** -0.5``, not ``head_dim ** -0.5`` (``Gemma3Attention``);
- token embeddings are multiplied by ``sqrt(hidden_size)`` (``Gemma3TextScaledWordEmbedding``);
- layers are ``sliding_attention`` (a query sees the ``sliding_window`` latest keys, itself
  included) or ``full_attention`` by ``layer_types``, each type with its RoPE: base
  ``rope_local_base_freq`` for sliding layers, ``rope_theta`` and an optional linear scaling
  (factor 8 in the 4B, 12B and 27B models) for global ones (``Gemma3RotaryEmbedding``);
- ``final_logit_softcapping`` (None in Gemma 3, honoured if set): ``cap * tanh(logits / cap)``.

The pieces that are the same are ``decoder.py``'s, shared with llama.py: the default RoPE
frequencies and rotation, the sliding-window mask, grouped-query self-attention with its decode
cache (key/value heads only), the gated MLP, the model's ends and the config's common methods.
Parameter names, logical axes, LoRA targets (``query``, ``key``, ``value``, ``out``, ``gate``,
``up``, ``down``), remat and dtypes are llama.py's too. ``gemma_io.py`` reads and writes Hugging
Face checkpoints.

BOS: Gemma is trained with ``<bos>`` (id 2) in front of every text; the config keeps the BOS and
EOS ids, but prepending BOS when scoring and prompting (where GPT-2 uses EOS) is a later step,
with the model folder's tokenizer.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import flax.linen as nn
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
from tw_jax.models.layers import EMBED_AXES, activations, kadapter_output
from tw_jax.models.variants import KAdapterConfig, LoRAConfig

ARCHITECTURES = {"gemma3_text": "Gemma3ForCausalLM"}
SLIDING, FULL = "sliding_attention", "full_attention"
LAYER_TYPES = (SLIDING, FULL)
# Gemma3TextConfig's default when a config.json has neither layer_types nor this period: every
# sixth layer global (``(i + 1) % sliding_window_pattern == 0``), the others sliding.
DEFAULT_SLIDING_WINDOW_PATTERN = 6
_GELU = "gelu_pytorch_tanh"


def pattern_layer_types(num_layers: int, pattern: int) -> tuple[str, ...]:
    """The layer types an older config's ``sliding_window_pattern`` stands for, as
    ``Gemma3TextConfig.__post_init__`` derives them: layer ``i`` global when ``(i + 1) %
    pattern == 0``."""
    return tuple(SLIDING if (i + 1) % pattern else FULL for i in range(num_layers))


@dataclasses.dataclass(frozen=True)
class GemmaConfig(DecoderConfig):
    """Everything that fixes a Gemma 3 text decoder's shapes and numerics; hashable so jit can
    key on it. Field names are Hugging Face's (``rope_local_base_freq`` and
    ``rope_scaling_factor`` are what the older ``config.json`` form and its ``rope_scaling``
    hold); the defaults are Gemma 3 1B's (``google/gemma-3-1b-pt``)."""

    vocab_size: int = 262144
    hidden_size: int = 1152
    intermediate_size: int = 6912
    num_hidden_layers: int = 26
    num_attention_heads: int = 4
    num_key_value_heads: int = 1  # grouped-query attention: each serves heads / kv_heads queries
    head_dim: int = 256
    query_pre_attn_scalar: float = 256  # scores scaled by its -1/2 power
    rms_norm_eps: float = 1e-6
    sliding_window: int = 512  # sliding layers: keys in (q - window, q]
    # Each layer's attention; None: every sixth global (DEFAULT_SLIDING_WINDOW_PATTERN).
    layer_types: tuple[str, ...] | None = None
    rope_theta: float = 1_000_000.0  # global (full_attention) layers
    rope_scaling_factor: float | None = None  # global layers' linear RoPE scaling (8 in 4B+)
    rope_local_base_freq: float = 10_000.0  # sliding layers (never scaled)
    final_logit_softcapping: float | None = None
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = True
    bos_token_id: int | None = 2
    eos_token_id: int = 1
    extra_eos_token_ids: tuple[int, ...] = ()  # a config.json's further EOS ids (kept for export)
    pad_token_id: int | None = 0
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
    kadapter: KAdapterConfig | None = None  # global-attention layers fed from tapped states
    freeze: str | None = None  # "none" | "base"; None: "base" with a variant, else "none".
    # The model's tokenizer by name (its tasks are ``*_lm_<name>``; the folder's tokenizer.json,
    # tw_jax.data.hf_tokenizer); None: GPT-2's vocabulary (the tiny configs). Not in config.json.
    tokenizer: str | None = None
    model_type: str = "gemma3_text"

    fixed_model_type: ClassVar[str] = "gemma3_text"

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_eos_token_ids", tuple(self.extra_eos_token_ids))
        layer_types = (pattern_layer_types(self.num_hidden_layers, DEFAULT_SLIDING_WINDOW_PATTERN)
                       if self.layer_types is None else tuple(self.layer_types))
        object.__setattr__(self, "layer_types", layer_types)
        self._check_model_type()
        if len(layer_types) != self.num_hidden_layers:
            raise ValueError(f"layer_types has {len(layer_types)} entries for "
                             f"num_hidden_layers={self.num_hidden_layers}")
        unknown = sorted(set(layer_types) - set(LAYER_TYPES))
        if unknown:
            raise ValueError(f"layer_types {unknown} are not supported (only {LAYER_TYPES})")
        self._check_heads()
        if self.sliding_window < 1:
            raise ValueError(f"sliding_window={self.sliding_window} must be >= 1")
        for name in ("rope_scaling_factor", "final_logit_softcapping"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name}={value} must be None or positive")

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], **overrides: Any) -> GemmaConfig:
        """Read a ``gemma3_text`` ``config.json`` (as a dict), transformers 5's form
        (``layer_types``, ``rope_parameters`` per layer type) or the older one
        (``sliding_window_pattern``, ``rope_theta``, ``rope_local_base_freq``, ``rope_scaling``);
        a key it lacks takes ``Gemma3TextConfig``'s default, as transformers reads it. Options
        the module does not model are refused rather than computed otherwise."""
        model_type = cls._hf_model_type(hf)
        for key, expected in (("hidden_activation", _GELU), ("attention_bias", False),
                              ("use_bidirectional_attention", False)):
            if (hf.get(key) or expected) != expected:
                raise ValueError(f"{model_type} option {key}={hf[key]!r} is not supported")
        if hf.get("attn_logit_softcapping") is not None:
            # Gemma3Attention keeps the value but never passes it to its attention function.
            raise ValueError(f"{model_type} option attn_logit_softcapping="
                             f"{hf['attn_logit_softcapping']!r} is not supported (transformers' "
                             "Gemma3Attention does not apply it either)")
        heads = hf.get("num_attention_heads", 8)
        layers = hf.get("num_hidden_layers", 26)
        layer_types = hf.get("layer_types") or pattern_layer_types(
            layers, hf.get("sliding_window_pattern", DEFAULT_SLIDING_WINDOW_PATTERN))
        token_ids = cls._hf_token_ids(hf, model_type, bos=2, eos=1)
        fields = dict(
            vocab_size=hf.get("vocab_size", 262208),
            hidden_size=hf.get("hidden_size", 2304),
            intermediate_size=hf.get("intermediate_size", 9216),
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=hf.get("num_key_value_heads") or 4,
            head_dim=hf.get("head_dim") or 256,
            query_pre_attn_scalar=hf.get("query_pre_attn_scalar", 256),
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            sliding_window=hf.get("sliding_window") or 4096,
            layer_types=tuple(layer_types),
            final_logit_softcapping=hf.get("final_logit_softcapping"),
            max_position_embeddings=hf.get("max_position_embeddings", 131072),
            tie_word_embeddings=hf.get("tie_word_embeddings", True),
            pad_token_id=hf.get("pad_token_id", 0),
            initializer_range=hf.get("initializer_range", 0.02),
            attention_dropout=hf.get("attention_dropout") or 0.0,
            **token_ids,
            **_rope_fields(hf),
        )
        fields.update(overrides)
        return cls(**fields)

    def to_hf_config(self) -> dict[str, Any]:
        """The ``config.json`` of this model (for export): RoPE both as transformers 5 writes it
        (``rope_parameters`` per layer type) and as earlier versions read it (``rope_theta``,
        ``rope_local_base_freq``, ``rope_scaling``)."""
        scaling = (None if self.rope_scaling_factor is None
                   else {"rope_type": "linear", "factor": self.rope_scaling_factor})
        return self._hf_config(
            ARCHITECTURES[self.model_type],
            query_pre_attn_scalar=_int_if_whole(self.query_pre_attn_scalar),
            hidden_activation=_GELU,
            sliding_window=self.sliding_window,
            layer_types=list(self.layer_types),
            rope_theta=self.rope_theta,
            rope_local_base_freq=self.rope_local_base_freq,
            rope_scaling=scaling,
            rope_parameters={
                FULL: {**(scaling or {"rope_type": "default"}), "rope_theta": self.rope_theta},
                SLIDING: {"rope_type": "default", "rope_theta": self.rope_local_base_freq},
            },
            final_logit_softcapping=self.final_logit_softcapping,
            attn_logit_softcapping=None,
            attention_bias=False,
            use_bidirectional_attention=False,
        )


@dataclasses.dataclass(frozen=True)
class Gemma3MultimodalConfig(GemmaConfig):
    """What the family registry keys multimodal Gemma 3 checkpoints by (``model_type``
    ``gemma3``, the only form of the 4B, 12B and 27B models on the Hub): their text decoder is
    a :class:`GemmaConfig` model, which :meth:`from_hf_config` returns from the ``text_config``
    (the vision tower and projector are not read). An instance is a GemmaConfig in all but name."""

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], **overrides: Any) -> GemmaConfig:
        return GemmaConfig.from_hf_config(text_config_of(hf), **overrides)


def _int_if_whole(value: float) -> float:
    """An int where the value is whole: ``Gemma3TextConfig`` types ``query_pre_attn_scalar`` as
    an int and its strict validation refuses 256.0."""
    return int(value) if float(value).is_integer() else value


def text_config_of(hf: dict[str, Any]) -> dict[str, Any]:
    """The ``gemma3_text`` config inside a multimodal Gemma 3 ``config.json`` (``model_type``
    ``gemma3``, ``Gemma3ForConditionalGeneration``): its ``text_config``, the keys it lacks (Hub
    files from transformers 4 list only what differs from the defaults) filled from the top
    level for the token ids and the tying, else left to ``Gemma3TextConfig``'s defaults."""
    text = hf.get("text_config")
    if hf.get("model_type") != "gemma3" or not isinstance(text, dict):
        raise ValueError(f"not a gemma3 config with a text_config: model_type="
                         f"{hf.get('model_type')!r}")
    shared = ("bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings")
    return {"model_type": "gemma3_text", **{k: hf[k] for k in shared if k in hf}, **text}


def _rope_parameters(rope: Any, layer_type: str) -> dict[str, Any]:
    """One layer type's RoPE dict of ``rope_parameters`` (transformers 5), ``{}`` if absent."""
    if rope is None:
        return {}
    if not isinstance(rope, dict) or any(k not in LAYER_TYPES for k in rope):
        raise ValueError(f"gemma3_text rope_parameters must be keyed by layer type "
                         f"{LAYER_TYPES}, got {rope!r}")
    return dict(rope.get(layer_type) or {})


def _rope_fields(hf: dict[str, Any]) -> dict[str, Any]:
    """The RoPE fields of a ``config.json`` in either form, as
    ``Gemma3TextConfig.convert_rope_params_to_dict`` merges them: ``rope_parameters`` per layer
    type; an old ``rope_scaling`` updates the global layers' dict; ``rope_theta`` and
    ``rope_local_base_freq`` fill the global and sliding bases where that has none (defaults 1e6
    and 1e4). Only ``default`` and ``linear`` (global layers) RoPE are modelled."""
    rope = hf.get("rope_parameters")
    full, sliding = _rope_parameters(rope, FULL), _rope_parameters(rope, SLIDING)
    full.update(hf.get("rope_scaling") or {})
    full.setdefault("rope_theta", hf.get("rope_theta", 1_000_000.0))
    sliding.setdefault("rope_theta", hf.get("rope_local_base_freq", 10_000.0))
    for layer_type, params in ((FULL, full), (SLIDING, sliding)):
        if params.get("partial_rotary_factor", 1.0) != 1.0:
            raise ValueError(f"gemma3_text {layer_type} partial_rotary_factor="
                             f"{params['partial_rotary_factor']} is not supported")
    full_type = full.get("rope_type", full.get("type", "default"))
    sliding_type = sliding.get("rope_type", sliding.get("type", "default"))
    if sliding_type != "default":
        raise ValueError(f"gemma3_text {SLIDING} rope_type {sliding_type!r} is not supported "
                         "(only 'default')")
    if full_type not in ("default", "linear"):
        raise ValueError(f"gemma3_text {FULL} rope_type {full_type!r} is not supported "
                         "(only 'default', 'linear')")
    return {"rope_theta": float(full["rope_theta"]),
            "rope_scaling_factor": float(full["factor"]) if full_type == "linear" else None,
            "rope_local_base_freq": float(sliding["rope_theta"])}


# --- rotary positions --------------------------------------------------------------------


def rope_inverse_frequencies(config: GemmaConfig, layer_type: str) -> np.ndarray:
    """``(head_dim // 2,)`` float32 inverse frequencies of a layer type, as
    ``Gemma3RotaryEmbedding`` builds them: sliding layers ``compute_default_rope_parameters``
    with ``rope_local_base_freq``; global ones with ``rope_theta``, divided by the factor under
    linear scaling (``_compute_linear_scaling_rope_parameters``: ``inv_freq /= factor`` in
    float32). Neither rescales cos/sin (``attention_scaling`` 1)."""
    if layer_type == SLIDING:
        return default_inverse_frequencies(config.head_dim, config.rope_local_base_freq)
    inv_freq = default_inverse_frequencies(config.head_dim, config.rope_theta)
    if config.rope_scaling_factor is not None:
        inv_freq = inv_freq / np.float32(config.rope_scaling_factor)
    return inv_freq.astype(np.float32)


# --- layers --------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    """Gemma's RMSNorm: ``x / sqrt(mean(x²) + eps) * (1 + w)`` over the last axis, all of it in
    float32, then cast to the compute dtype (``Gemma3RMSNorm``: Llama's multiplies in the low
    dtype, Gemma's before casting). ``w`` starts at zero: the identity scale."""

    epsilon: float
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        scale = self.param("scale", nn.with_logical_partitioning(nn.initializers.zeros, ("norm",)),
                           (x.shape[-1],), self.param_dtype)
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.epsilon)
        return (normed * (1.0 + scale.astype(jnp.float32))).astype(self.dtype)


def _norm(config: GemmaConfig, name: str) -> RMSNorm:
    return RMSNorm(config.rms_norm_eps, jnp.dtype(config.dtype), jnp.dtype(config.param_dtype),
                   name=name)


class Block(nn.Module):
    """One Gemma 3 layer (``Gemma3DecoderLayer``) of one layer type: ``x +
    post_attention_norm(attn(input_norm(x)))``, then ``x +
    post_feedforward_norm(mlp(pre_feedforward_norm(x)))``. Attention (``Gemma3Attention``)
    RMS-norms queries and keys over ``head_dim``, rotates them with the layer type's RoPE and
    scales scores by ``query_pre_attn_scalar ** -0.5``; in decode mode the key/value heads
    (after RoPE) go to the ``attn`` module's ``cache`` collection. The MLP is GeGLU:
    ``down(gelu_pytorch_tanh(gate(x)) * up(x))`` (``Gemma3MLP``)."""

    config: GemmaConfig
    layer_type: str

    @nn.compact
    def __call__(
        self, x: jax.Array, mask: jax.Array, positions: jax.Array,
        cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        attention = Attention(cfg, rope_inverse_frequencies(cfg, self.layer_type),
                              cfg.query_pre_attn_scalar, qk_norm=_norm, name="attn")
        h = attention(_norm(cfg, "input_norm")(x), mask, positions, cache_index, decode,
                      deterministic)
        x = nn.with_logical_constraint(x + _norm(cfg, "post_attention_norm")(h), EMBED_AXES)
        h = GatedMLP(cfg, activations(_GELU)[_GELU], name="mlp")(
            _norm(cfg, "pre_feedforward_norm")(x))
        return nn.with_logical_constraint(x + _norm(cfg, "post_feedforward_norm")(h), EMBED_AXES)


class KAdapter(nn.Module):
    """K-Adapter on the decoder stack, as GPT-2's and Llama's: Gemma layers of global attention
    (the ``full_attention`` type: every earlier position, the global RoPE) named
    ``adapter_{i}``, fed from the tapped hidden states and chained, ``0.1 * LayerNorm(out)``
    added to the final (normed) hidden state, with their own key/value caches."""

    config: GemmaConfig

    @nn.compact
    def __call__(
        self, base: jax.Array, tapped: list[jax.Array], mask: jax.Array, positions: jax.Array,
        cache_index: jax.Array | None, decode: bool, deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        block = remat_block(Block, cfg)
        return kadapter_output(
            base, tapped,
            lambda i, h: block(cfg, FULL, name=f"adapter_{i}")(h, mask, positions, cache_index,
                                                                decode, deterministic),
            cfg.kadapter, jnp.dtype(cfg.dtype), jnp.dtype(cfg.param_dtype),
        )


class Gemma(nn.Module):
    """A Gemma 3 text model; the same call as GPT-2's and Llama's.

    Call with ``input_ids`` ``(batch, length)``; returns float32 logits ``(batch, length,
    vocab)``. ``attention_mask`` (1 = real token) hides padding keys; ``positions`` default to
    ``0..length-1`` (in decode mode, continuing from the cache index); ``segment_ids`` with
    ``positions`` describe packed rows. With ``decode=True`` the first call creates an empty
    cache sized by its input (``decoding.init_cache``); later calls append a prefix or one step.
    The sliding layers' cache holds every position too (their mask hides the old ones), so the
    cache is not the window's size as transformers' ``DynamicSlidingWindowLayer`` is.
    """

    config: GemmaConfig

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
        # create_causal_mask / create_sliding_window_causal_mask of Gemma3TextModel.forward
        masks = {FULL: causal.mask, SLIDING: sliding_window_mask(causal, cfg.sliding_window)}

        tokens = token_embedding(cfg)
        x = tokens(input_ids)
        # Gemma3TextScaledWordEmbedding: sqrt(hidden_size) as a float32 scalar, cast to the
        # dtype of the embeddings it multiplies (bfloat16 rounds sqrt(1152) = 33.94 to 34.0).
        x = x * jnp.asarray(math.sqrt(cfg.hidden_size), jnp.float32).astype(x.dtype)
        x = nn.with_logical_constraint(x, EMBED_AXES)

        block = remat_block(Block, cfg)
        taps = cfg.kadapter.tap_layers(cfg.num_hidden_layers) if cfg.kadapter else ()
        tapped = []
        for i, layer_type in enumerate(cfg.layer_types):
            x = block(cfg, layer_type, name=f"layer_{i}")(
                x, masks[layer_type], positions, causal.cache_index, decode, deterministic)
            if i in taps:
                tapped.append(x)

        x = _norm(cfg, "final_norm")(x)
        if cfg.kadapter is not None:
            x = KAdapter(cfg, name="kadapter")(x, tapped, masks[FULL], positions,
                                               causal.cache_index, decode, deterministic)
        logits = lm_logits(cfg, tokens, x)
        if cfg.final_logit_softcapping is not None:  # Gemma3ForCausalLM.forward
            cap = jnp.float32(cfg.final_logit_softcapping)
            logits = jnp.tanh(logits / cap) * cap
        return nn.with_logical_constraint(logits, LOGIT_AXES)
