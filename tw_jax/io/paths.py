"""Every path a user gives, local or a URL (``gs://``), behind one small API.

Dumps, stage outputs, ``TW_JAX_DATA_DIR``, ``MODEL_DIR``, checkpoints, Hugging Face folders,
metrics and reports may all live in a bucket. URLs stay URLs: they are never wrapped in
:mod:`pathlib` (which turns ``gs://b/x`` into ``gs:/b/x``, a local folder). Path objects are
:class:`etils.epath.Path`, the path type orbax uses too; plain file operations go through the
functions below, which call the builtins for local paths (all of :func:`open`'s options) and
epath's backend for URLs (TensorFlow's GCS file system, or gcsfs with ``EPATH_USE_TF=false``,
which :mod:`tw_jax.io.gcs` sets when an emulator is configured).

Object stores have no folders and no atomic rename of many files; what the stages rely on still
holds: an object appears only when its upload completes (so a killed writer leaves nothing
final-named), ``replace`` is a server-side copy then delete, and a stage's ``stats.json`` is
written last.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator
from typing import IO, Any

from etils import epath

PathLike = str | os.PathLike[str]
Path = epath.Path  # URL-aware, pathlib-like: ``Path("gs://b/x") / "y"`` stays ``gs://b/x/y``


class StorageError(OSError):
    """A path that cannot be used: missing bucket or object, no credentials, no permission.

    The message starts with the path; the CLI prints it as one line.
    """


def is_url(path: PathLike) -> bool:
    """True for ``scheme://…`` paths (``gs://``, ``s3://``); False for local paths."""
    return "://" in os.fspath(path)


def as_path(path: PathLike) -> epath.Path:
    """A path object for ``path`` that keeps URLs intact."""
    return epath.Path(os.fspath(path))


def resolve(path: PathLike) -> str:
    """The form a command keeps: a local path made absolute (``~`` expanded), a URL unchanged.

    Resolved once where the user hands the path over (the CLI), so a later ``chdir`` or a library
    that insists on absolute paths (orbax) never sees a relative one.
    """
    text = os.fspath(path)
    if is_url(text):
        return text.rstrip("/") if text.count("/") > 3 else text
    return os.path.abspath(os.path.expanduser(text))


def nearest_existing(path: PathLike) -> str:
    """A local path itself, or its closest existing ancestor (where it would be created): what
    free space and write permission are asked of before the path exists."""
    found = os.path.abspath(os.fspath(path))
    while not os.path.exists(found) and os.path.dirname(found) != found:
        found = os.path.dirname(found)
    return found


def join(base: PathLike, *parts: str) -> str:
    base = os.fspath(base)
    if is_url(base):
        return posixpath.join(base, *parts)
    return os.path.join(base, *parts)


def parent(path: PathLike) -> str:
    return os.fspath(as_path(path).parent)


def open_file(
    path: PathLike,
    mode: str = "r",
    *,
    encoding: str | None = None,
    newline: str | None = None,
    errors: str | None = None,
) -> IO[Any]:
    """:func:`open` for local paths and URLs alike (modes r, w, a; text or binary).

    Writing creates a local file's missing folders, as object stores need none. A URL opened
    for writing becomes visible when the handle is closed; one opened for reading is seekable
    (ranged reads), so the multistream and compressed readers work on it unchanged.
    """
    if not is_url(path):
        if any(flag in mode for flag in "wax"):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return open(path, mode, encoding=encoding, newline=newline, errors=errors)  # noqa: SIM115
    binary_mode = mode.replace("t", "").replace("b", "") + "b"
    raw = as_path(path).open(binary_mode)
    if binary_mode == "rb":
        # The same buffered-reader interface as a local file (read1, peek): gcsfs and
        # TensorFlow's GFile lack read1, which the decompressing readers use.
        raw = io.BufferedReader(_RawReader(raw), buffer_size=1 << 20)
    if "b" in mode:
        return raw
    return io.TextIOWrapper(raw, encoding=encoding or "utf-8", newline=newline, errors=errors)


class _RawReader(io.RawIOBase):
    """A backend's file object seen as raw I/O, so :class:`io.BufferedReader` can wrap it."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._handle.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._handle.seek(offset, whence) or self._handle.tell()

    def tell(self) -> int:
        return self._handle.tell()

    def close(self) -> None:
        if not self.closed:
            self._handle.close()
        super().close()


def exists(path: PathLike) -> bool:
    return os.path.exists(path) if not is_url(path) else as_path(path).exists()


def isdir(path: PathLike) -> bool:
    return os.path.isdir(path) if not is_url(path) else as_path(path).is_dir()


def isfile(path: PathLike) -> bool:
    if not is_url(path):
        return os.path.isfile(path)
    target = as_path(path)
    return target.exists() and not target.is_dir()


def makedirs(path: PathLike) -> None:
    """Creates a folder and its parents (object stores need none: a no-op there)."""
    as_path(path).mkdir(parents=True, exist_ok=True)


def listdir(path: PathLike) -> list[str]:
    """Names (not paths) in a folder, sorted."""
    if not is_url(path):
        return sorted(os.listdir(path))
    return sorted(child.name for child in as_path(path).iterdir())


def glob(pattern: PathLike) -> list[str]:
    """Paths matching a glob pattern (``*``, ``?``, ``[…]``; no ``**``), sorted."""
    pattern = os.fspath(pattern)
    if not is_url(pattern):
        import glob as globbing

        return sorted(globbing.glob(pattern))
    folder, name = posixpath.split(pattern)
    # epath joins the two again and hands the whole pattern to the backend's glob.
    return sorted(os.fspath(found) for found in as_path(folder).glob(name))


def remove(path: PathLike, *, missing_ok: bool = True) -> None:
    try:
        if is_url(path):
            as_path(path).unlink()
        else:
            os.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def remove_matching(pattern: PathLike) -> None:
    """Removes the files matching a glob pattern (nothing if none match)."""
    for found in glob(pattern):
        remove(found)


def rmtree(path: PathLike) -> None:
    """Removes a folder and everything below it (nothing if it is missing)."""
    if not is_url(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    target = as_path(path)
    if target.exists():
        target.rmtree(missing_ok=True)


def replace(source: PathLike, target: PathLike) -> None:
    """Moves a file into place, replacing an older one (atomic locally; copy + delete in a
    bucket, where the new object still appears whole)."""
    if not is_url(source) and not is_url(target):
        os.replace(source, target)
        return
    as_path(source).replace(as_path(target))


def copy(source: PathLike, target: PathLike) -> None:
    """Copies one file, between any two places (a bucket and a local folder included)."""
    if not is_url(source) and not is_url(target):
        shutil.copyfile(source, target)
        return
    with open_file(source, "rb") as reader, open_file(target, "wb") as writer:
        shutil.copyfileobj(reader, writer, 8 << 20)


def size(path: PathLike) -> int:
    if not is_url(path):
        return os.path.getsize(path)
    return int(as_path(path).stat().length)


def read_bytes(path: PathLike) -> bytes:
    with open_file(path, "rb") as handle:
        return handle.read()


def read_text(path: PathLike) -> str:
    with open_file(path, "r", encoding="utf-8") as handle:
        return handle.read()


def write_text(path: PathLike, text: str) -> None:
    """Writes a whole text file (not atomic locally: see :mod:`tw_jax.io.atomic` for that)."""
    with open_file(path, "w", encoding="utf-8") as handle:
        handle.write(text)


@contextlib.contextmanager
def local_copy(path: PathLike) -> Iterator[str]:
    """A local file with the contents of ``path``, for libraries that read only local files
    (SQLite, SentencePiece's loader, …): the path itself when local, else a temporary download."""
    if not is_url(path):
        yield os.fspath(path)
        return
    suffix = posixpath.splitext(os.fspath(path))[1]
    handle, local = tempfile.mkstemp(prefix="tw_jax_", suffix=suffix)
    os.close(handle)
    try:
        copy(path, local)
        yield local
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(local)
