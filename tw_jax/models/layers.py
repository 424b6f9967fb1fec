"""Pieces shared by the model families: the activations, the dense layer (with its optional
LoRA), embeddings and norms, the residual step, the attention keys/values with their decode
cache, the attention computation, the feed-forward block and the K-Adapter chain.

One copy each, so that a fix or a numerics decision (float32 scores, where dropout sits) reaches
every family at once; the family files keep what differs (names, initialiser scales, pre- or
post-LN order)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from tw_jax.models.variants import KAdapterConfig, LoRAConfig

# Hugging Face's activation names; a family accepts the subset its checkpoints use.
_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
}

HEADS_AXES = ("batch", "length", "activation_heads", "activation_kv")
EMBED_AXES = ("batch", "length", "activation_embed")


def activations(*names: str) -> dict[str, Callable[[jax.Array], jax.Array]]:
    """The activations a family accepts, in its order. A name means the same function in every
    family (``gelu`` the exact erf GELU, ``gelu_new`` the tanh one, as in Hugging Face), while
    each config still refuses the names its family's checkpoints never use."""
    return {name: _ACTIVATIONS[name] for name in names}


def normal_init(stddev: float, axes: tuple[str | None, ...]) -> nn.initializers.Initializer:
    """Normal(0, stddev) initialiser carrying logical axis names."""
    return nn.with_logical_partitioning(nn.initializers.normal(stddev), axes)


def layer_norm(epsilon: float, dtype: Any, param_dtype: Any, name: str) -> nn.LayerNorm:
    """A LayerNorm (scale and bias) whose parameters carry the ``norm`` logical axis."""
    return nn.LayerNorm(
        epsilon=epsilon, dtype=dtype, param_dtype=param_dtype,
        scale_init=nn.with_logical_partitioning(nn.initializers.ones, ("norm",)),
        bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("norm",)),
        name=name,
    )


def embed(
    config: Any, rows: int, features: int, stddev: float, axes: tuple[str | None, ...],
    name: str | None = None,
) -> nn.Embed:
    """An embedding table in ``config``'s compute and parameter dtypes (any family's config),
    initialised N(0, stddev), its parameter carrying the logical ``axes``; ``name`` None lets a
    ``setup`` attribute name it."""
    return nn.Embed(
        rows, features, dtype=jnp.dtype(config.dtype), param_dtype=jnp.dtype(config.param_dtype),
        embedding_init=normal_init(stddev, axes), name=name,
    )


def add_residual(
    x: jax.Array, h: jax.Array, drop: nn.Dropout, deterministic: bool,
    norm: nn.Module | None = None,
) -> jax.Array:
    """The residual step of every family, ``x + dropout(h)``, then ``norm`` in the post-LN ones
    (BART, BERT), constrained to the residual stream's layout. ``drop`` is the caller's: which
    Dropout module draws the mask decides the random numbers, so a layer keeps its own."""
    x = x + drop(h, deterministic=deterministic)
    if norm is not None:
        x = norm(x)
    return nn.with_logical_constraint(x, EMBED_AXES)


def _contract(x: jax.Array, kernel: jax.Array, n_axes: int) -> jax.Array:
    """``x`` contracted over its last ``n_axes`` dimensions with the first ``n_axes`` of ``kernel``."""
    contract = (tuple(range(x.ndim - n_axes, x.ndim)), tuple(range(n_axes)))
    return jax.lax.dot_general(x, kernel, (contract, ((), ())))


class DenseGeneral(nn.Module):
    """``x @ kernel (+ bias)`` over the last ``n_axes`` input dimensions, with logical axis names.

    Our own rather than ``nn.DenseGeneral``: that one initialises a flattened kernel and reshapes
    it, which trips the logical constraint of a boxed multi-dimensional kernel on a mesh. GPT-2 uses
    biases, T5 does not; ``stddev`` is the model's initialiser scale for this projection.

    With ``lora`` set, the projection also carries LoRA's low-rank update (Hu et al. 2021):
    ``y = x W + scale * (x A) B`` with ``A ~ N(0, lora.init_stddev)`` of shape ``(in..., rank)`` and
    ``B = 0`` of shape ``(rank, out...)``, so a fresh LoRA changes nothing. The base kernel keeps
    its name and shape: a pretrained checkpoint loads unchanged and only ``lora_a``/``lora_b`` are new.
    """

    features: tuple[int, ...]
    kernel_axes: tuple[str, ...]
    stddev: float
    n_axes: int = 1
    use_bias: bool = False
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32
    lora: LoRAConfig | None = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        in_shape = x.shape[x.ndim - self.n_axes:]
        in_axes, out_axes = self.kernel_axes[: self.n_axes], self.kernel_axes[self.n_axes:]
        kernel = self.param(
            "kernel", normal_init(self.stddev, self.kernel_axes), (*in_shape, *self.features),
            self.param_dtype,
        )
        x = x.astype(self.dtype)
        y = _contract(x, kernel.astype(self.dtype), self.n_axes)
        if self.use_bias:
            bias = self.param(
                "bias", nn.with_logical_partitioning(nn.initializers.zeros, out_axes),
                self.features, self.param_dtype,
            )
            y = y + bias.astype(self.dtype)
        if self.lora is not None:
            rank = self.lora.rank
            lora_a = self.param(
                "lora_a", normal_init(self.lora.init_stddev, (*in_axes, "lora_rank")),
                (*in_shape, rank), self.param_dtype,
            )
            lora_b = self.param(
                "lora_b", nn.with_logical_partitioning(nn.initializers.zeros, ("lora_rank", *out_axes)),
                (rank, *self.features), self.param_dtype,
            )
            low = _contract(x, lora_a.astype(self.dtype), self.n_axes)
            y = y + jnp.asarray(self.lora.scale, self.dtype) * _contract(
                low, lora_b.astype(self.dtype), 1
            )
        return y


def dense(
    config: Any, features: tuple[int, ...], axes: tuple[str | None, ...], stddev: float, name: str,
    *, n_axes: int = 1, use_bias: bool = False,
) -> DenseGeneral:
    """A family's projection named ``name``, in ``config``'s dtypes, carrying the config's LoRA
    when that targets ``name``: LoRA wraps projections by name in every family, so the choice is
    made here once (a config without a ``lora`` field, BERT's, gets none)."""
    lora = getattr(config, "lora", None)
    return DenseGeneral(
        features, axes, stddev, n_axes=n_axes, use_bias=use_bias, dtype=jnp.dtype(config.dtype),
        param_dtype=jnp.dtype(config.param_dtype),
        lora=lora if lora is not None and lora.applies_to(name) else None, name=name,
    )


def cached_key_value(
    module: nn.Module, key: jax.Array, value: jax.Array, cache_index: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Self-attention keys/values through the ``cache`` collection, for decoding.

    The first (initialising) call creates the cache in the shape of its keys, which fixes the
    maximum length, and returns its inputs; later calls write theirs at ``cache_index`` and
    return the whole cache.
    """
    initialised = module.has_variable("cache", "cached_key")
    cached_key = module.variable("cache", "cached_key", jnp.zeros, key.shape, key.dtype)
    cached_value = module.variable("cache", "cached_value", jnp.zeros, value.shape, value.dtype)
    if not initialised:
        return key, value
    start = (0, cache_index, 0, 0)
    cached_key.value = jax.lax.dynamic_update_slice(cached_key.value, key, start)
    cached_value.value = jax.lax.dynamic_update_slice(cached_value.value, value, start)
    return cached_key.value, cached_value.value


def attention_key_value(
    module: nn.Module, project: Callable[[str, jax.Array], jax.Array], x: jax.Array,
    kv: jax.Array | None, *, cross: bool, cache_index: jax.Array | None, decode: bool,
) -> tuple[jax.Array, jax.Array]:
    """Keys and values of an attention (``project(name, source)`` makes one of them), through the
    ``cache`` collection in decode mode.

    Self-attention projects ``x`` and, decoding, appends to its cache (:func:`cached_key_value`).
    Cross-attention projects the encoder output ``kv``; decoding, the call that passes ``kv``
    stores the keys/values and later calls pass ``kv=None`` and reuse them, so the encoder output
    is projected once per sequence, not once per step.
    """
    if not cross:
        key, value = project("key", x), project("value", x)
        return cached_key_value(module, key, value, cache_index) if decode else (key, value)
    if kv is None:
        if not decode:
            raise ValueError("cross-attention needs the encoder output outside decode mode")
        return (module.get_variable("cache", "cached_key"),
                module.get_variable("cache", "cached_value"))
    key, value = project("key", kv), project("value", kv)
    if decode:
        module.put_variable("cache", "cached_key", key)
        module.put_variable("cache", "cached_value", value)
    return key, value


def attend(
    query: jax.Array, key: jax.Array, value: jax.Array, mask: jax.Array, *,
    dropout_rate: float, deterministic: bool, dtype: Any, divide_by: jax.Array | None = None,
    bias: jax.Array | None = None,
) -> jax.Array:
    """Softmax attention of ``(batch, length, heads, head_dim)`` queries over keys and values,
    for every family: scores in float32, divided by ``divide_by`` (GPT-2's sqrt(head_dim); T5
    scales nothing), plus ``bias`` (T5's relative positions), masked positions (``mask`` False,
    ``(batch, 1, q_len, kv_len)``) at float32's minimum, dropout on the probabilities. Call it
    inside a compact module: the dropout layer becomes that module's."""
    scores = jnp.einsum("bqhd,bkhd->bhqk", query, key, preferred_element_type=jnp.float32)
    if divide_by is not None:
        scores = scores / divide_by
    if bias is not None:
        scores = scores + bias
    scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(dtype)
    probs = nn.Dropout(dropout_rate)(probs, deterministic=deterministic)
    return nn.with_logical_constraint(jnp.einsum("bhqk,bkhd->bqhd", probs, value), HEADS_AXES)


def kadapter_output(
    base: jax.Array, tapped: list[jax.Array], run_block: Callable[[int, jax.Array], jax.Array],
    kadapter: KAdapterConfig, dtype: Any, param_dtype: Any,
) -> jax.Array:
    """K-Adapter for every family: adapter ``i`` (``run_block(i, h)``, a block of the family
    named ``adapter_{i}``) reads ``tapped[i] + previous adapter output``; the result is added to
    the base model's output as ``output_scale * LayerNorm(adapter output)`` (a LayerNorm with
    bias, as in the K-Adapter code). Call it inside the family's compact KAdapter module."""
    h = None
    for i, tap in enumerate(tapped):
        h = tap if h is None else tap + h
        h = run_block(i, h)
    norm = layer_norm(kadapter.norm_epsilon, dtype, param_dtype, "output_norm")
    out = base + jnp.asarray(kadapter.output_scale, base.dtype) * norm(h)
    return nn.with_logical_constraint(out, EMBED_AXES)


def feed_forward(
    x: jax.Array, inputs: Sequence[DenseGeneral], output: DenseGeneral,
    activation: Callable[[jax.Array], jax.Array], *, dropout_rate: float | None = None,
    deterministic: bool = True,
) -> jax.Array:
    """The position-wise feed-forward block of every family: ``output(act(in_0(x)) * in_1(x)
    …)`` (one input projection: GPT-2 and T5; two: T5 v1.1's and Llama's gated form), with
    dropout on the hidden units where the family has it (T5: ``dropout_rate``; GPT-2 none).
    The projections carry the family's names and biases; call it inside a compact module."""
    h = activation(inputs[0](x))
    for gate in inputs[1:]:
        h = h * gate(x)
    h = nn.with_logical_constraint(h, ("batch", "length", "activation_mlp"))
    if dropout_rate is not None:
        h = nn.Dropout(dropout_rate)(h, deterministic=deterministic)
    return output(h)
