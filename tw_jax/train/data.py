"""The trainer's input pipeline: a seqio task or mixture → fixed-shape numpy batches, exactly
resumable.

Model features are derived from each example's *real length*, taken before padding, never from
``ids != 0``: GPT-2's id 0 is the token "!", so seqio's ``*_loss_weights`` (which treat 0 as
padding) would silently drop it. Both model kinds get the same four arrays, ``(batch, length)``:

- encoder-decoder (T5): ``encoder_input_tokens``/``encoder_mask`` from ``inputs``;
  ``decoder_target_tokens``, ``decoder_input_tokens`` (targets shifted right after
  ``decoder_start_id``), ``decoder_mask`` and ``decoder_loss_weights`` from ``targets``.
- decoder-only (GPT-2): the token row is ``inputs + targets`` (or ``targets`` alone, as the packed
  LM corpora are); ``decoder_input_tokens`` is the row, ``decoder_target_tokens`` the row shifted
  left by one, ``decoder_loss_weights`` 1 where the next token is a real *target* token (a prompt
  in ``inputs`` is context only), ``decoder_mask`` 1 on real tokens.

Examples longer than the feature length are truncated (seqio trims them already when the task
has the length); shorter ones are padded with 0 and carry weight 0 there.

Exact resume. The stream is a pure function of (task, lengths, seed, shard): seqio shuffles
files and examples with the given seed, tf.data keeps element order deterministic, the stream
repeats forever. Resuming after ``n`` batches skips ``n`` batches of that same stream
(:func:`batches` with ``start_batch=n``). Skipping re-reads what was consumed, which costs
preprocessing time proportional to the position, but it needs no state besides one integer and
is immune to the pitfalls of checkpointing a tf.data iterator (shuffle buffers serialised into
every checkpoint, the iterator tied to the exact graph and TF version). For a DiffSet (one pass
of ~12K steps) that is minutes at most.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

ENCDEC, DECODER = "encoder_decoder", "decoder_only"
MODEL_FEATURES = (
    "decoder_input_tokens",
    "decoder_target_tokens",
    "decoder_loss_weights",
    "decoder_mask",
)
ENCODER_FEATURES = ("encoder_input_tokens", "encoder_mask")


def model_kind(config: Any) -> str:
    """``encoder_decoder`` for T5 configs, ``decoder_only`` for GPT-2."""
    return ENCDEC if getattr(config, "model_type", None) == "t5" else DECODER


def task_name(name: str, config: Any) -> str:
    """``name`` with ``{objective}`` replaced by ``ssm`` (T5) or ``lm`` (GPT-2), so one method
    gin file names the right task for either model (``twiki_diffset_0809_{objective}``)."""
    return name.replace("{objective}", "ssm" if model_kind(config) == ENCDEC else "lm")


def convert_features(
    dataset: Any, kind: str, lengths: Mapping[str, int], decoder_start_id: int = 0
) -> Any:
    """Task features (``inputs``?, ``targets``: 1-D int) → fixed-length model features."""
    import tensorflow as tf

    if kind not in (ENCDEC, DECODER):
        raise ValueError(f"unknown model kind {kind!r}")
    if "targets" not in lengths:
        raise ValueError(f"feature lengths need 'targets', got {dict(lengths)}")
    if kind == ENCDEC and "inputs" not in lengths:
        raise ValueError(f"an encoder-decoder needs an 'inputs' length, got {dict(lengths)}")

    def fit(tokens: tf.Tensor, length: int) -> tuple[tf.Tensor, tf.Tensor]:
        tokens = tf.cast(tokens[:length], tf.int32)
        real = tf.size(tokens)
        padded = tf.pad(tokens, [[0, length - real]])
        return tf.ensure_shape(padded, [length]), real

    def positions_below(real: tf.Tensor, length: int) -> tf.Tensor:
        return tf.cast(tf.range(length) < real, tf.int32)

    # Plain tensor code: autograph's source transformation would only cost seconds per run.
    @tf.autograph.experimental.do_not_convert
    def encdec(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        inputs, n_in = fit(ex["inputs"], lengths["inputs"])
        targets, n_out = fit(ex["targets"], lengths["targets"])
        start = tf.constant([decoder_start_id], tf.int32)
        decoder_inputs = tf.concat([start, targets[:-1]], axis=0)
        weights = positions_below(n_out, lengths["targets"])
        return {
            "encoder_input_tokens": inputs,
            "encoder_mask": positions_below(n_in, lengths["inputs"]),
            "decoder_input_tokens": decoder_inputs * weights,
            "decoder_target_tokens": targets,
            "decoder_loss_weights": weights,
            "decoder_mask": weights,
        }

    @tf.autograph.experimental.do_not_convert
    def decoder(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        length = int(lengths["targets"]) + int(lengths.get("inputs", 0))
        targets = tf.cast(ex["targets"], tf.int32)
        if "inputs" in ex and "inputs" in lengths:
            prompt = tf.cast(ex["inputs"][: lengths["inputs"]], tf.int32)
        else:
            prompt = tf.zeros([0], tf.int32)
        n_prompt = tf.size(prompt)
        row, real = fit(tf.concat([prompt, targets], axis=0), length)
        following = tf.concat([row[1:], tf.zeros([1], tf.int32)], axis=0)
        index = tf.range(length)
        # Position i predicts token i+1: a loss where i+1 is a real target token.
        weights = tf.cast((index + 1 < real) & (index + 1 >= n_prompt), tf.int32)
        return {
            "decoder_input_tokens": row,
            "decoder_target_tokens": following,
            "decoder_loss_weights": weights,
            "decoder_mask": positions_below(real, length),
        }

    return dataset.map(encdec if kind == ENCDEC else decoder, num_parallel_calls=tf.data.AUTOTUNE)


def model_lengths(kind: str, lengths: Mapping[str, int]) -> dict[str, int]:
    """Lengths of the model features (for shapes and FLOP estimates)."""
    if kind == ENCDEC:
        return {"encoder": int(lengths["inputs"]), "decoder": int(lengths["targets"])}
    return {"decoder": int(lengths["targets"]) + int(lengths.get("inputs", 0))}


def _deterministic(dataset: Any) -> Any:
    import tensorflow as tf

    options = tf.data.Options()
    options.deterministic = True
    return dataset.with_options(options)


def task_dataset(
    name: str,
    lengths: Mapping[str, int],
    *,
    split: str = "train",
    shuffle: bool = True,
    seed: int | None = 0,
    num_epochs: int | None = None,
    shard_index: int = 0,
    num_shards: int = 1,
) -> Any:
    """The task's or mixture's tf.data stream of task features (seqio), deterministic order."""
    import seqio

    provider = seqio.get_mixture_or_task(name)
    shard = seqio.ShardInfo(index=shard_index, num_shards=num_shards) if num_shards > 1 else None
    dataset = provider.get_dataset(
        dict(lengths),
        split=split,
        shuffle=shuffle,
        seed=seed,
        num_epochs=num_epochs,
        shard_info=shard,
        use_cached=False,
    )
    return _deterministic(dataset)


def batches(
    name: str,
    lengths: Mapping[str, int],
    batch_size: int,
    kind: str,
    *,
    split: str = "train",
    seed: int = 0,
    start_batch: int = 0,
    shuffle: bool = True,
    num_epochs: int | None = None,
    shard_index: int = 0,
    num_shards: int = 1,
    decoder_start_id: int = 0,
    drop_remainder: bool = True,
) -> Iterator[dict[str, np.ndarray]]:
    """Numpy batches of model features of this host's shard, from batch ``start_batch`` on.

    ``batch_size`` is the per-host batch. With ``num_epochs=None`` the stream never ends;
    an evaluation pass uses ``num_epochs=1, shuffle=False, drop_remainder=False``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    dataset = task_dataset(
        name, lengths, split=split, shuffle=shuffle, seed=seed, num_epochs=num_epochs,
        shard_index=shard_index, num_shards=num_shards,
    )
    dataset = convert_features(dataset, kind, lengths, decoder_start_id)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if start_batch:
        dataset = dataset.skip(start_batch)
    dataset = _deterministic(dataset.prefetch(2))
    yield from dataset.as_numpy_iterator()


def vocabulary(name: str) -> Any:
    """The output vocabulary of a task or mixture's ``targets``."""
    import seqio

    return seqio.get_mixture_or_task(name).output_features["targets"].vocabulary
