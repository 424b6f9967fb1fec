"""Open a dump file whatever its compression, and turn a broken archive into a :class:`DumpError`.

Wikipedia ships dumps as ``.bz2`` (often *multistream*: many bz2 streams laid end to end, which
:mod:`bz2` reads as one), WikiExtractor output is often ``.bz2`` or ``.gz``, and users rename
files. So the format is told by the magic bytes at the start of the file, never by its name.

A truncated download or a flipped byte otherwise surfaces deep inside a reader as a bare
``EOFError: Compressed file ended before the end-of-stream marker was reached`` or
``OSError: Invalid data stream``, with no file name. :class:`CheckedStream` wraps the decompressed
stream so that every read failure becomes a :class:`DumpError` that names the file, the
decompressed byte offset reached, and -- through :attr:`CheckedStream.context`, which the reader
sets -- the last record it read completely.
"""

from __future__ import annotations

import bz2
import gzip
import io
import os
import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

from tw_jax.errors import DumpError
from tw_jax.io.paths import open_file

# Magic bytes -> format. bz2: "BZh" then the block size digit 1-9. gzip: 1f 8b.
_BZ2_MAGIC = b"BZh"
_GZIP_MAGIC = b"\x1f\x8b"
# Formats we recognise but do not read: failing loudly beats parsing compressed bytes as XML.
_UNSUPPORTED_MAGIC = {
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"7z\xbc\xaf\x27\x1c": "7z",
    b"PK\x03\x04": "zip",
}

# What the decompressors raise on bad input: OSError (bz2 "Invalid data stream", gzip's
# BadGzipFile), EOFError (truncated stream), zlib.error (corrupt deflate data), and ValueError /
# MemoryError from a few corrupt-header paths in the C decoders.
_READ_ERRORS = (OSError, EOFError, zlib.error, ValueError, MemoryError)

COMPRESSIONS = ("plain", "bz2", "gzip")


def sniff_compression(head: bytes) -> str:
    """Name the compression of a file from its first bytes: ``plain``, ``bz2`` or ``gzip``.

    Raises ValueError for recognised but unsupported archive formats (xz, zstd, 7z, zip).
    """
    if head[:3] == _BZ2_MAGIC and head[3:4].isdigit() and head[3:4] != b"0":
        return "bz2"
    if head[:2] == _GZIP_MAGIC:
        return "gzip"
    for magic, name in _UNSUPPORTED_MAGIC.items():
        if head.startswith(magic):
            raise ValueError(f"{name} archives are not supported; recompress as .bz2 or .gz")
    return "plain"


class CheckedStream(io.RawIOBase):
    """A read-only decompressed byte stream whose read errors are :class:`DumpError`.

    ``context`` is an optional callable the consumer sets to describe the last record it read
    completely (``"after page id=12 'Foo'"``); its answer is put in the error's record, next to
    the decompressed byte offset.
    """

    def __init__(
        self, raw: BinaryIO, path: str, compression: str, fileobj: BinaryIO | None = None
    ) -> None:
        super().__init__()
        self._raw = raw
        self._fileobj = fileobj  # the file under a decompressor, which does not close it
        self.path = path
        self.compression = compression
        self.position = 0  # decompressed bytes handed out so far
        self.context: Callable[[], str | None] | None = None

    # -- error conversion -------------------------------------------------------------------
    def error(self, exc: BaseException) -> DumpError:
        """The DumpError for a failure of the underlying stream at the current position."""
        if isinstance(exc, EOFError):
            what = f"truncated {self.compression} archive"
        elif self.compression == "plain":
            what = "read error"
        else:
            what = f"corrupt {self.compression} archive"
        detail = str(exc) or type(exc).__name__
        return DumpError(self.path, self.where(), f"{what} ({detail})")

    def where(self) -> str:
        """Where reading stands: decompressed byte offset, plus the consumer's context."""
        where = f"decompressed byte {self.position}"
        if self.context is not None:
            extra = self.context()
            if extra:
                where = f"{where}, {extra}"
        return where

    # -- reading -----------------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._raw.read(size)
        except _READ_ERRORS as exc:
            raise self.error(exc) from exc
        self.position += len(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes with at most one read of the decompressor.

        Streaming readers use this rather than :meth:`read`: when the archive breaks, ``read``
        loses the good bytes it had buffered for the same call, ``read1`` hands them out first,
        so the records before the break are read and the error names the last of them.
        """
        try:
            data = self._raw.read1(size)  # type: ignore[attr-defined]
        except _READ_ERRORS as exc:
            raise self.error(exc) from exc
        self.position += len(data)
        return data

    def _read1_raw(self, size: int) -> bytes:
        """read1 without error conversion, for the prefetch thread (see :func:`iter_chunks`)."""
        data = self._raw.read1(size)  # type: ignore[attr-defined]
        self.position += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        return n

    def readline(self, size: int | None = -1) -> bytes:
        try:
            line = self._raw.readline(-1 if size is None else size)
        except _READ_ERRORS as exc:
            raise self.error(exc) from exc
        self.position += len(line)
        return line

    def __iter__(self) -> Iterator[bytes]:  # type: ignore[override]
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def close(self) -> None:
        if not self.closed:
            try:
                self._raw.close()
                if self._fileobj is not None:
                    self._fileobj.close()
            finally:
                super().close()


def open_binary(path: str | os.PathLike[str]) -> CheckedStream:
    """Open ``path`` for reading its decompressed bytes (plain, bz2 incl. multistream, gzip).

    The format comes from the magic bytes. A missing or unreadable file, an unsupported archive
    format, and any later decompression failure raise :class:`DumpError` naming the file.
    """
    path_s = os.fspath(path)
    try:
        raw = open_file(path_s, "rb")  # handed to the returned stream, which closes it
    except OSError as exc:
        raise DumpError(path_s, None, f"cannot open: {exc.strerror or exc}") from exc
    try:
        head = raw.read(8)
        raw.seek(0)
        compression = sniff_compression(head)
    except ValueError as exc:
        raw.close()
        raise DumpError(path_s, None, str(exc)) from exc
    except OSError as exc:
        raw.close()
        raise DumpError(path_s, None, f"cannot read: {exc.strerror or exc}") from exc
    stream: BinaryIO
    if compression == "bz2":
        stream = bz2.BZ2File(raw)  # type: ignore[assignment]
    elif compression == "gzip":
        stream = gzip.GzipFile(fileobj=raw)  # type: ignore[assignment]
    else:
        stream = raw
    return CheckedStream(stream, path_s, compression, None if stream is raw else raw)


_PREFETCH_POLL_S = 0.05


def iter_chunks(stream: CheckedStream, size: int, prefetch: int = 0) -> Iterator[bytes]:
    """Yield the decompressed bytes of ``stream`` in chunks of at most ``size``, then stop.

    With ``prefetch > 0`` a background thread decompresses up to that many chunks ahead. bz2
    and zlib release the GIL while they work, so on a machine with a spare core decompression
    (the slowest part of reading a ``.bz2`` dump) overlaps with parsing and with whatever the
    consumer does with each record. Errors still arrive in order: a broken archive is reported
    after every good chunk before it has been handed out, and only then converted to a
    :class:`DumpError`, so ``stream.context`` describes the last record really read.
    Closing the generator early stops the thread before returning.
    """
    if prefetch <= 0:
        while True:
            chunk = stream.read1(size)
            if not chunk:
                return
            yield chunk
    chunks: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=prefetch)
    stop = threading.Event()

    def put(item: bytes | BaseException) -> bool:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=_PREFETCH_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            while not stop.is_set():
                chunk = stream._read1_raw(size)
                if not put(chunk) or not chunk:
                    return
        except BaseException as exc:  # handed to the consumer, which re-raises it in order
            put(exc)

    worker = threading.Thread(target=work, name=f"prefetch {stream.path}", daemon=True)
    worker.start()
    try:
        while True:
            item = chunks.get()
            if isinstance(item, BaseException):
                if isinstance(item, _READ_ERRORS):
                    raise stream.error(item) from item
                raise item
            if not item:
                return
            yield item
    finally:
        stop.set()
        worker.join()
