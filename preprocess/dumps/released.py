"""Released files read in place: a folder, a zip, or a folder of zips, local or in a bucket.

The TemporalWiki, CKL and EvolvingQA releases ship as CSV/JSON files in folders and zips. A
:class:`PublishedFile` is one such file wherever it sits; :func:`index_files` lists every file
below a root (zips inside included) and :meth:`PublishedFile.open_text` reads one. Files are
listed and read through :mod:`tw_jax.io.paths`, a zip in a bucket with ranged reads. Zip members
are read in place, never extracted; an archive with an absolute member path, a ``..`` component
or a symbolic link is refused whole (:class:`UnsafeArchiveError`). :func:`extract_safely`
unpacks one (for faster reading) under the same rules and checks every destination stays inside
the target folder.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import re
import shutil
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.csv_reader import csv_rows

# A zip member that expands more than this many times its stored size is refused unread: text
# (Wikipedia, CSV, JSON) deflates 3-10x, a zip bomb by a thousand and more.
MAX_EXPANSION_RATIO = 100
EXPANSION_ENV = "TW_JAX_MAX_ZIP_RATIO"
_SMALL_MEMBER = 1 << 20  # below 1 MiB expanded, any ratio is harmless


class UnsafeArchiveError(DumpError):
    """A zip member could write or read outside its folder; the archive is not used."""


# --- safe zip access ----------------------------------------------------------------------


def _unsafe_reason(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    parts = re.split(r"[\\/]", name)
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "absolute path"
    if ".." in parts:
        return "'..' path component"
    if "\x00" in name:
        return "NUL byte in name"
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "symbolic link"
    return None


@contextlib.contextmanager
def open_zip(archive: str | os.PathLike[str]) -> Iterator[zipfile.ZipFile]:
    """A zip file, local or in a bucket (read with ranged requests, not downloaded whole)."""
    if not paths.is_url(archive):
        with zipfile.ZipFile(archive) as handle:
            yield handle
        return
    with paths.open_file(archive, "rb") as raw, zipfile.ZipFile(raw) as handle:
        yield handle


def safe_members(archive: str | os.PathLike[str]) -> list[zipfile.ZipInfo]:
    """The archive's members, after checking every one (any unsafe member refuses all)."""
    try:
        with open_zip(archive) as handle:
            members = handle.infolist()
    except zipfile.BadZipFile as error:
        raise DumpError(os.fspath(archive), None, f"not a readable zip: {error}") from None
    seen: set[str] = set()
    for info in members:
        reason = _unsafe_reason(info)
        if reason:
            raise UnsafeArchiveError(os.fspath(archive), info.filename, f"unsafe member: {reason}")
        if info.filename in seen:  # zipfile would read the last silently
            count = sum(m.filename == info.filename for m in members)
            raise UnsafeArchiveError(os.fspath(archive), info.filename,
                                     f"{count} members of this name; which one is meant is "
                                     "ambiguous, so the archive is not used")
        seen.add(info.filename)
    return members


def extract_safely(archive: str | os.PathLike[str], target: str | os.PathLike[str]) -> list[Path]:
    """Unpacks ``archive`` (local or in a bucket) under the local folder ``target``; returns the
    files written."""
    if paths.is_url(target):
        raise ValueError(f"{os.fspath(target)}: extract into a local folder (zips in a bucket "
                         "are read in place)")
    root = Path(target).resolve()
    written = []
    members = safe_members(archive)
    for info in members:  # every member before any is written: no half-extracted bomb
        check_expansion(info, f"{os.fspath(archive)}!{info.filename}")
    with open_zip(archive) as handle:
        for info in members:
            destination = (root / info.filename).resolve()
            if not destination.is_relative_to(root):
                raise UnsafeArchiveError(os.fspath(archive), info.filename, "leaves the target")
            if info.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            with handle.open(info) as source, open(destination, "wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
            written.append(destination)
    return written


@dataclass(frozen=True)
class PublishedFile:
    """A CSV on disk (``archive`` None) or inside a zip; ``path`` is where it sits logically."""

    path: PurePosixPath
    location: str
    archive: str | None = None

    @property
    def name(self) -> str:
        return f"{self.archive}!{self.location}" if self.archive else self.location

    def open_text(self) -> IO[str]:
        if self.archive is None:
            return paths.open_file(self.location, "r", encoding="utf-8", newline="")
        stack = contextlib.ExitStack()  # the zip (and its object) close with the member
        handle = stack.enter_context(open_zip(self.archive))
        try:
            check_expansion(handle.getinfo(self.location), self.name)
        except DumpError:
            stack.close()
            raise
        member = handle.open(self.location)
        text = io.TextIOWrapper(member, encoding="utf-8", newline="")
        original_close = text.close

        def close() -> None:
            original_close()
            stack.close()

        text.close = close  # type: ignore[method-assign]
        return text


def max_expansion_ratio() -> float:
    """``$TW_JAX_MAX_ZIP_RATIO`` when set, else :data:`MAX_EXPANSION_RATIO`."""
    value = os.environ.get(EXPANSION_ENV)
    try:
        ratio = float(value) if value else MAX_EXPANSION_RATIO
    except ValueError:
        ratio = 0.0
    if ratio <= 0:
        raise ValueError(f"${EXPANSION_ENV}={value!r}: expected a positive ratio")
    return ratio


def check_expansion(info: zipfile.ZipInfo, name: str) -> None:
    """Refuse a member whose expanded size is out of proportion to its stored size (a zip
    bomb) before a byte of it is inflated. zipfile never returns more than the declared size
    (and checks the CRC at the end), so the declared size bounds what a reader can get."""
    if info.file_size <= _SMALL_MEMBER:
        return
    ratio = info.file_size / max(info.compress_size, 1)
    limit = max_expansion_ratio()
    if ratio > limit:
        raise DumpError(
            name, None,
            f"expands {ratio:,.0f} times ({info.file_size:,} bytes from {info.compress_size:,}); "
            f"refused as a zip bomb (the limit is {limit:g}: set ${EXPANSION_ENV} to change it)",
        )


def _zip_files(archive: str) -> Iterator[PublishedFile]:
    stem = posixpath.splitext(posixpath.basename(archive))[0]
    for info in safe_members(archive):
        if info.is_dir():
            continue
        path = PurePosixPath(info.filename.replace("\\", "/"))
        if path.parts[0] != stem:  # TWiki_Probes.zip may hold its files at the top
            path = PurePosixPath(stem, *path.parts)
        yield PublishedFile(path, info.filename, os.fspath(archive))


def walk_files(root: str) -> Iterator[tuple[str, str]]:
    """``(path, path relative to root with / separators)`` of every file below a local folder
    or a folder in a bucket, folders in sorted order, names sorted within each."""
    if not paths.is_url(root):
        for folder, _, names in sorted(os.walk(root)):
            for name in sorted(names):
                path = os.path.join(folder, name)
                yield path, os.path.relpath(path, root).replace(os.sep, "/")
        return
    prefix = root.rstrip("/") + "/"
    folders = [root.rstrip("/")]
    while folders:  # epath's walk() drops the gs:// of the folders it yields, so list by hand
        folder = folders.pop(0)
        names = paths.listdir(folder)
        below = [paths.join(folder, n) for n in names]
        subfolders = sorted(p for p in below if paths.isdir(p))
        for path in below:
            if path not in subfolders:
                yield path, path[len(prefix):]
        folders = sorted(folders + subfolders)


def index_files(root: str | os.PathLike[str]) -> list[PublishedFile]:
    """Every file of a release folder or zip (local or in a bucket), zips inside included."""
    root = os.fspath(root)
    if paths.isfile(root):
        return list(_zip_files(root))
    if not paths.isdir(root):
        raise FileNotFoundError(f"{root}: no such folder or zip of TemporalWiki files")
    found = []
    for path, relative in walk_files(root):
        if relative.lower().endswith(".zip"):
            found.extend(_zip_files(path))
        else:
            found.append(PublishedFile(PurePosixPath(relative), path))
    _refuse_duplicates(found)
    return found


def _refuse_duplicates(files: list[PublishedFile]) -> None:
    """One logical file in two places (a folder and a zip of the same name, two zips of one
    name) is refused, naming both: reading either would silently drop the other."""
    first: dict[PurePosixPath, PublishedFile] = {}
    for file in files:
        other = first.setdefault(file.path, file)
        if other is not file:
            raise DumpError(file.name, None,
                            f"is {file.path} again (also {other.name}); keep one of the two")


def text_csv_rows(file: PublishedFile) -> Iterator[tuple[int, dict[str, int], list[str]]]:
    """(line, column → index, fields) of each non-empty row of a CSV with a ``text`` column;
    a missing column or a row of the wrong width raises :class:`DumpError`."""
    with file.open_text() as handle:
        rows = csv_rows(handle, file.name)
        header = next(rows, (1, None))[1]
        if header is None or "text" not in header:
            raise DumpError(file.name, "line 1", f"no 'text' column in header {header}")
        columns = {name: i for i, name in enumerate(header)}
        for line, fields in rows:
            if not fields:
                continue
            if len(fields) != len(header):
                raise DumpError(
                    file.name, f"line {line}", f"{len(fields)} fields, header has {len(header)}"
                )
            yield line, columns, fields


def csv_texts(file: PublishedFile) -> Iterator[str]:
    """The ``text`` column of a CSV; a malformed row raises :class:`DumpError`."""
    for _, columns, fields in text_csv_rows(file):
        if fields[columns["text"]]:
            yield fields[columns["text"]]
