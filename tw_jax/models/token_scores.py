"""Batched teacher-forced scoring of weighted tokens: the engine under every perplexity and rank.

An example is token ids plus a 0/1 weight per scored token; the result per example is the summed
log-likelihood of its weighted tokens and their count. Examples are sorted by length, cut into
batches of exactly ``batch_size`` rows (the last one padded with empty rows) and padded to a
bucketed length, so jit compiles once per (batch, bucket) shape rather than once per batch:
buckets are powers of two up to 128, then multiples of 128.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from tw_jax.models import scoring

BUCKET_STEP = 128


def bucket_length(length: int, minimum: int = 8) -> int:
    """The padded length for ``length`` tokens (power of two to 128, then multiples of 128)."""
    length = max(length, minimum, 1)
    if length <= BUCKET_STEP:
        return 1 << (length - 1).bit_length()
    return math.ceil(length / BUCKET_STEP) * BUCKET_STEP


@dataclass(frozen=True)
class CausalExample:
    """A decoder-only example: ``weights[t]`` weighs ``log p(tokens[t] | tokens[:t])``.

    ``weights[0]`` must be 0: the first token has no context (prepend a BOS to score it).
    """

    tokens: tuple[int, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.weights):
            raise ValueError(f"{len(self.tokens)} tokens but {len(self.weights)} weights")
        if self.weights and self.weights[0]:
            raise ValueError("the first token has no context and cannot be scored")


@dataclass(frozen=True)
class Seq2SeqExample:
    """An encoder-decoder example: ``weights[t]`` weighs ``log p(targets[t] | inputs, targets[:t])``."""

    inputs: tuple[int, ...]
    targets: tuple[int, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.targets) != len(self.weights):
            raise ValueError(f"{len(self.targets)} targets but {len(self.weights)} weights")
        if not self.inputs:
            raise ValueError("an encoder-decoder example needs at least one input token")


@dataclass(frozen=True)
class TokenScores:
    """Per-example summed log-likelihood of the weighted tokens and their count."""

    log_likelihood: np.ndarray
    num_tokens: np.ndarray

    def perplexities(self) -> np.ndarray:
        """``exp(-mean log p)`` per example; NaN where an example has no scored token."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(
                self.num_tokens > 0,
                np.exp(-self.log_likelihood / np.maximum(self.num_tokens, 1)),
                np.nan,
            )

    def mean_log_likelihood(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(
                self.num_tokens > 0, self.log_likelihood / np.maximum(self.num_tokens, 1), np.nan
            )


def _pad(rows: Sequence[Sequence[float]], length: int, rows_total: int, dtype: Any) -> np.ndarray:
    out = np.zeros((rows_total, length), dtype)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def _batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive: {batch_size}")
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def score_causal(
    model: nn.Module,
    params: Any,
    examples: Sequence[CausalExample],
    *,
    batch_size: int = 32,
    max_length: int | None = None,
) -> TokenScores:
    """Summed log-likelihoods of each example's weighted tokens under a decoder-only model.

    ``max_length`` (default: the model's ``n_positions``) bounds an example's length; a longer
    one raises ``ValueError`` rather than being truncated silently.
    """
    limit = max_length or getattr(model.config, "n_positions", None)
    sums = np.zeros(len(examples), np.float64)
    counts = np.zeros(len(examples), np.float64)
    for index in _batches([len(e.tokens) for e in examples], batch_size):
        batch = [examples[i] for i in index]
        longest = max(len(e.tokens) for e in batch)
        if limit is not None and longest > limit:
            raise ValueError(f"an example has {longest} tokens; the model takes at most {limit}")
        length = bucket_length(longest)
        if limit is not None:
            length = min(length, limit)
        length = max(length, 2)
        tokens = _pad([e.tokens for e in batch], length, batch_size, np.int32)
        weights = _pad([e.weights for e in batch], length, batch_size, np.float32)
        mask = _pad([[1] * len(e.tokens) for e in batch], length, batch_size, np.int32)
        log_probs = scoring.causal_lm_log_likelihoods(
            model, params, jnp.asarray(tokens), jnp.asarray(mask)
        )
        w = weights[:, 1:]
        row_sums = np.asarray(jnp.sum(jnp.where(w > 0, log_probs * w, 0.0), axis=-1), np.float64)
        sums[index] = row_sums[: len(batch)]
        counts[index] = w.sum(-1)[: len(batch)]
    return TokenScores(sums, counts)


def score_seq2seq(
    model: nn.Module,
    params: Any,
    examples: Sequence[Seq2SeqExample],
    *,
    batch_size: int = 32,
) -> TokenScores:
    """Summed log-likelihoods of each example's weighted target tokens under an encoder-decoder."""
    sums = np.zeros(len(examples), np.float64)
    counts = np.zeros(len(examples), np.float64)
    lengths = [max(len(e.inputs), len(e.targets)) for e in examples]
    for index in _batches(lengths, batch_size):
        batch = [examples[i] for i in index]
        in_len = bucket_length(max(len(e.inputs) for e in batch))
        out_len = bucket_length(max(len(e.targets) for e in batch))
        inputs = _pad([e.inputs for e in batch], in_len, batch_size, np.int32)
        input_mask = _pad([[1] * len(e.inputs) for e in batch], in_len, batch_size, np.int32)
        input_mask[len(batch) :, 0] = 1  # empty filler rows attend to one token, never to none
        targets = _pad([e.targets for e in batch], out_len, batch_size, np.int32)
        target_mask = _pad([[1] * len(e.targets) for e in batch], out_len, batch_size, np.int32)
        weights = _pad([e.weights for e in batch], out_len, batch_size, np.float32)
        log_probs = scoring.seq2seq_log_likelihoods(
            model, params, jnp.asarray(inputs), jnp.asarray(targets), jnp.asarray(input_mask),
            jnp.asarray(target_mask),
        )
        scored = jnp.where(weights > 0, log_probs * weights, 0.0)  # padding may hold NaN
        row_sums = np.asarray(jnp.sum(scored, axis=-1), np.float64)
        sums[index] = row_sums[: len(batch)]
        counts[index] = weights.sum(-1)[: len(batch)]
    return TokenScores(sums, counts)


def is_encoder_decoder(model: nn.Module) -> bool:
    """True for T5 (scored with :func:`score_seq2seq`), False for GPT-2."""
    return getattr(model.config, "model_type", None) == "t5"
