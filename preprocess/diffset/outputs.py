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

import orjson

from tw_jax.io import paths
from tw_jax.io.atomic import (
    FolderCommit,
    discard,
    naming_full_disk,
    raise_if_disk_full,
    temporary_sibling,
)
from tw_jax.io.tfrecord import (
    SHORT_VARINT_LIMIT,
    SHORT_VARINTS,
    ShardedTFRecordWriter,
    frame_ends,
    varint,
)
from tw_jax.preprocess.diffset.algorithm import EMPTY, IN_DIFFSET, ArticleDiff

OUTPUTS = ("diffset", "full", "unchanged")
STATS_FILE = "stats.json"
_FLUSH_BYTES = 1 << 20  # JSON lines held back before one write


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

# json_line of a record, with its newline, in UTF-8: the same bytes (the tests compare them,
# and orjson's escapes are the json module's with ensure_ascii=False for every character but the
# lone surrogates), made in one call without the encoder's Python walk over the record.
_ORJSON_LINE = orjson.OPT_APPEND_NEWLINE


def _record_json(page_id: int, title: str, text: str, kind: str | None) -> bytes:
    record = {"id": page_id, "title": title, "text": text}
    if kind is not None:
        record["kind"] = kind
    try:
        return orjson.dumps(record, option=_ORJSON_LINE)
    except TypeError:  # an id beyond 64 bits, or a lone surrogate: the json module's answer
        return (json_line(record) + "\n").encode("utf-8")  # (or its UnicodeEncodeError)


# encode_example of a record, likewise: a tf.train.Example is a map of features written with
# sorted keys (id, kind, text, title), each entry a length-delimited field (1) holding the key
# (field 1) and the Feature (field 2); a string Feature is a bytes_list (field 1) of one value
# (field 1), the id an int64_list (field 3) of one varint. Only the lengths vary, so each entry
# is its header bytes then the value.
def _string_entry(key_field: bytes, data: bytes, parts: list[bytes]) -> int:
    """Appends the entry of a string feature to ``parts``; returns its length. (Its four sizes
    are nearly always short varints, indexed here without a call: this runs for every record.)"""
    n = len(data)
    value = SHORT_VARINTS[n] if n < SHORT_VARINT_LIMIT else varint(n)
    bytes_list = 1 + len(value) + n
    bytes_list_size = (
        SHORT_VARINTS[bytes_list] if bytes_list < SHORT_VARINT_LIMIT else varint(bytes_list)
    )
    feature = 1 + len(bytes_list_size) + bytes_list
    feature_size = SHORT_VARINTS[feature] if feature < SHORT_VARINT_LIMIT else varint(feature)
    entry = len(key_field) + 1 + len(feature_size) + feature
    entry_size = SHORT_VARINTS[entry] if entry < SHORT_VARINT_LIMIT else varint(entry)
    parts += (
        b"\n",
        entry_size,
        key_field,
        b"\x12",
        feature_size,
        b"\n",
        bytes_list_size,
        b"\n",
        value,
        data,
    )
    return 1 + len(entry_size) + entry


def _id_entry(page_id: int) -> bytes:
    value = varint(page_id)  # int64: two's complement
    n = len(value)  # at most 10: every length below fits in one byte
    # entry (n + 10 bytes): key "id", then the Feature (n + 4): int64_list (n + 2): one value
    return bytes((0x0A, n + 10, 0x0A, 2, 0x69, 0x64, 0x12, n + 4, 0x1A, n + 2, 0x0A, n)) + value


def _record_example(page_id: int, title: str, text: str, kind: str | None) -> bytes:
    # Example.features: field 1, then its size (known last), then the entries; joined once.
    entry = _id_entry(page_id)
    parts = [b"\n", b"", entry]
    size = len(entry)
    if kind is not None:
        size += _string_entry(b"\n\x04kind", kind.encode("utf-8"), parts)
    size += _string_entry(b"\n\x04text", text.encode("utf-8"), parts)
    size += _string_entry(b"\n\x05title", title.encode("utf-8"), parts)
    parts[1] = SHORT_VARINTS[size] if size < SHORT_VARINT_LIMIT else varint(size)
    return b"".join(parts)


def encode_records(result: ArticleDiff) -> list[EncodedRecord]:
    """The bytes each output receives for one article (those of :func:`records_for`'s records
    through :func:`json_line` and ``encode_example``), made where the comparison ran.

    full.jsonl and unchanged.jsonl get the very same record for an unchanged article (most of
    them): it is encoded once.
    """
    if result.kind == EMPTY:
        return []
    page_id, title, text = result.id, result.title, result.text
    full = (
        "full",
        _record_json(page_id, title, text, None),
        _record_example(page_id, title, text, None),
    )
    if result.kind in IN_DIFFSET:
        diff_text = result.diff_text
        diff = (
            "diffset",
            _record_json(page_id, title, diff_text, result.kind),
            _record_example(page_id, title, diff_text, result.kind),
        )
        return [diff, full]
    return [full, ("unchanged", full[1], full[2])]


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
        self._lines: dict[str, list[bytes]] = {name: [] for name in OUTPUTS}  # not yet written
        self._line_bytes = 0
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
        framed = None  # the last example framed: an unchanged article's goes to two outputs
        try:  # not a ``with`` per record: this is the stage's hot loop
            for name, line, example in encoded:
                self._lines[name].append(line)
                self._line_bytes += len(line)
                if example is not framed:
                    framed, ends = example, frame_ends(example)
                self._tfrecords[name].write(example, ends)
        except OSError as error:
            raise_if_disk_full(error, self._jsonl[name][0])
            raise
        if self._line_bytes >= _FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Writes the JSON lines held back: a write of a few KB each is a system call each
        (Python's buffer is 4-8 KB), which cost more CPU time than the lines' encoding."""
        for name, lines in self._lines.items():
            if lines:
                final, _, handle = self._jsonl[name]
                with naming_full_disk(final):
                    handle.write(b"".join(lines))
                lines.clear()
        self._line_bytes = 0

    def commit(self, stats: dict[str, Any]) -> None:
        # The shards' held-back records first, then the JSON lines: shards used to be written
        # record by record, so on a disk that fills up before the end they are the ones that
        # report it, as before.
        for writer in self._tfrecords.values():
            writer.flush()
        self._flush()
        for final, temporary, handle in self._jsonl.values():
            with naming_full_disk(final):
                handle.close()
            self._folder.stage(temporary, final)
        for writer in self._tfrecords.values():
            writer.commit(into=self._folder)
        self._folder.write_json(STATS_FILE, stats)
        self._folder.commit()

    def abort(self) -> None:
        self._lines = {name: [] for name in OUTPUTS}
        for _, temporary, handle in self._jsonl.values():
            with contextlib.suppress(OSError):  # flushing what is left fails on a full disk
                handle.close()
            discard(temporary)
        for writer in self._tfrecords.values():
            writer.abort()
        self._folder.abort()
