"""JSON lines, read and written one way everywhere: a stage's records, results, predictions.

Reading (:func:`records`, :func:`numbered_records`, :func:`parse_record`) streams a file, local
or ``gs://``, skips blank lines, and makes a line that is not a JSON object (or lacks a field the
reader needs) a :class:`~tw_jax.errors.DumpError` naming the file and the line. Writing
(:func:`json_line`, :func:`write_records`) keeps non-ASCII text as is (UTF-8) and replaces a file
whole and atomically.

A results file, which several runs extend, has its appender (:func:`append_lines`). It grows by whole rows, and survives the runs that append to it being killed:

- **A torn last line is repaired before appending.** A file whose last line has no newline
  ends with a row cut by a crash, or with a whole row written without its newline elsewhere.
  A last line that parses as JSON keeps its bytes and gets its newline; one that does not is cut
  back to the last complete row, with a one-line warning saying how many bytes were dropped. The
  new rows never glue onto a fragment (which would make both unreadable).
- **A failed write leaves the file as it was**: locally the file is truncated back to its size
  before the append (a short write, a full disk); in a bucket, where objects cannot be appended
  to, the old bytes plus the new rows are uploaded under a temporary name and moved into place,
  so a reader sees the old file or the whole new one. A full disk, a spent quota or a file-size
  limit (ENOSPC, EDQUOT, EFBIG) is then one :class:`~tw_jax.errors.OutputError` naming the file
  and how many rows were not appended, which the CLI prints as one line.

Two runs appending to one bucket object at once may lose one run's rows (the later upload wins):
give concurrent runs their own output folder.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from tw_jax.errors import DumpError, OutputError
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, disk_full_errno, disk_full_reason

log = logging.getLogger(__name__)


def parse_record(line: str, path: paths.PathLike, number: int, required: Sequence[str] = (),
                 hint: str = "") -> dict[str, Any]:
    """One line as a JSON object with the ``required`` fields; anything else is a
    :class:`DumpError` naming ``path`` and line ``number`` (``hint`` ends a not-JSON message)."""
    where = f"line {number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise DumpError(os.fspath(path), where, f"not JSON ({error.msg}){hint}") from None
    if not isinstance(record, dict):
        raise DumpError(os.fspath(path), where, "not a JSON object")
    if any(field not in record for field in required):
        raise DumpError(os.fspath(path), where,
                        f"expected an object with {', '.join(required)}")
    return record


def numbered_records(path: paths.PathLike, required: Sequence[str] = ()
                     ) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each non-blank line of ``path``, streamed
    (:func:`parse_record` says what a bad line raises)."""
    with paths.open_file(path, "r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, parse_record(line, path, number, required)


def records(path: paths.PathLike, required: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
    """Each non-blank line of ``path`` as a JSON object (see :func:`numbered_records`)."""
    for _, record in numbered_records(path, required):
        yield record


def json_line(record: Mapping[str, Any]) -> str:
    """``record`` as one JSON line with its newline, non-ASCII text kept as is."""
    return json.dumps(record, ensure_ascii=False) + "\n"


def write_records(path: paths.PathLike, rows: Iterable[Mapping[str, Any]]) -> str:
    """``rows`` as the JSON-lines file ``path`` (local or ``gs://``), replaced whole and
    atomically; returns the path."""
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json_line(row) for row in rows)
    return os.fspath(path)


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
    in one write, after repairing a torn last line; returns the path. A full disk leaves the
    file as it was and is an :class:`OutputError` naming it."""
    rows = [f"{line}\n" for line in lines]
    payload = "".join(rows).encode("utf-8")
    where = os.fspath(path)
    if not payload:
        return where
    if paths.is_url(where):
        old = paths.read_bytes(where) if paths.exists(where) else b""
        with atomic_open(where, "wb") as handle:
            handle.write(repaired(old, where) + payload)
        return where
    try:
        _append_local(where, payload)
    except OSError as error:
        number = disk_full_errno(error)
        if number is None:
            raise
        raise OutputError(where, f"{disk_full_reason(number, where)}; {len(rows)} row(s) not "
                          "appended, the file is as it was") from None
    return where


def _append_local(where: str, payload: bytes) -> None:
    """``payload`` appended to the local file ``where`` after repairing a torn last line; a
    write that fails puts the file back as it was, torn fragment included, and raises."""
    os.makedirs(os.path.dirname(os.path.abspath(where)), exist_ok=True)
    created = not os.path.exists(where)
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
            if created:  # as it was: absent
                os.unlink(where)
            raise
    finally:
        os.close(fd)


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


__all__ = ["append_lines", "json_line", "numbered_records", "parse_record", "records", "repaired",
           "write_records"]
