"""An evaluator's datasets read once into one table of distinct rows, each task's rows batched
shortest first (tw_jax.evaluate.eval_batches)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tw_jax.evaluate import eval_batches
from tw_jax.evaluate.seqio_eval import pad_rows, trim_padding


def _dataset(tokens: list[list[int]]) -> tf.data.Dataset:
    ids = np.asarray(tokens, np.int32)
    return tf.data.Dataset.from_tensor_slices(
        {"decoder_input_tokens": ids, "decoder_mask": (ids > 0).astype(np.int32)}).enumerate()


A = [[1, 2, 0, 0], [3, 0, 0, 0], [4, 5, 6, 0]]
B = [[4, 5, 6, 0], [7, 8, 9, 9], [1, 2, 0, 0]]


def test_a_row_two_datasets_share_is_one_row_of_the_first():
    a, b = eval_batches.build_table([_dataset(A), _dataset(B)])
    table = a.table
    assert b.table is table
    assert table.owner.tolist() == [0, 0, 0, 1]
    assert (a.rows.tolist(), b.rows.tolist()) == ([0, 1, 2], [2, 3, 0])
    assert (a.indices.tolist(), b.indices.tolist()) == ([0, 1, 2], [0, 1, 2])
    assert table.features["decoder_input_tokens"].tolist() == [*A, B[1]]
    assert table.lengths[:, 0].tolist() == [2, 1, 3, 4]


def test_batches_run_shortest_first_padded_and_trimmed():
    table = eval_batches.build_table([_dataset(A), _dataset(B)])[0].table

    def shape(rows):
        return trim_padding(pad_rows(rows, 2))

    batches = table.batches(0, 2, shape)
    assert [b.rows.tolist() for b in batches] == [[1, 0], [2]]
    assert batches[0].features["decoder_input_tokens"].tolist() == [[3, 0, 0, 0], [1, 2, 0, 0]]
    assert batches[1].features["decoder_input_tokens"].tolist() == [[4, 5, 6, 0], [0, 0, 0, 0]]
    assert table.batches(0, 2, shape) is batches  # built once per (owner, batch size)
    assert [b.rows.tolist() for b in table.batches(1, 2, shape)] == [[3]]


def test_only_registered_datasets_are_kept():
    kept, other = _dataset(A), _dataset(B)
    eval_batches.register([kept])
    try:
        assert eval_batches.registered(kept) and not eval_batches.registered(other)
        assert eval_batches.dataset_rows(kept) is eval_batches.dataset_rows(kept)
        assert eval_batches.dataset_rows(other) is not eval_batches.dataset_rows(other)
    finally:
        eval_batches.unregister([kept])
    assert not eval_batches.registered(kept)
