"""Outputs that appear whole or not at all, in a local folder or a bucket.

A stage writes every file under a temporary name beside its final one and renames it into place
only when the stage has succeeded, so an interrupted run (Ctrl-C, SIGKILL, a full disk) never
leaves a file that looks complete. Stages write ``stats.json`` last: a folder is finished exactly
when its ``stats.json`` exists. In a bucket the same holds: an object appears only once its
upload completes, and the rename is a server-side copy of the finished object.

A folder of several files goes through :class:`FolderCommit`: every file is written under its
temporary name first and all are renamed together at the end, ``stats.json`` last, so a run that
fails on its third file leaves none of the first two under their final names either.

A full disk (``ENOSPC``), a spent quota (``EDQUOT``) or a file-size limit (``EFBIG``) while
writing becomes an :class:`~tw_jax.errors.OutputError` naming the final path (never the hidden
temporary one) and the free space left, which the CLI prints as one line; the temporaries are
removed first.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import resource
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import IO, Any

from tw_jax.errors import OutputError
from tw_jax.io import paths
from tw_jax.io.paths import PathLike

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_WHAT = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large",
}
# TensorStore (orbax's writer) reports the errno in its message text, not as an OSError.
_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")


def temporary_sibling(path: PathLike) -> paths.Path:
    """A hidden name in the same folder (so the final rename stays on one filesystem)."""
    path = paths.as_path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def commit(temporary: PathLike, final: PathLike) -> None:
    """Moves a finished temporary file into place, replacing any older version atomically."""
    paths.replace(temporary, final)


def discard(path: PathLike) -> None:
    paths.remove(path, missing_ok=True)


# --- a full disk --------------------------------------------------------------------------------


def disk_full_errno(error: BaseException | None) -> int | None:
    """``ENOSPC``, ``EDQUOT`` or ``EFBIG`` when ``error`` (or an error it was raised from) is a
    full disk: an :class:`OSError`, or a library error whose text carries the code as
    TensorStore's does (``[os_error_code='28']``); None for anything else."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS:
            return error.errno
        found = _OS_ERROR_CODE.search(str(error))
        if found and int(found.group(1)) in DISK_FULL_ERRNOS:
            return int(found.group(1))
        error = error.__cause__ or error.__context__
    return None


def _size(size: int) -> str:
    """``512 bytes``, ``29.3 KiB``, ``4 MiB``, ``12.5 GiB``."""
    if size < 1024:
        return f"{size} bytes"
    unit, scale = next(u for u in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)) if size >= u[1])
    return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"


def _free_space(path: PathLike) -> int | None:
    """Bytes free to this user on the filesystem of ``path`` (its nearest existing folder)."""
    if paths.is_url(path):
        return None
    try:
        return shutil.disk_usage(paths.nearest_existing(path)).free
    except OSError:
        return None


def disk_full_reason(number: int, path: PathLike) -> str:
    """``no space left on device while writing it (3 MiB free on that filesystem)`` and the
    like: what failed and what limit it met, for a message about ``path``."""
    if number == errno.EFBIG:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit == resource.RLIM_INFINITY:
            return f"{_WHAT[number]} while writing it (larger than that filesystem allows)"
        return f"{_WHAT[number]} while writing it (the file-size limit, ulimit -f, is {_size(limit)})"
    free = _free_space(path)
    where = "" if free is None else f" ({_size(free)} free on that filesystem)"
    return f"{_WHAT.get(number, os.strerror(number))} while writing it{where}"


def disk_full_error(path: PathLike, number: int) -> OutputError:
    """The one-line error of a full disk while writing the output ``path``."""
    reason = disk_full_reason(number, path)
    return OutputError(os.fspath(path), f"{reason}; nothing was left under its final name")


def raise_if_disk_full(error: BaseException, path: PathLike) -> None:
    """Raises the :class:`OutputError` naming ``path`` when ``error`` is a full disk (the
    output's final name: the error a person reads must not name a hidden temporary); returns
    otherwise, for the caller to re-raise ``error``. For loops too hot for a ``with``."""
    number = disk_full_errno(error)
    if number is not None:
        raise disk_full_error(path, number) from error


@contextlib.contextmanager
def naming_full_disk(path: PathLike) -> Iterator[None]:
    """Turns a full disk inside the block into an :class:`OutputError` naming ``path``."""
    try:
        yield
    except OSError as error:
        raise_if_disk_full(error, path)
        raise


# --- one file -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _staged(path: PathLike, mode: str, kwargs: dict[str, Any]) -> Iterator[tuple[Any, IO[Any]]]:
    """``(temporary, handle)``: the block writes the temporary sibling of ``path``; it is
    flushed and synced on success, removed on failure."""
    if not any(flag in mode for flag in "wx"):
        raise ValueError(f"atomic_open writes whole files; got mode {mode!r}")
    temporary = temporary_sibling(path)
    try:
        with naming_full_disk(path):
            paths.makedirs(paths.parent(path))
            with paths.open_file(temporary, mode.replace("x", "w"), **kwargs) as handle:
                yield temporary, handle
                handle.flush()
                if not paths.is_url(temporary):
                    os.fsync(handle.fileno())
    except BaseException:
        discard(temporary)
        raise


def _commit_named(temporary: PathLike, final: PathLike) -> None:
    try:
        with naming_full_disk(final):
            commit(temporary, final)
    except BaseException:
        discard(temporary)
        raise


@contextlib.contextmanager
def atomic_open(path: PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """``open`` for writing whose file only appears under ``path`` if the block succeeds.

    ``kwargs`` are :func:`open`'s text options (``encoding``, ``newline``, ``errors``).
    """
    with _staged(path, mode, kwargs) as (temporary, handle):
        yield handle
    _commit_named(temporary, path)


def _json_text(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_json(path: PathLike, obj: Any) -> None:
    """Writes pretty, key-sorted JSON atomically (stats and manifests that people read)."""
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.write(_json_text(obj))


# --- a folder of files --------------------------------------------------------------------------


class FolderCommit:
    """The files of one output folder, renamed into place together, ``last`` at the very end.

    ``with FolderCommit(out) as folder:`` then :meth:`open` / :meth:`write_json` each file (and
    ``ShardedTFRecordWriter.commit(into=folder)`` for shards). Everything is written under
    temporary names; leaving the block renames them all (``stats.json`` last), or, when it
    raises, removes them all, so a run that fails on its third file leaves no file of its own
    under a final name. The price is that the old and the new files coexist on disk until the
    renames: a rewrite needs room for both.
    """

    def __init__(self, folder: PathLike, last: str | None = "stats.json") -> None:
        self.folder = os.fspath(folder)
        self.last = last
        self._pending: list[tuple[Any, str]] = []  # (temporary, final), in the order written
        self._after_renames: list[Callable[[], None]] = []

    def path(self, name: str) -> str:
        return paths.join(self.folder, name)

    @contextlib.contextmanager
    def open(self, name: str, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
        """Like :func:`atomic_open` for ``folder/name``, renamed at :meth:`commit`."""
        final = self.path(name)
        with _staged(final, mode, kwargs) as (temporary, handle):
            yield handle
        self.stage(temporary, final)

    def write_json(self, name: str, obj: Any) -> None:
        with self.open(name, "w", encoding="utf-8") as handle:
            handle.write(_json_text(obj))

    def stage(self, temporary: PathLike, final: PathLike,
              after_renames: Callable[[], None] | None = None) -> None:
        """A finished temporary file to rename to ``final`` at :meth:`commit`; ``after_renames``
        runs once every file but ``last`` is in place (removing stale shards, say)."""
        self._pending.append((temporary, os.fspath(final)))
        if after_renames is not None:
            self._after_renames.append(after_renames)

    def commit(self) -> None:
        """Renames every staged file into place, ``last`` after the rest and after the
        ``after_renames`` actions; a failed rename removes the temporaries not renamed yet."""
        last = [pair for pair in self._pending if paths.as_path(pair[1]).name == self.last]
        first = [pair for pair in self._pending if pair not in last]
        try:
            self._rename(first)
            self._run_after_renames()
            self._rename(last)
        finally:
            self.abort()

    def _rename(self, pairs: list[tuple[Any, str]]) -> None:
        for pair in pairs:
            temporary, final = pair
            with naming_full_disk(final):
                commit(temporary, final)
            self._pending.remove(pair)

    def _run_after_renames(self) -> None:
        actions, self._after_renames = self._after_renames, []
        for action in actions:
            action()

    def abort(self) -> None:
        """Removes every temporary not renamed yet."""
        pending, self._pending = self._pending, []
        self._after_renames = []
        for temporary, _ in pending:
            discard(temporary)

    def __enter__(self) -> FolderCommit:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()
