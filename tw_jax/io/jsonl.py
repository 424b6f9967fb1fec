"""One appender for every JSON-lines results file (``results.jsonl``, ``ecbd_results.jsonl``).

A results file grows by whole rows, and survives the runs that append to it being killed:

- **A torn last line is repaired before appending.** A file whose last line has no newline
  ends with a row cut by a crash, or with a whole row written without its newline elsewhere.
  A last line that parses as JSON keeps its bytes and gets its newline; one that does not is cut
  back to the last complete row, with a one-line warning saying how many bytes were dropped. The
  new rows never glue onto a fragment (which would make both unreadable).
- **A failed write leaves the file as it was**: locally the file is truncated back to its size
  before the append (a short write, a full disk); in a bucket, where objects cannot be appended
  to, the old bytes plus the new rows are uploaded under a temporary name and moved into place,
  so a reader sees the old file or the whole new one.

Two runs appending to one bucket object at once may lose one run's rows (the later upload wins):
give concurrent runs their own output folder.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable

from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open

log = logging.getLogger(__name__)


def repaired(data: bytes, where: str) -> bytes:
    """``data`` (a JSON-lines file's bytes) ending with a newline: a last line that is whole
    JSON gets its newline, a torn one is cut off (with a warning naming ``where``)."""
    if not data or data.endswith(b"\n"):
        return data
    cut = data.rfind(b"\n") + 1
    tail = data[cut:]
    try:
        json.loads(tail.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        log.warning("%s: its last line was cut off (%d bytes, no newline, not JSON); dropped "
                    "before appending", where, len(tail))
        return data[:cut]
    return data + b"\n"


def append_lines(path: paths.PathLike, lines: Iterable[str]) -> str:
    """Append ``lines`` (each one JSON row, without its newline) to ``path``, local or gs://,
    in one write, after repairing a torn last line; returns the path."""
    payload = "".join(f"{line}\n" for line in lines).encode("utf-8")
    where = os.fspath(path)
    if not payload:
        return where
    if paths.is_url(where):
        old = paths.read_bytes(where) if paths.exists(where) else b""
        with atomic_open(where, "wb") as handle:
            handle.write(repaired(old, where) + payload)
        return where
    os.makedirs(os.path.dirname(os.path.abspath(where)), exist_ok=True)
    fd = os.open(where, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        kept, dropped = size, b""
        if size:
            tail_start = max(0, size - 1)
            os.lseek(fd, tail_start, os.SEEK_SET)
            if os.read(fd, 1) != b"\n":
                os.lseek(fd, 0, os.SEEK_SET)
                old = _read_all(fd, size)
                fixed = repaired(old, where)
                kept = min(len(fixed), size)
                dropped = old[kept:]
                os.ftruncate(fd, kept)
                payload = fixed[kept:] + payload  # the newline a whole last row lacked
        os.lseek(fd, kept, os.SEEK_SET)
        try:
            _write_all(fd, payload, where)
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, kept)  # the file as it was, torn fragment included
            if dropped:
                os.lseek(fd, kept, os.SEEK_SET)
                _write_all(fd, dropped, where)
            raise
    finally:
        os.close(fd)
    return where


def _write_all(fd: int, data: bytes, where: str) -> None:
    """Write all of ``data`` (a write may land part of it; the rest follows)."""
    total = len(data)
    while data:
        written = os.write(fd, data)
        if written <= 0:
            raise OSError(f"{where}: short append ({total - len(data)} of {total} bytes)")
        data = data[written:]


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


__all__ = ["append_lines", "repaired"]
