"""TFRecord files of ``tf.train.Example`` without importing TensorFlow.

Preprocessing workers write millions of small records; importing TensorFlow in each process costs
seconds and hundreds of megabytes, and building protos through its Python API is slow. The formats
are small and stable, so we encode them here: the TFRecord frame (length, masked CRC32C of the
length, data, masked CRC32C of the data) and the protobuf wire format of ``Example``. Tests check
both against TensorFlow's own parser.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import BinaryIO

import google_crc32c

from tw_jax.io import paths
from tw_jax.io.atomic import (
    FolderCommit,
    discard,
    disk_full_errno,
    disk_full_error,
    temporary_sibling,
)
from tw_jax.io.paths import PathLike

FeatureValue = (
    int | str | bytes | float | Sequence[int] | Sequence[str] | Sequence[bytes] | Sequence[float]
)

_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


_LENGTH = struct.Struct("<Q").pack
_CRC = struct.Struct("<I").pack

# What TFRecord framing puts before a record (its length and that length's masked CRC32C) and
# after it (the record's masked CRC32C).
FrameEnds = tuple[bytes, bytes]


def frame_ends(record: bytes) -> FrameEnds:
    """The bytes before and after ``record`` in TFRecord framing: a writer that sends one record
    to several outputs computes them once (:meth:`ShardedTFRecordWriter.write`)."""
    header = _LENGTH(len(record))
    return header + _CRC(masked_crc32c(header)), _CRC(masked_crc32c(record))


def frame(record: bytes) -> bytes:
    """One record in TFRecord framing."""
    head, tail = frame_ends(record)
    return b"".join((head, record, tail))


# --- protobuf wire format of tf.train.Example -------------------------------------------------


# The varints of 0 .. SHORT_VARINT_LIMIT - 1 (one or two bytes), looked up rather than computed:
# record and field sizes nearly always fall there, and a hot encoder may index this table
# itself to spare the call.
SHORT_VARINT_LIMIT = 1 << 14
SHORT_VARINTS = [bytes((i,)) for i in range(128)] + [
    bytes((i & 0x7F | 0x80, i >> 7)) for i in range(128, SHORT_VARINT_LIMIT)
]


def varint(value: int) -> bytes:
    """A protobuf varint (an int64 below zero as its 64-bit two's complement)."""
    if 0 <= value < SHORT_VARINT_LIMIT:
        return SHORT_VARINTS[value]
    if value < 0:
        value += 1 << 64  # int64 is sent as its 64-bit two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return SHORT_VARINTS[number << 3 | 2] + varint(len(payload)) + payload


def _feature(value: FeatureValue) -> bytes:
    if isinstance(value, str):  # the common case, kept short: one string
        data = value.encode("utf-8")
        return _field(1, _field(1, data))
    if isinstance(value, bytes):
        return _field(1, _field(1, value))
    values = list(value) if isinstance(value, list | tuple) else [value]
    if not values or isinstance(values[0], str | bytes):
        items = b"".join(_field(1, v.encode("utf-8") if isinstance(v, str) else v) for v in values)
        return _field(1, items)  # Feature.bytes_list
    if isinstance(values[0], bool | int):
        return _field(3, _field(1, b"".join(varint(int(v)) for v in values)))  # int64_list
    if isinstance(values[0], float):
        return _field(2, _field(1, struct.pack(f"<{len(values)}f", *values)))  # float_list
    raise TypeError(f"unsupported feature value type {type(values[0]).__name__}")


_KEY_FIELDS: dict[str, bytes] = {}


def encode_example(features: Mapping[str, FeatureValue]) -> bytes:
    """Serialises ``features`` as a ``tf.train.Example``; keys are written sorted, as TF does."""
    entries = []
    for key in sorted(features):
        key_field = _KEY_FIELDS.get(key)
        if key_field is None:
            key_field = _KEY_FIELDS.setdefault(key, _field(1, key.encode("utf-8")))
        entries.append(_field(1, key_field + _field(2, _feature(features[key]))))
    return _field(1, b"".join(entries))


# --- files ------------------------------------------------------------------------------------


def read_records(path: PathLike) -> Iterator[bytes]:
    """Yields the records of a TFRecord file, checking both CRCs."""
    with paths.open_file(path, "rb") as handle:
        while True:
            header = handle.read(12)
            if not header:
                return
            if len(header) < 12:
                raise ValueError(f"{path}: truncated record header")
            (length,) = struct.unpack("<Q", header[:8])
            if struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
                raise ValueError(f"{path}: corrupt record length")
            body = handle.read(length + 4)
            if len(body) < length + 4:
                raise ValueError(f"{path}: truncated record")
            record = body[:length]
            if struct.unpack("<I", body[length:])[0] != masked_crc32c(record):
                raise ValueError(f"{path}: corrupt record data")
            yield record


def count_records(path: PathLike) -> int:
    """How many records a TFRecord file holds, from the records' headers alone (each length's
    CRC checked; the bodies are skipped, not read): what a reader checks against the count a
    stage recorded. A file cut inside a record is a ValueError naming it."""
    size = paths.size(path)
    count = position = 0
    with paths.open_file(path, "rb") as handle:
        while position < size:
            header = handle.read(12)
            if len(header) < 12:
                raise ValueError(f"{path}: truncated record header")
            (length,) = struct.unpack("<Q", header[:8])
            if struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
                raise ValueError(f"{path}: corrupt record length")
            position += 12 + length + 4
            if position > size:
                raise ValueError(f"{path}: truncated record")
            handle.seek(position)
            count += 1
    return count


def shard_name(prefix: PathLike, index: int, count: int) -> paths.Path:
    """``prefix-00000-of-00004``: the shard naming of Beam, TFDS and SeqIO file patterns."""
    return paths.as_path(f"{prefix}-{index:05d}-of-{count:05d}")


# Framed bytes a writer holds back before one write: a write per record of a few KB was a
# buffered-writer call each (and a system call every few records), about half the cost of
# writing the DiffSet stage's 42,000 records.
_WRITE_BYTES = 1 << 20


class ShardedTFRecordWriter:
    """Writes records into shards of about ``max_shard_bytes`` each, atomically.

    Shard names carry the total count, which is known only at the end, so shards are written
    under temporary names and renamed by :meth:`commit` (or by the :class:`FolderCommit` it is
    handed, together with the folder's other files). An empty output still gets one (empty)
    shard, so readers of the file pattern find the dataset. A full disk is an
    :class:`~tw_jax.errors.OutputError` naming the shards' file pattern, after the writer has
    removed its temporaries. Framed records are written about 1 MiB at a time, so a full disk
    may be reported by a later :meth:`write`, by :meth:`flush` or by :meth:`commit`.
    """

    def __init__(self, prefix: PathLike, max_shard_bytes: int = 256 << 20) -> None:
        self.prefix = paths.as_path(prefix)
        self.max_shard_bytes = max_shard_bytes
        self.records = 0
        self._temporaries: list[paths.Path] = []
        self._handle: BinaryIO | None = None
        self._shard_bytes = 0  # framed bytes of the current shard, held back ones included
        self._held: list[bytes] = []  # framed bytes of the current shard not yet written
        self._held_bytes = 0
        with self._naming_full_disk():
            paths.makedirs(self.prefix.parent)

    @property
    def pattern(self) -> str:
        """The final shards' file pattern (``PREFIX-?????-of-?????``): the name errors give."""
        return f"{self.prefix}-?????-of-?????"

    @contextlib.contextmanager
    def _naming_full_disk(self) -> Iterator[None]:
        try:
            yield
        except OSError as error:
            self._failed(error)
            raise

    def _failed(self, error: OSError) -> None:
        """A full disk: the temporaries are removed, then an error names the output."""
        number = disk_full_errno(error)
        if number is not None:
            failure = disk_full_error(self.pattern, number)  # the free space before abort()
            self.abort()
            raise failure from error

    def _write_held(self) -> None:
        if self._held:
            data = b"".join(self._held)
            self._held = []
            self._held_bytes = 0
            self._handle.write(data)

    def _roll(self) -> None:
        if self._handle is not None:
            self._write_held()
            self._handle.close()
        temporary = temporary_sibling(f"{self.prefix}-{len(self._temporaries):05d}")
        self._temporaries.append(temporary)
        self._handle = paths.open_file(temporary, "wb")  # closed in _roll/commit/abort
        self._shard_bytes = 0

    def write(self, record: bytes, ends: FrameEnds | None = None) -> None:
        """Appends ``record``; ``ends`` are its :func:`frame_ends` when the caller has them."""
        head, tail = frame_ends(record) if ends is None else ends
        size = len(head) + len(record) + len(tail)
        try:  # not a ``with``: this runs once per record, millions of times
            if self._handle is None or self._shard_bytes >= self.max_shard_bytes:
                self._roll()
            self._held += (head, record, tail)
            self._held_bytes += size
            if self._held_bytes >= _WRITE_BYTES:
                self._write_held()
        except OSError as error:
            self._failed(error)
            raise
        self._shard_bytes += size
        self.records += 1

    def flush(self) -> None:
        """Writes the framed records held back to the file (:meth:`commit` does too)."""
        with self._naming_full_disk():
            if self._handle is not None:
                self._write_held()
                self._handle.flush()

    def _finish(self) -> list[tuple[paths.Path, paths.Path]]:
        """Closes the last shard; ``(temporary, final)`` of every shard."""
        with self._naming_full_disk():
            if self._handle is None:
                self._roll()
            self._write_held()
            self._handle.close()
        self._handle = None
        count = len(self._temporaries)
        finals = [shard_name(self.prefix, i, count) for i in range(count)]
        staged = list(zip(self._temporaries, finals, strict=True))
        self._temporaries = []
        return staged

    def _remove_stale(self, finals: list[paths.Path]) -> None:
        """Shards of an earlier run with another count would still match the file pattern."""
        keep = {str(final) for final in finals}
        for stale in paths.glob(self.pattern):
            if stale not in keep:
                discard(stale)

    def commit(self, into: FolderCommit | None = None) -> list[paths.Path]:
        """Renames the shards into place now, or stages them in ``into`` (renamed, and stale
        shards removed, when that folder commits); returns their final names."""
        staged = self._finish()
        finals = [final for _, final in staged]
        folder = into if into is not None else FolderCommit(self.prefix.parent, last=None)
        for index, (temporary, final) in enumerate(staged):
            last = index == len(staged) - 1
            folder.stage(temporary, final, (lambda: self._remove_stale(finals)) if last else None)
        if into is None:
            folder.commit()
        return finals

    def abort(self) -> None:
        """Removes every temporary shard (safe to call twice, and after a failed write)."""
        self._held = []
        self._held_bytes = 0
        if self._handle is not None:
            with contextlib.suppress(OSError):  # flushing what is left fails on a full disk
                self._handle.close()
            self._handle = None
        for temporary in self._temporaries:
            discard(temporary)
        self._temporaries = []
