"""Pieces shared by the model files."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


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
