"""The decoders' decode-mode bookkeeping, one copy for GPT-2's stack and the T5 and BART decoders.

A decoder in decode mode keeps, in the linen ``cache`` collection of the stack module, where the
next tokens go (``cache_index``), which cached key positions are real (``key_mask``) and, in an
encoder-decoder, the encoder's mask (``encoder_mask``); each attention layer keeps its own keys
and values (:func:`~tw_jax.models.layers.attention_key_value`). The first call, from
``init_cache``, sizes every cache by its input and returns as if not decoding; each later call
writes a prefix or one step at the cache index and attends to every position written so far.
These functions take the stack module itself, so the variables keep the paths checkpoints,
caches and sharding rules know (``cache/decoder/cache_index``, ``cache/cache_index``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp


class CausalMask(NamedTuple):
    """The causal self-attention mask of one call and the positions it was made from."""

    mask: jax.Array  # (batch, 1, q_len, kv_len) booleans: causal and a real key
    query_pos: jax.Array  # (q_len,) positions of this call's tokens
    key_pos: jax.Array  # (kv_len,) positions the keys may take (the whole cache when decoding)
    cache_index: jax.Array | None  # where this call's keys are written; None outside decoding


def segment_mask(query_segments: jax.Array, key_segments: jax.Array) -> jax.Array:
    """``(batch, 1, q_len, kv_len)``: a query sees the keys of its own segment of a packed row
    (segment ids ``> 0``; 0 is padding), as seqio's packing numbers the examples of a row."""
    same = query_segments[:, :, None] == key_segments[:, None, :]
    return (same & (key_segments > 0)[:, None, :])[:, None, :, :]


def causal_mask(
    module: nn.Module, attention_mask: jax.Array | None, shape: tuple[int, ...], decode: bool,
    segment_ids: jax.Array | None = None,
) -> CausalMask:
    """The causal mask of ``shape`` ``(batch, length)`` tokens with ``attention_mask`` (1 = real
    token; None: all real); in decode mode, through ``module``'s ``cache_index`` and
    ``key_mask``, so that positions continue from the cache index and padding written by earlier
    calls stays masked. ``segment_ids`` (packed rows, training and scoring only) keep each token
    to the earlier tokens of its own example."""
    batch, length = shape
    if segment_ids is not None:
        if decode:
            raise ValueError("packed rows (segment ids) are for training and scoring, not decoding")
        query_pos = jnp.arange(length)
        causal = query_pos[None, :] <= query_pos[:, None]
        mask = causal[None, None, :, :] & segment_mask(segment_ids, segment_ids)
        return CausalMask(mask, query_pos, query_pos, None)
    if attention_mask is None:
        attention_mask = jnp.ones((batch, length), bool)
    attention_mask = attention_mask.astype(bool)
    cache_index = None
    query_pos = jnp.arange(length)
    if decode:
        initialised = module.has_variable("cache", "cache_index")
        index = module.variable("cache", "cache_index", lambda: jnp.zeros((), jnp.int32))
        key_mask = module.variable("cache", "key_mask", jnp.zeros, (batch, length), bool)
        if initialised:
            cache_index = index.value
            key_mask.value = jax.lax.dynamic_update_slice(
                key_mask.value, attention_mask, (0, cache_index)
            )
            index.value = cache_index + length
            attention_mask = key_mask.value
            query_pos = query_pos + cache_index
    key_pos = jnp.arange(attention_mask.shape[1])
    causal = key_pos[None, :] <= query_pos[:, None]
    mask = causal[None, None, :, :] & attention_mask[:, None, None, :]
    return CausalMask(mask, query_pos, key_pos, cache_index)


def cross_mask(
    module: nn.Module, encoded: jax.Array | None, encoder_mask: jax.Array | None, decode: bool,
    segments: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """The ``(batch, 1, 1, source_len)`` cross-attention mask over the encoder output (None:
    every source position real). In decode mode the call that passes ``encoded`` stores the mask
    in ``module``'s cache; the steps after it pass ``encoded=None`` and read it back. With
    ``segments`` (decoder and encoder segment ids of packed rows) each target token sees its own
    example's source only: ``(batch, 1, target_len, source_len)``."""
    if segments is not None:
        return segment_mask(*segments)
    if encoded is not None and encoder_mask is None:
        encoder_mask = jnp.ones(encoded.shape[:2], bool)
    if decode:
        if encoded is not None:
            module.put_variable("cache", "encoder_mask", encoder_mask.astype(bool))
        encoder_mask = module.get_variable("cache", "encoder_mask")
    return encoder_mask.astype(bool)[:, None, None, :]


def init_cache(
    model: nn.Module, params: Any, batch_size: int, max_length: int, source_length: int
) -> Any:
    """An empty decode cache of an encoder-decoder (a module with ``decode``, as T5 and BART):
    ``max_length`` decoder positions over ``source_length`` encoder ones. Shapes come from
    ``jax.eval_shape`` of an initialising decode call, so nothing is computed."""

    def shapes(p: Any) -> Any:
        cfg = model.config
        dummy = jnp.zeros((batch_size, max_length), jnp.int32)
        encoded = jnp.zeros((batch_size, source_length, cfg.d_model), jnp.dtype(cfg.dtype))
        _, variables = model.apply(
            {"params": p}, dummy, encoded, decode=True, method=type(model).decode,
            mutable=["cache"],
        )
        return variables["cache"]

    abstract = jax.eval_shape(shapes, params)
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), abstract)


def decode_step(
    model: nn.Module, params: Any, cache: Any, tokens: jax.Array, encoded: jax.Array | None = None,
    encoder_mask: jax.Array | None = None,
) -> tuple[jax.Array, Any]:
    """Run an encoder-decoder's decoder ``tokens`` through the cache: logits and the new cache.
    The first step passes the encoder output (and mask), which the cache keeps for the rest."""
    logits, variables = model.apply(
        {"params": params, "cache": cache}, tokens, encoded, encoder_mask, decode=True,
        method=type(model).decode, mutable=["cache"],
    )
    return logits, variables["cache"]
