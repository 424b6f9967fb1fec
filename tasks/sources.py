"""Data sources of the tasks: the stages' TFRecord shards and the probes' CSV files.

TFRecords go through ``seqio.TFExampleDataSource`` (file-level sharding and shuffling for
free); a pattern that matches nothing fails with the stage to run, not seqio's bare "No file
is found". Probe CSVs are small (thousands of rows) and are read whole, row by row, so a bad
row fails with its file and line, before any tensor exists. They are read in Python through
:mod:`tw_jax.io.paths` (a local file or a ``gs://`` object, on any GCS endpoint).
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO

import seqio
import tensorflow as tf

from tw_jax.io import paths
from tw_jax.preprocess.errors import DumpError

# Wikipedia articles in one CSV field exceed the csv module's default 128 KiB limit.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


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


# --- probe CSVs ---------------------------------------------------------------------------

PROBE_FIELDS = ("subject", "relation", "object", "previous_object", "text", "cloze")
# The published TWiki_Probes CSVs name the object column "object"; the reference evaluation
# files used "objective".
_OBJECT_ALIASES = ("object", "objective")


def read_probe_rows(handle: IO[str], name: str) -> list[dict[str, str]]:
    """Rows of a probes CSV (ours or the published ``subject,relation,object``), validated.

    Missing optional columns read as empty; a row with the wrong number of fields or an empty
    subject, relation or object raises :class:`DumpError` naming ``name`` and the line.
    """
    reader = csv.reader(handle)
    try:
        header = next(reader)
    except StopIteration:
        raise DumpError(name, "line 1", "empty file: expected a CSV header") from None
    columns = {column.strip(): i for i, column in enumerate(header)}
    object_column = next((c for c in _OBJECT_ALIASES if c in columns), None)
    missing = [c for c in ("subject", "relation") if c not in columns]
    if missing or object_column is None:
        raise DumpError(
            name,
            "line 1",
            f"header {header} lacks {missing + ([] if object_column else ['object'])}",
        )
    rows = []
    for fields in reader:
        line = reader.line_num
        if not fields:
            continue  # a blank line
        if len(fields) != len(header):
            raise DumpError(name, f"line {line}", f"{len(fields)} fields, header has {len(header)}")
        row = {f: fields[columns[f]] if f in columns else "" for f in PROBE_FIELDS}
        row["object"] = fields[columns[object_column]]
        empty = [f for f in ("subject", "relation", "object") if not row[f].strip()]
        if empty:
            raise DumpError(name, f"line {line}", f"empty {', '.join(empty)}")
        rows.append(row)
    return rows


def read_probe_csv(path: str) -> list[dict[str, str]]:
    """Rows of a probes CSV, local or in a bucket (see :func:`read_probe_rows`)."""
    path = os.fspath(path)
    data = paths.read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DumpError(path, f"byte {error.start}", "not UTF-8") from None
    return read_probe_rows(io.StringIO(text, newline=""), path)


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
