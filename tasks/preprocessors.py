"""Preprocessors shared by the tasks: GPT-2 block packing and the SSM/probe tokenisation steps.

GPT-2 corpora are packed like Hugging Face's ``group_texts`` (which the TemporalWiki reference
used): every document is tokenised, followed by the end-of-text token, and the token stream is
cut into blocks of exactly the sequence length; the tail shorter than a block is dropped. Every
position of a block is a real token (GPT-2 has no padding id: id 0 is "!"), and documents
continue across block boundaries. Unlike ``group_texts``, which cuts each batch of 1000
documents separately and drops each batch's tail, the remainder is carried to the next document,
so only the stream's last partial block is lost.
"""

from __future__ import annotations

from collections.abc import Mapping

import seqio
import tensorflow as tf

OutputFeatures = Mapping[str, seqio.Feature]


def block_length(sequence_length: Mapping[str, int] | None, key: str = "targets") -> int:
    if not sequence_length or not sequence_length.get(key):
        raise ValueError(
            f"GPT-2 corpus tasks pack text into blocks of the sequence length: pass "
            f"sequence_length={{{key!r}: N}} (got {sequence_length!r})"
        )
    return int(sequence_length[key])


def text_to_targets(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``{"text": …}`` → ``{"targets": …}``; other fields are dropped (blocks span documents)."""
    return dataset.map(lambda ex: {"targets": ex["text"]}, num_parallel_calls=tf.data.AUTOTUNE)


def pack_lm(
    dataset: tf.data.Dataset,
    sequence_length: Mapping[str, int] | None,
    output_features: OutputFeatures,
) -> tf.data.Dataset:
    """Token streams of documents (``targets``, 1-D int32) → blocks of exactly the length.

    Each document is followed by EOS; a vocabulary with a BOS of its own (Llama 3's
    ``<|begin_of_text|>``, Gemma's ``<bos>``) also puts it in front, as those models were
    pretrained; GPT-2's and Qwen's have none."""
    length = block_length(sequence_length)
    vocabulary = output_features["targets"].vocabulary
    eos = vocabulary.eos_id
    if eos is None:
        raise ValueError(f"{vocabulary!r} has no end-of-text id to separate documents with")
    head = [] if vocabulary.bos_id is None else [int(vocabulary.bos_id)]

    def with_eos(ex: Mapping[str, tf.Tensor]) -> tf.Tensor:
        tokens = tf.cast(ex["targets"], tf.int32)
        return tf.concat([tf.constant(head, tf.int32), tokens, tf.constant([eos], tf.int32)],
                         axis=0)

    def cut(carry: tf.Tensor, tokens: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        stream = tf.concat([carry, tokens], axis=0)
        blocks = tf.size(stream) // length
        used = blocks * length
        return stream[used:], tf.reshape(stream[:used], [blocks, length])

    blocks = dataset.map(with_eos, num_parallel_calls=tf.data.AUTOTUNE)
    blocks = blocks.scan(tf.zeros([0], tf.int32), cut).unbatch()
    return blocks.map(
        lambda block: {"targets": tf.ensure_shape(block, [length])},
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def cache_point() -> seqio.CacheDatasetPlaceholder:
    """Where seqio's offline cache (``python -m seqio.scripts.cache_tasks_main``) cuts a task:
    after reading, formatting and tokenising (deterministic, the expensive part), before every
    step that depends on the sequence length, the seed or the epoch. Not required, so a task
    without a cache reads its files as before (docs/caching.md)."""
    return seqio.CacheDatasetPlaceholder(required=False)


def tokenize_keep_text(
    dataset: tf.data.Dataset, output_features: OutputFeatures
) -> tf.data.Dataset:
    """seqio's tokenize, keeping ``inputs_pretokenized``/``targets_pretokenized`` (the evaluator
    reads targets from them)."""
    return seqio.preprocessors.tokenize(dataset, output_features, copy_pretokenized=True)


def tokenize_only(dataset: tf.data.Dataset, output_features: OutputFeatures) -> tf.data.Dataset:
    """seqio's tokenize without text copies (training corpora: only tokens travel)."""
    return seqio.preprocessors.tokenize(dataset, output_features, copy_pretokenized=False)
