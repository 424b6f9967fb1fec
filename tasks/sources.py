"""Data sources of the tasks: the stages' TFRecord shards and the probes' CSV files.

TFRecords go through ``seqio.TFExampleDataSource`` (file-level sharding and shuffling for
free); a pattern that matches nothing fails with the stage to run, not seqio's bare "No file
is found". Probe CSVs are small (thousands of rows) and are read whole, row by row, so a bad
row fails with its file and line, before any tensor exists
(:mod:`tw_jax.preprocess.probes.probe_csv`, local or ``gs://``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import seqio
import tensorflow as tf

from tw_jax.preprocess.probes.probe_csv import PROBE_FIELDS


class TFRecordSource(seqio.TFExampleDataSource):
    """String features of a stage's TFRecord shards, one split per pattern."""

    def __init__(self, split_to_pattern: Mapping[str, str], fields: Sequence[str], stage: str):
        self.stage = stage
        super().__init__(
            split_to_filepattern=dict(split_to_pattern),
            feature_description={f: tf.io.FixedLenFeature([], tf.string) for f in fields},
        )

    def list_shards(self, split: str) -> Sequence[str]:
        files = super().list_shards(split)
        if not files:
            raise FileNotFoundError(
                f"no TFRecord shards match {self._split_to_filepattern[split]}; "
                f"they are written by `{self.stage}`"
            )
        return files


Formatter = Callable[[Mapping[str, str]], dict[str, str]]


def rows_dataset(rows: Sequence[Mapping[str, str]], formatter: Formatter) -> tf.data.Dataset:
    """One example per row: the formatter's string features, in row order."""
    examples = [formatter(row) for row in rows]
    keys = list(examples[0]) if examples else list(formatter(_EMPTY_ROW))
    columns = {
        k: tf.constant([ex[k] for ex in examples], dtype=tf.string, shape=[len(examples)])
        for k in keys
    }
    return tf.data.Dataset.from_tensor_slices(columns)


_EMPTY_ROW = {f: "" for f in PROBE_FIELDS}


class RowsSource(seqio.FunctionDataSource):
    """Examples formatted from rows that ``load`` reads when a dataset is built."""

    def __init__(
        self, load: Callable[[], list[dict[str, str]]], formatter: Formatter, splits: Sequence[str]
    ) -> None:
        self._load = load
        self._formatter = formatter

        def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
            del split, shuffle_files, seed  # one file; the task shuffles examples if asked
            return rows_dataset(self._load(), self._formatter)

        super().__init__(dataset_fn=dataset_fn, splits=splits)

    def rows(self) -> list[dict[str, str]]:
        return self._load()


def concatenated(*loads: Callable[[], list[dict[str, str]]]) -> Callable[[], list[dict[str, str]]]:
    """Rows of several files, one after the other (UPDATED then NEW make CHANGED)."""

    def load() -> list[dict[str, str]]:
        return [row for read in loads for row in read()]

    return load
