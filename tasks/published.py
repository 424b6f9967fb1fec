"""The released TemporalWiki files as tasks, so the published benchmark trains directly.

``register_published(folder_or_zip)`` reads a folder (or a ``.zip``, or a folder of the three
released zips ``TWiki_Diffsets.zip``, ``TWiki_Probes.zip``, ``Wikipedia_Full.zip``) holding

- ``TWiki_Diffsets/wikipedia_MMMM_gpt2.csv`` (``text``) → ``twiki_diffset_MMMM_lm``; when only
  ``wikipedia_MMMM_subset.csv`` (``id,url,title,text``) is there, its ``text`` is used;
- ``Wikipedia_Full/…/part*.csv`` (``text``) → ``twiki_full_MM_lm``, the month MM read from the
  folders below ``Wikipedia_Full`` (a two-digit name such as ``08`` or ``wikipedia_08``, else
  ``YYYYMM``, else ``MMDD``);
- ``TWiki_Probes/MMDD-MMDD_{changed,unchanged}.csv`` (``subject,relation,object``) →
  ``twiki_probes_MMMM_{changed,unchanged}`` in the four formats of :mod:`tw_jax.tasks.probes`
  (``0801-0901`` is pair ``0809``);

plus ``twiki_mixreview_MMMM_lm`` where the initial month's full snapshot is present. The release
has no SSM version, NON-DiffSet or light-tuning sets, so those tasks need ``tw-jax`` data.

The folder or zip may be local or in a bucket (``gs://``): files are listed and read through
:mod:`tw_jax.io.paths`, a zip in a bucket with ranged reads. Zip members are read in place, never
extracted; an archive with an absolute member path, a
``..`` component or a symbolic link is refused whole (:class:`UnsafeArchiveError`).
:func:`extract_safely` unpacks one (for faster reading) under the same rules and checks every
destination stays inside the target folder.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import posixpath
import re
import shutil
import stat
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

import numpy as np
import seqio
import tensorflow as tf

from tw_jax.io import paths
from tw_jax.preprocess.errors import DumpError
from tw_jax.tasks.mixreview import MixReviewMixture
from tw_jax.tasks.probes import PROBE_SPLITS, register_row_tasks
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.sources import read_probe_rows
from tw_jax.tasks.twiki import CORPUS_SPLITS, register_lm_task


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
    for info in members:
        reason = _unsafe_reason(info)
        if reason:
            raise UnsafeArchiveError(os.fspath(archive), info.filename, f"unsafe member: {reason}")
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


# --- the files of a release ---------------------------------------------------------------


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
        member = handle.open(self.location)
        text = io.TextIOWrapper(member, encoding="utf-8", newline="")
        original_close = text.close

        def close() -> None:
            original_close()
            stack.close()

        text.close = close  # type: ignore[method-assign]
        return text


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
    return found


_DIFFSET = re.compile(r"^wikipedia_(\d{4})_(subset|gpt2)\.csv$")
_PROBES = re.compile(r"^(\d{2})\d{2}-(\d{2})\d{2}_(changed|unchanged)\.csv$")
_PART = re.compile(r"^part[^/]*\.csv$")


@dataclass
class Release:
    diffsets: dict[str, dict[str, PublishedFile]] = field(default_factory=dict)
    probes: dict[str, dict[str, PublishedFile]] = field(default_factory=dict)
    full: dict[str, list[PublishedFile]] = field(default_factory=dict)


def full_month(file: PublishedFile) -> str:
    """The month of a ``Wikipedia_Full`` part, from the folders between it and the root."""
    parts = file.path.parts
    below = parts[parts.index("Wikipedia_Full") + 1 : -1]
    for pattern, group in (
        (r"(?<!\d)(\d{2})(?!\d)", 1),
        (r"(?<!\d)20\d{2}(\d{2})(?!\d)", 1),
        (r"(?<!\d)(\d{2})\d{2}(?!\d)", 1),
    ):
        for part in below:
            match = re.search(pattern, part)
            if match and 1 <= int(match.group(group)) <= 12:
                return match.group(group)
    raise DumpError(file.name, None, "cannot tell the snapshot's month from its folders")


def classify(files: list[PublishedFile]) -> Release:
    release = Release()
    for file in files:
        name = file.path.name
        if match := _DIFFSET.match(name):
            release.diffsets.setdefault(match.group(1), {})[match.group(2)] = file
        elif match := _PROBES.match(name):
            pair = match.group(1) + match.group(2)
            release.probes.setdefault(pair, {})[match.group(3)] = file
        elif _PART.match(name) and "Wikipedia_Full" in file.path.parts:
            release.full.setdefault(full_month(file), []).append(file)
    for parts in release.full.values():
        parts.sort(key=lambda f: f.path)
    return release


# --- datasets -----------------------------------------------------------------------------


def csv_texts(file: PublishedFile) -> Iterator[str]:
    """The ``text`` column of a CSV; a malformed row raises :class:`DumpError`."""
    with file.open_text() as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or "text" not in header:
            raise DumpError(file.name, "line 1", f"no 'text' column in header {header}")
        column = header.index("text")
        for fields in reader:
            if not fields:
                continue
            if len(fields) != len(header):
                raise DumpError(
                    file.name,
                    f"line {reader.line_num}",
                    f"{len(fields)} fields, header has {len(header)}",
                )
            if fields[column]:
                yield fields[column]


def texts_dataset_fn(files: list[PublishedFile]) -> Callable[..., tf.data.Dataset]:
    """A seqio ``dataset_fn`` reading the ``text`` of ``files`` (file order shuffled)."""

    def generate(index: np.int64) -> Iterator[dict[str, str]]:
        for text in csv_texts(files[int(index)]):
            yield {"text": text}

    def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
        del split
        order = tf.data.Dataset.range(len(files))
        if shuffle_files:
            order = order.shuffle(len(files), seed=seed)
        signature = {"text": tf.TensorSpec([], tf.string)}
        return order.interleave(
            lambda i: tf.data.Dataset.from_generator(
                generate, args=(i,), output_signature=signature
            ),
            cycle_length=min(4, len(files)),
        )

    return dataset_fn


def _probe_loader(file: PublishedFile) -> Callable[[], list[dict[str, str]]]:
    def load() -> list[dict[str, str]]:
        with file.open_text() as handle:
            return read_probe_rows(handle, file.name)

    return load


def _initial_month(pairs: list[str], month: str) -> str:
    ending_in = {p[2:]: p for p in sorted(pairs)}
    seen = {month}
    while month in ending_in and ending_in[month][:2] not in seen:
        month = ending_in[month][:2]
        seen.add(month)
    return month


def register_release(
    registrar: Registrar, root: str | os.PathLike[str], vocabularies: Mapping[str, seqio.Vocabulary]
) -> list[str]:
    """Registers the tasks a release supports (see the module docstring); returns their names."""
    release = classify(index_files(root))
    gpt2 = vocabularies["gpt2"]
    for pair, versions in sorted(release.diffsets.items()):
        file = versions.get("gpt2") or versions["subset"]
        source = seqio.FunctionDataSource(texts_dataset_fn([file]), splits=CORPUS_SPLITS)
        register_lm_task(registrar, f"twiki_diffset_{pair}_lm", source, gpt2)
    for month, parts in sorted(release.full.items()):
        source = seqio.FunctionDataSource(texts_dataset_fn(parts), splits=CORPUS_SPLITS)
        register_lm_task(registrar, f"twiki_full_{month}_lm", source, gpt2)
    for pair, categories in sorted(release.probes.items()):
        for category, file in sorted(categories.items()):
            register_row_tasks(
                registrar,
                f"twiki_probes_{pair}_{category}",
                _probe_loader(file),
                vocabularies,
                PROBE_SPLITS,
            )
    for pair in sorted(release.diffsets):
        initial = _initial_month(list(release.diffsets), pair[:2])
        if initial in release.full:
            registrar.mixture(
                MixReviewMixture(
                    f"twiki_mixreview_{pair}_lm",
                    f"twiki_diffset_{pair}_lm",
                    f"twiki_full_{initial}_lm",
                )
            )
    return list(registrar.names)
