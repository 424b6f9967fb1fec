"""Which file and record a failed read of a task's data was.

TensorFlow's reader reports a damaged TFRecord (a byte flipped inside a record, so its CRC no
longer matches; a record cut short) as ``DataLossError: corrupted record at 12``: no file, and
from deep inside a tf.data iterator. The shard checks that run before a pipeline starts
(:func:`tw_jax.preprocess.runners.whole.check_shard_set`, :func:`tw_jax.tasks.cache.check_shards`)
read only the records' headers, so damage inside a record body surfaces only when a pipeline
reads it. This module turns that error into one line: it reads the files the task's split is
made of (its stage's TFRecord shards, or its SeqIO cache when the run reads the cache), checks
every record's CRCs with :func:`tw_jax.io.tfrecord.read_records` until it finds the damaged one,
and names the file, the record (counted from 1) and its byte offset, and what rebuilds it.

Reading happens only after a read failed, so a run with whole data pays nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TypeVar

import seqio
import tensorflow as tf

from tw_jax.errors import DumpError, tensorflow_message
from tw_jax.io.tfrecord import read_records
from tw_jax.tasks import cache as task_cache
from tw_jax.tasks.sources import TFRecordSource

T = TypeVar("T")


class DamagedInputError(DumpError):
    """A task's data could not be read: the file and record when found, else the task."""


def _files(task: seqio.Task, split: str, use_cached: bool) -> list[tuple[str, str]]:
    """``(file, what rebuilds it)`` for each TFRecord the task's split reads."""
    if use_cached and task.cache_dir:
        prefix = seqio.utils.get_cached_tfrecord_prefix(task.cache_dir, split)
        remedy = task_cache.rebuild_hint(task.name, task.cache_dir)
        return [(path, remedy) for path in sorted(tf.io.gfile.glob(f"{prefix}-*-of-*"))]
    source = task.source
    if not isinstance(source, seqio.FileDataSource):
        return []
    try:
        shards = source.list_shards(split)
    except Exception:  # noqa: BLE001 - a source that cannot list its files names none
        return []
    stage = source.stage if isinstance(source, TFRecordSource) else "the stage that wrote it"
    remedy = f"the file was damaged after it was written; run `{stage}` again"
    return [(str(path), remedy) for path in shards]


def _first_damage(path: str) -> tuple[int, int, str] | None:
    """``(record number from 1, its byte offset, why)`` of the first damaged record."""
    number, offset = 0, 0
    try:
        for record in read_records(path):
            number += 1
            offset += 12 + len(record) + 4
    except ValueError as error:  # "<path>: corrupt record data" and the like
        return number + 1, offset, str(error).rpartition(": ")[2]
    except OSError:
        return None
    return None


def locate(name: str, split: str, use_cached: bool, error: Exception) -> DamagedInputError:
    """The one-line error for ``error``, raised while reading ``split`` of ``name`` (a task or
    mixture): the damaged file and record when one of its files holds one."""
    files = [(task.name, path, remedy) for task in task_cache.tasks_of(name)
             for path, remedy in _files(task, split, use_cached)]
    for task, path, remedy in files:
        found = _first_damage(path)
        if found:
            number, offset, why = found
            return DamagedInputError(path, f"record {number} (byte {offset})",
                                     f"{why}: {remedy} (read for {task}, {split})")
    listed = [path for _, path, _ in files]
    where = (f"{len(listed)} file(s): {', '.join(listed[:3])}{', …' if len(listed) > 3 else ''}"
             if listed else "none listed")
    return DamagedInputError(
        name, None, f"reading the {split!r} split failed ({tensorflow_message(error)}); "
        f"no damaged record was found in its files ({where}): check them and the folders "
        "they are in")


@contextlib.contextmanager
def named_read_errors(name: str, split: str = "train",
                      use_cached: bool = False) -> Iterator[None]:
    """Turns a ``DataLossError`` inside the block into :func:`locate`'s one line."""
    try:
        yield
    except tf.errors.DataLossError as error:
        raise locate(name, split, use_cached, error) from None


def read_checked(items: Iterable[T], name: str, split: str = "train",
                 use_cached: bool = False) -> Iterator[T]:
    """``items`` (a tf.data iterator), each read under :func:`named_read_errors`."""
    iterator = iter(items)
    while True:
        with named_read_errors(name, split, use_cached):
            try:
                item = next(iterator)
            except StopIteration:
                return
        yield item
