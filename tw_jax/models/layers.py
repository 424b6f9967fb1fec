"""Pieces shared by the model files: the dense layer (with its optional LoRA) and the KV cache."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from tw_jax.models.variants import LoRAConfig


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

