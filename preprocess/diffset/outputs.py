"""The files of a DiffSet folder, written atomically by the local path.

``diffset.jsonl`` (``id, title, text, kind``), ``full.jsonl`` and ``unchanged.jsonl``
(``id, title, text``), TFRecord shards of each (``tf.train.Example`` with the same fields), and
``stats.json``, written last: a folder is complete exactly when ``stats.json`` exists.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import IO, Any

from tw_jax.io import paths
from tw_jax.io.atomic import (
    FolderCommit,
    discard,
    naming_full_disk,
    raise_if_disk_full,
    temporary_sibling,
)
from tw_jax.io.tfrecord import ShardedTFRecordWriter, encode_example
from tw_jax.preprocess.diffset.algorithm import EMPTY, IN_DIFFSET, ArticleDiff

OUTPUTS = ("diffset", "full", "unchanged")
STATS_FILE = "stats.json"


def records_for(result: ArticleDiff) -> list[tuple[str, dict[str, Any]]]:
    """(output name, record) pairs for one article: the same for the local path and Beam."""
    if result.kind == EMPTY:
        return []
    full = {"id": result.id, "title": result.title, "text": result.text}
    if result.kind in IN_DIFFSET:
        diff = {
            "id": result.id,
            "title": result.title,
            "text": result.diff_text,
            "kind": result.kind,
        }
        return [("diffset", diff), ("full", full)]
    return [("full", full), ("unchanged", full)]


# What json.dumps(record, ensure_ascii=False, separators=(",", ":")) uses, made once: dumps
# builds a new encoder on every call when given options.
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def json_line(record: dict[str, Any]) -> str:
    return _JSON.encode(record)


# (output name, JSON line with its newline, tf.train.Example bytes): what a worker hands back.
EncodedRecord = tuple[str, bytes, bytes]


def encode_records(result: ArticleDiff) -> list[EncodedRecord]:
    """The bytes each output receives for one article, made where the comparison ran.

    full.jsonl and unchanged.jsonl get the very same record for an unchanged article (most of
    them): it is encoded once.
    """
    encoded: list[EncodedRecord] = []
    previous: tuple[dict[str, Any], bytes, bytes] | None = None
    for name, record in records_for(result):
        if previous is None or previous[0] is not record:
            previous = (record, (json_line(record) + "\n").encode("utf-8"), encode_example(record))
        encoded.append((name, previous[1], previous[2]))
    return encoded


class DiffsetWriter:
    """Streams records into temporary files; :meth:`commit` moves them all into place together,
    ``stats.json`` last (:class:`FolderCommit`). A full disk is an ``OutputError`` naming the
    output being written; :meth:`abort` leaves no file of this run behind."""

    def __init__(self, out_dir: str | os.PathLike[str], max_shard_bytes: int = 256 << 20) -> None:
        self.out_dir = paths.resolve(out_dir)
        with naming_full_disk(self.out_dir):
            paths.makedirs(self.out_dir)
        # An earlier run's stats.json would mark a half-rewritten folder as complete.
        discard(paths.join(self.out_dir, STATS_FILE))
        self._folder = FolderCommit(self.out_dir, last=STATS_FILE)
        # name -> (final path, temporary path, handle)
        self._jsonl: dict[str, tuple[str, paths.Path, IO[bytes]]] = {}
        self._tfrecords: dict[str, ShardedTFRecordWriter] = {}
        try:
            for name in OUTPUTS:
                final = paths.join(self.out_dir, f"{name}.jsonl")
                temporary = temporary_sibling(final)
                with naming_full_disk(final):
                    self._jsonl[name] = (final, temporary, paths.open_file(temporary, "wb"))
                self._tfrecords[name] = ShardedTFRecordWriter(
                    paths.join(self.out_dir, f"{name}.tfrecord"), max_shard_bytes
                )
        except BaseException:
            self.abort()
            raise

    def write_encoded(self, encoded: list[EncodedRecord]) -> None:
        name = ""
        try:  # not a ``with`` per record: this is the stage's hot loop
            for name, line, example in encoded:
                self._jsonl[name][2].write(line)
                self._tfrecords[name].write(example)
        except OSError as error:
            raise_if_disk_full(error, self._jsonl[name][0])
            raise

    def commit(self, stats: dict[str, Any]) -> None:
        for final, temporary, handle in self._jsonl.values():
            with naming_full_disk(final):
                handle.close()
            self._folder.stage(temporary, final)
        for writer in self._tfrecords.values():
            writer.commit(into=self._folder)
        self._folder.write_json(STATS_FILE, stats)
        self._folder.commit()

    def abort(self) -> None:
        for _, temporary, handle in self._jsonl.values():
            with contextlib.suppress(OSError):  # flushing what is left fails on a full disk
                handle.close()
            discard(temporary)
        for writer in self._tfrecords.values():
            writer.abort()
        self._folder.abort()
