"""Examples of the TFDS builders, read through the readers the stages and the tasks use.

A builder never parses a file format of its own: a data folder's TFRecord shards are read with
:func:`tw_jax.io.tfrecord.read_records` (both CRCs checked), probe CSVs with
:mod:`tw_jax.preprocess.probes.probe_csv`, the published release with
:mod:`tw_jax.preprocess.dumps.released` (zips read in place, unsafe or inflating members
refused). Keys are integers in file order (``shard << 32 | record``) and the builders disable
TFDS's shuffling, so a prepared split holds its examples in the order of the files: the order a
file-based seqio source reads them in.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.tfrecord import read_records
from tw_jax.preprocess.dumps.released import PublishedFile, text_csv_rows
from tw_jax.preprocess.probes.probe_csv import PROBE_FIELDS, read_probe_rows, read_stage_probes
from tw_jax.preprocess.runners.whole import check_shard_set

# The probe columns a builder keeps: the tasks' fields plus the Wikidata ids tw-jax writes.
PROBE_COLUMNS = (*PROBE_FIELDS, "subject_id", "relation_id", "object_id")
CONTEXT = "context"  # an open-book probe's retrieved passages (``tw-jax probe-contexts``)
NO_ID = -1  # the article id of a text the release gives without one (the gpt2 CSVs)

Example = dict[str, Any]
KeyedExample = tuple[int, Example]


def key(shard: int, record: int) -> int:
    return shard << 32 | record


def shard_files(pattern: str) -> list[str]:
    """The shards of a stage's file pattern when they are whole (every member of the set, the
    stage finished, its recorded count: :func:`check_shard_set`); none is an error naming the
    pattern."""
    files = check_shard_set(pattern)
    if not files:
        raise FileNotFoundError(f"no TFRecord shards match {pattern}")
    return files


def has_records(pattern: str) -> bool:
    """Whether a stage's shards hold a record (TFDS refuses a split without examples)."""
    return any(paths.size(path) > 0 for path in paths.glob(pattern))


def has_rows(path: str) -> bool:
    """Whether a CSV has a row after its header (two lines read, not the file)."""
    with paths.open_file(path, "rb") as handle:
        handle.readline()
        return bool(handle.readline().strip())


def _decode(record: bytes, fields: Mapping[str, str], name: str) -> Example:
    import tensorflow as tf

    example = tf.train.Example.FromString(record).features.feature
    decoded: Example = {}
    for field, kind in fields.items():
        if field not in example:
            raise DumpError(name, None, f"a record lacks the feature {field!r}")
        feature = example[field]
        if kind == "int":
            values = list(feature.int64_list.value)
            decoded[field] = int(values[0]) if values else NO_ID
        else:
            decoded[field] = b"".join(feature.bytes_list.value).decode("utf-8")
    return decoded


def tfrecord_examples(
    shard: int, path: str, fields: Mapping[str, str]
) -> Iterator[KeyedExample]:
    """``(key, example)`` of one shard: ``fields`` maps a feature to ``"int"`` or ``"text"``."""
    for index, record in enumerate(read_records(path)):
        yield key(shard, index), _decode(record, fields, f"{path}, record {index}")


def tfrecords_examples(files: Sequence[str], fields: Mapping[str, str]) -> Iterator[KeyedExample]:
    for shard, path in enumerate(files):
        yield from tfrecord_examples(shard, path, fields)


def probe_example(row: Mapping[str, str], *, context: bool = False) -> Example:
    columns = PROBE_COLUMNS + ((CONTEXT,) if context else ())
    return {column: str(row.get(column, "")) for column in columns}


def probe_csv_examples(files: Sequence[str], *, context: bool = False) -> Iterator[KeyedExample]:
    """Rows of probe CSVs one after the other (UPDATED then NEW make CHANGED); ``context``:
    open-book rows, whose ``context`` column is required."""
    for shard, path in enumerate(files):
        for index, row in enumerate(read_stage_probes(path)):
            if context and CONTEXT not in row:
                raise DumpError(path, None, f"no {CONTEXT!r} column: not an open-book probe file")
            yield key(shard, index), probe_example(row, context=context)


def published_probe_examples(file: PublishedFile) -> Iterator[KeyedExample]:
    with file.open_text() as handle:
        rows = read_probe_rows(handle, file.name)
    for index, row in enumerate(rows):
        yield key(0, index), probe_example(row)


def published_text_examples(shard: int, file: PublishedFile) -> Iterator[KeyedExample]:
    """``id``/``title``/``text`` of a released CSV (``wikipedia_MMMM_subset.csv`` has all
    three, a ``_gpt2.csv`` and a ``Wikipedia_Full`` part only ``text``: id -1, title empty);
    rows with an empty text are skipped, as the release's task reader skips them."""
    index = 0
    for line, columns, fields in text_csv_rows(file):
        text = fields[columns["text"]]
        if not text:
            continue
        yield key(shard, index), {
            "id": _article_id(fields, columns, file.name, line),
            "title": fields[columns["title"]] if "title" in columns else "",
            "text": text,
        }
        index += 1


def _article_id(fields: Sequence[str], columns: Mapping[str, int], name: str, line: int) -> int:
    if "id" not in columns or not fields[columns["id"]].strip():
        return NO_ID
    try:
        return int(fields[columns["id"]])
    except ValueError:
        raise DumpError(name, f"line {line}", f"id {fields[columns['id']]!r} is not a number")\
            from None
