"""Greedy decoding and beam search over the key/value cache, jit-compiled with static lengths.

One API for both architectures: for GPT-2 the input is the prompt, continued; for T5 it is the
encoder input, and decoding starts from ``decoder_start_token_id``. A "start" runs the input once
(GPT-2: a prefill that fills the cache; T5: the encoder, then the start token) and returns the first
logits and a decode state; each further token costs one single-step call. Shapes never change inside
the loop: the cache holds every position from the start, so XLA compiles the loop once. The model
is the same module as in training, so LoRA, K-Adapter and Modular act here exactly as there.

GPT-2 prompts are left-padded (``prompt_mask`` 0 on the left); positions then count real tokens
only, as Hugging Face ``generate`` does, so a padded row decodes exactly as it would alone. Outputs
hold only the new tokens; after EOS a row holds ``pad_id``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from tw_jax.models import bart, t5

NEG_INF = -1.0e7  # finite, so sums and divisions of "impossible" scores stay ordered.
# Encoder-decoder families by model_type: modules with ``encode`` and ``decode`` methods and
# ``init_cache`` / ``decode_step`` functions of the same signatures.
_ENCODER_DECODERS = {"t5": t5, "bart": bart}


def init_cache(model: nn.Module, params: Any, batch_size: int, max_length: int) -> Any:
    """An empty decode cache for ``batch_size`` rows and ``max_length`` positions.

    Shapes come from ``jax.eval_shape`` of an initialising decode call, so nothing is computed.
    """

    def shapes(p: Any) -> Any:
        dummy = jnp.zeros((batch_size, max_length), jnp.int32)
        _, variables = model.apply({"params": p}, dummy, decode=True, mutable=["cache"])
        return variables["cache"]

    abstract = jax.eval_shape(shapes, params)
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), abstract)


def decode_step(
    model: nn.Module, params: Any, cache: Any, tokens: jax.Array, positions: jax.Array,
    mask: jax.Array | None = None,
) -> tuple[jax.Array, Any]:
    """Run ``tokens`` (a prefix or one step) through the cache: returns logits and the new cache."""
    logits, variables = model.apply(
        {"params": params, "cache": cache}, tokens, positions=positions, attention_mask=mask,
        decode=True, mutable=["cache"],
    )
    return logits, variables["cache"]


def _prefill(
    model: nn.Module, params: Any, prompt_ids: jax.Array, prompt_mask: jax.Array | None,
    max_new_tokens: int,
) -> tuple[jax.Array, Any, jax.Array]:
    """Fill a fresh cache with the prompt; return last-position logits, cache, next positions."""
    batch, length = prompt_ids.shape
    if prompt_mask is None:
        prompt_mask = jnp.ones((batch, length), jnp.int32)
    prompt_mask = prompt_mask.astype(jnp.int32)
    positions = jnp.maximum(jnp.cumsum(prompt_mask, axis=-1) - 1, 0)
    cache = init_cache(model, params, batch, length + max_new_tokens)
    logits, cache = decode_step(model, params, cache, prompt_ids, positions, prompt_mask)
    return logits[:, -1], cache, positions[:, -1] + 1


def _t5_start(
    model: nn.Module, params: Any, input_ids: jax.Array, input_mask: jax.Array | None,
    max_new_tokens: int, repeats: int,
) -> tuple[jax.Array, Any]:
    """Encode once, repeat per beam, fill the cross-attention cache with the start token."""
    family = _ENCODER_DECODERS[model.config.model_type]
    if input_mask is None:
        input_mask = jnp.ones(input_ids.shape, jnp.int32)
    encoded = model.apply({"params": params}, input_ids, input_mask, method=type(model).encode)
    encoded = jnp.repeat(encoded, repeats, axis=0)
    input_mask = jnp.repeat(input_mask, repeats, axis=0)
    rows, source_length = input_mask.shape
    # One slot for the start token and one per new token (the last one's logits go unused).
    cache = family.init_cache(model, params, rows, max_new_tokens + 1, source_length)
    start = jnp.full((rows, 1), model.config.decoder_start_token_id, jnp.int32)
    logits, cache = family.decode_step(model, params, cache, start, encoded, input_mask)
    return logits[:, -1], cache


def _start(
    model: nn.Module, params: Any, input_ids: jax.Array, input_mask: jax.Array | None,
    max_new_tokens: int, repeats: int = 1,
) -> tuple[jax.Array, Any, Callable[[Any, jax.Array], tuple[jax.Array, Any]]]:
    """First logits ``(rows, vocab)``, the decode state and the step function of ``model``.

    The state is a pytree whose non-scalar leaves all have ``rows`` leading entries, so beam
    search can reorder it by gathering rows.
    """
    family = _ENCODER_DECODERS.get(getattr(model.config, "model_type", None))
    if family is not None:
        logits, cache = _t5_start(model, params, input_ids, input_mask, max_new_tokens, repeats)

        def t5_step(state: Any, tokens: jax.Array) -> tuple[jax.Array, Any]:
            logits, cache = family.decode_step(model, params, state, tokens)
            return logits[:, -1], cache

        return logits, cache, t5_step

    expand = functools.partial(jnp.repeat, repeats=repeats, axis=0)
    mask = None if input_mask is None else expand(input_mask)
    logits, cache, next_pos = _prefill(model, params, expand(input_ids), mask, max_new_tokens)

    def gpt_step(state: Any, tokens: jax.Array) -> tuple[jax.Array, Any]:
        cache, next_pos = state
        logits, cache = decode_step(model, params, cache, tokens, next_pos[:, None])
        return logits[:, -1], (cache, next_pos + 1)

    return logits, (cache, next_pos), gpt_step


@functools.partial(
    jax.jit, static_argnames=("model", "max_new_tokens", "eos_id", "pad_id")
)
def greedy_decode(
    model: nn.Module,
    params: Any,
    prompt_ids: jax.Array,
    prompt_mask: jax.Array | None = None,
    *,
    max_new_tokens: int,
    eos_id: int | None,
    pad_id: int = 0,
) -> jax.Array:
    """Argmax decoding: ``(batch, max_new_tokens)`` new tokens, ``pad_id`` after each row's EOS.

    ``prompt_ids`` is GPT-2's prompt or T5's encoder input. The loop stops early once every row
    has produced EOS.
    """
    batch = prompt_ids.shape[0]
    logits, state, step = _start(model, params, prompt_ids, prompt_mask, max_new_tokens)
    eos = -1 if eos_id is None else eos_id
    out = jnp.full((batch, max_new_tokens), pad_id, jnp.int32)
    done = jnp.zeros((batch,), bool)

    def cond(carry: tuple) -> jax.Array:
        i, _, _, _, done = carry
        return (i < max_new_tokens) & ~jnp.all(done)

    def body(carry: tuple) -> tuple:
        i, out, logits, state, done = carry
        token = jnp.where(done, pad_id, jnp.argmax(logits, axis=-1).astype(jnp.int32))
        out = out.at[:, i].set(token)
        done = done | (token == eos)
        logits, state = step(state, token[:, None])
        return i + 1, out, logits, state, done

    carry = (jnp.int32(0), out, logits, state, done)
    return jax.lax.while_loop(cond, body, carry)[1]


def _gather_beams(x: jax.Array, index: jax.Array) -> jax.Array:
    """``x[b, index[b, j]]`` for ``x`` of shape ``(batch, beams, ...)`` and ``index`` ``(batch, n)``."""
    return jax.vmap(lambda row, idx: row[idx])(x, index)


@functools.partial(
    jax.jit,
    static_argnames=("model", "beam_size", "max_new_tokens", "eos_id", "pad_id", "length_penalty"),
)
def beam_search(
    model: nn.Module,
    params: Any,
    prompt_ids: jax.Array,
    prompt_mask: jax.Array | None = None,
    *,
    beam_size: int,
    max_new_tokens: int,
    eos_id: int | None,
    pad_id: int = 0,
    length_penalty: float = 0.0,
) -> tuple[jax.Array, jax.Array]:
    """Beam search: ``(batch, beam, max_new_tokens)`` sequences and their scores, best first.

    A hypothesis ends at EOS and is scored ``log p / length ** length_penalty`` (0.0: plain
    log-probability, so beam 1 is greedy). Each step keeps the ``beam_size`` best unfinished
    hypotheses among the ``2 * beam_size`` best extensions, so EOS never starves the beam. The loop
    stops once no unfinished hypothesis can still beat the worst finished one.
    """
    batch, k, steps = prompt_ids.shape[0], beam_size, max_new_tokens
    logits, state, step = _start(model, params, prompt_ids, prompt_mask, steps, repeats=k)
    eos = -1 if eos_id is None else eos_id

    def penalty(length: jax.Array) -> jax.Array:
        return jnp.maximum(length, 1).astype(jnp.float32) ** length_penalty

    seqs = jnp.full((batch, k, steps), pad_id, jnp.int32)
    alive_logp = jnp.tile(jnp.array([0.0] + [NEG_INF] * (k - 1), jnp.float32), (batch, 1))
    finished_scores = jnp.full((batch, k), NEG_INF, jnp.float32)

    def cond(carry: tuple) -> jax.Array:
        i, _, alive_logp, _, finished_scores, _, _ = carry
        best_alive = jnp.max(alive_logp, axis=-1)
        bound = jnp.maximum(best_alive / penalty(jnp.int32(steps)), best_alive / penalty(i))
        done = jnp.min(finished_scores, axis=-1) > bound
        return (i < steps) & ~jnp.all(done)

    def body(carry: tuple) -> tuple:
        i, alive_seqs, alive_logp, finished_seqs, finished_scores, logits, state = carry
        vocab = logits.shape[-1]
        log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1).reshape(batch, k, vocab)
        candidates = (alive_logp[:, :, None] + log_probs).reshape(batch, k * vocab)
        top_logp, top_index = jax.lax.top_k(candidates, 2 * k)
        parent, token = top_index // vocab, (top_index % vocab).astype(jnp.int32)
        top_seqs = _gather_beams(alive_seqs, parent).at[:, :, i].set(token)
        is_eos = token == eos

        alive_logp, keep = jax.lax.top_k(jnp.where(is_eos, NEG_INF, top_logp), k)
        alive_seqs = _gather_beams(top_seqs, keep)
        parent, token = _gather_beams(parent, keep), _gather_beams(token, keep)

        ended = jnp.where(is_eos, top_logp / penalty(i + 1), NEG_INF)
        finished_scores, best = jax.lax.top_k(jnp.concatenate([finished_scores, ended], 1), k)
        finished_seqs = _gather_beams(jnp.concatenate([finished_seqs, top_seqs], 1), best)

        flat = (jnp.arange(batch)[:, None] * k + parent).reshape(-1)
        state = jax.tree.map(lambda x: x[flat] if x.ndim else x, state)
        logits, state = step(state, token.reshape(-1, 1))
        return i + 1, alive_seqs, alive_logp, finished_seqs, finished_scores, logits, state

    carry = (jnp.int32(0), seqs, alive_logp, seqs, finished_scores, logits, state)
    _, alive_seqs, alive_logp, finished_seqs, finished_scores, *_ = jax.lax.while_loop(
        cond, body, carry
    )
    # Unfinished hypotheses compete with finished ones at full length; finished win ties.
    scores = jnp.concatenate([finished_scores, alive_logp / penalty(jnp.int32(steps))], axis=1)
    scores, best = jax.lax.top_k(scores, k)
    return _gather_beams(jnp.concatenate([finished_seqs, alive_seqs], 1), best), scores
