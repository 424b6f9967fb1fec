"""What a prepared TFDS dataset was made from, recorded with it and checked before it is reused.

Every dataset a tw_jax builder prepares holds ``tw_jax_fingerprint.json`` beside its
``dataset_info.json`` (``TFDS/temporal_wiki/0809_probes/1.1.0/``), written into TFDS's
temporary folder before it is renamed, so a dataset never appears without one: the size and
SHA-256 of every file the config reads (the shards, CSVs, JSON lines or release zips the builder's
:meth:`~tw_jax.datasets.base.Builder.source_files` names; relative to ``--manual_dir``, so a data
folder moved whole keeps its datasets), hashed before the builder reads them, and the builder's
settings (dataset, version, the config's fields, ``--max_examples_per_split``). The record's file
name and the hashing (streamed, sizes compared first, each file hashed once per process) are the
SeqIO cache's (:mod:`tw_jax.tasks.cache`, :mod:`tw_jax.io.manifest`).

``tfds build`` (``download_and_prepare``) of a dataset that is already prepared compares the
record with the files of now, whatever their modification times (``cp -p``, ``tar``,
``rsync -a`` keep old ones): a file changed, resized, added or gone, or another setting, is one
:class:`StaleDatasetError` line naming it and the ``tfds build ... --overwrite`` that rebuilds
it (TFDS itself said "Reusing dataset" and the tasks read the old rows); ``--overwrite`` rebuilds
as TFDS always does. The build command never deletes a prepared dataset by itself: a running
job may be reading it. Reading a dataset through the builder (``tfds.load``,
``builder.as_dataset``) checks the files the record names where they still are, under the
recorded folder (a dataset read on a machine without its sources, or whose sources were
removed after the build, reads as it is). A dataset prepared before these records has no file to
compare: ``tfds build`` refuses it when a source is newer than its ``dataset_info.json`` and
otherwise reuses it with one warning that its content is not checked, as the SeqIO cache does
with a cache that predates its fingerprint; a read warns once.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow_datasets as tfds

from tw_jax.errors import UsageError
from tw_jax.io import manifest, paths
from tw_jax.preprocess.dumps.released import PublishedFile
from tw_jax.tasks.cache import FINGERPRINT, read_fingerprint, write_fingerprint

if TYPE_CHECKING:
    from tw_jax.datasets.base import Builder

FORMAT = 1
INFO = "dataset_info.json"
SINCE = "prepared"  # "... does not match its checksum (its bytes changed after it was prepared)"
SHOWN = 3  # changes named in the line; "and N more" after them
_BASE_FIELDS = {f.name for f in dataclasses.fields(tfds.core.BuilderConfig)}  # TFDS's, not ours

log = logging.getLogger(__name__)


class StaleDatasetError(UsageError):
    """A prepared TFDS dataset was made from other files or settings than those of now."""


# --- the record ------------------------------------------------------------------------------


def source_root(manual_dir: str | os.PathLike[str]) -> str:
    """The folder the sources are recorded relative to: ``--manual_dir`` (absolute when local;
    its folder when it is a zip)."""
    root = os.fspath(manual_dir)
    if not paths.is_url(root):
        root = os.path.abspath(root)
    root = root.rstrip("/") or "/"
    return paths.parent(root) if paths.isfile(root) else root


def physical_files(files: Iterable[str | os.PathLike[str] | PublishedFile]) -> list[str]:
    """The files on disk (or in a bucket) that ``files`` are read from: a zip for its members."""
    found = set()
    for file in files:
        if isinstance(file, PublishedFile):
            found.add(file.archive or file.location)
        else:
            found.add(os.fspath(file))
    return sorted(found)


def relative(files: Iterable[str], root: str) -> list[str]:
    """``files`` relative to ``root`` (``/``-separated); one outside it stays as it is."""
    prefix = root.rstrip("/") + "/"
    return sorted(f[len(prefix):] if f.startswith(prefix) else f for f in files)


def settings(builder: Builder, max_examples_per_split: int | None = None) -> dict[str, Any]:
    """The builder's settings that decide what its dataset holds: the dataset, its version, the
    config's own fields and TFDS's ``--max_examples_per_split``."""
    config = builder.builder_config
    own = {f.name for f in dataclasses.fields(config)} - _BASE_FIELDS
    return {"dataset": f"{builder.name}/{config.name}", "version": str(builder.version),
            "config": {name: _plain(getattr(config, name)) for name in sorted(own)},
            "max_examples_per_split": max_examples_per_split}


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def record(builder: Builder, manual_dir: str | os.PathLike[str],
           max_examples_per_split: int | None = None) -> dict[str, Any]:
    """What ``builder``'s dataset is made from, now: its settings and its source files' sizes
    and SHA-256 (:func:`tw_jax.io.manifest.record_files`), relative to ``manual_dir``."""
    root = source_root(manual_dir)
    files = builder.source_files(root)
    return {"format": FORMAT, "settings": settings(builder, max_examples_per_split),
            "sources": {"root": root, "files": manifest.record_files(files, root)}}


def write(folder: str, made: Mapping[str, Any]) -> None:
    """Records ``made`` in the dataset folder ``folder`` (atomically)."""
    write_fingerprint(folder, made)


# --- comparing it ----------------------------------------------------------------------------


def changes(recorded: Mapping[str, Any], root: str, present: Sequence[str] | None,
            now: Mapping[str, Any] | None = None) -> list[str]:
    """What differs between the record and the files (and settings ``now``) of now, in words:
    settings first, then files, sizes compared before any file is hashed. ``present``: the
    files the config reads now (relative to ``root``; a new or a gone one is a change); None:
    only the recorded files that are still there are compared (a read: sources removed after
    the build, or a dataset read away from them, are no change)."""
    if recorded.get("format") != FORMAT:
        return [f"its {FINGERPRINT} is of another format"]
    found: list[str] = []
    if now is not None:
        found += _setting_changes(recorded.get("settings") or {}, now)
    files = dict((recorded.get("sources") or {}).get("files") or {})
    if present is None:
        files = {name: entry for name, entry in files.items()
                 if paths.exists(paths.join(root, name))}
        present = list(files)
    found += [f"{paths.join(root, name)} {why}"
              for name, why in manifest.differences(root, files, present, since=SINCE)]
    return found


def _setting_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    found = []
    for key in ("dataset", "version", "max_examples_per_split"):
        if old.get(key) != new.get(key):
            found.append(f"its {key} {old.get(key)!r} → {new.get(key)!r}")
    before, after = old.get("config") or {}, new.get("config") or {}
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            found.append(f"its config's {key} {before.get(key)!r} → {after.get(key)!r}")
    return found


def build_command(dataset: str, manual_dir: str | None, data_dir: str, *,
                  overwrite: bool = True) -> str:
    """The ``tfds build`` that (re)prepares ``dataset`` (``temporal_wiki/0809_probes``) from
    ``manual_dir`` into the TFDS folder ``data_dir`` (docs/tfds.md)."""
    flag = " --overwrite" if overwrite else ""
    return (f"tfds build --imports tw_jax.datasets {dataset} --manual_dir {manual_dir or 'DIR'} "
            f"--data_dir {data_dir}{flag}")


def _identity(folder: str) -> tuple[str, str, str]:
    """``(dataset, version, TFDS folder)`` of a prepared dataset's folder
    (``TFDS/<name>/<config>/<version>``)."""
    config = paths.parent(folder)
    name = paths.parent(config)
    return (f"{_base(name)}/{_base(config)}", _base(folder), paths.parent(name))


def _base(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _first(found: Sequence[str]) -> str:
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return ", ".join(found[:SHOWN]) + more


def _stale(folder: str, found: Sequence[str], manual_dir: str | None) -> StaleDatasetError:
    dataset, version, data_dir = _identity(folder)
    return StaleDatasetError(
        f"{folder}: {dataset}:{version} was prepared from other data or settings "
        f"({_first(found)}); rebuild it with `{build_command(dataset, manual_dir, data_dir)}`")


def check_reuse(builder: Builder, download_config: tfds.download.DownloadConfig) -> None:
    """Before ``tfds build`` reuses ``builder``'s prepared dataset: it was made from the files
    of ``--manual_dir`` and the settings of now; else a :class:`StaleDatasetError` line. Without
    ``--manual_dir`` (``tfds.load``) the files the record names are compared where they were
    (:func:`check_folder`)."""
    folder = os.fspath(builder.data_dir)
    manual = download_config.manual_dir
    if manual is None:
        check_folder(folder)
        return
    recorded = read_fingerprint(folder)
    root = source_root(manual)
    present: list[str] | None
    try:
        present = relative(builder.source_files(root), root)
    except (OSError, ValueError):  # the sources are gone: the dataset stays as it was made
        present = None
    if recorded is None:
        _check_dates(folder, root, present)
        return
    now = settings(builder, download_config.max_examples_per_split)
    found = changes(recorded, root, present, now)
    if found:
        raise _stale(folder, found, root)


_warned: set[str] = set()  # datasets without a record, warned about once per process


def check_folder(folder: str) -> None:
    """Before the prepared dataset in ``folder`` (``TFDS/<name>/<config>/<version>``) is read:
    the files its record names that are still under the recorded folder are those it was made
    from; else a :class:`StaleDatasetError` line. Needs only the folder, not the builder, so a
    reader that goes through TFDS's read-only builder (``name:1.*.*``, as the tasks' TFDS
    sources do) can call it too. A dataset without a record warns once; a folder not prepared
    is left to TFDS."""
    folder = os.fspath(folder)
    if not paths.exists(paths.join(folder, INFO)):
        return
    recorded = read_fingerprint(folder)
    if recorded is None:
        _warn_unchecked(folder, None, "its sources are not checked")
        return
    root = str((recorded.get("sources") or {}).get("root") or "")
    if recorded.get("format") == FORMAT and (not root or not paths.isdir(root)):
        return  # read away from its sources
    found = changes(recorded, root, None)
    if found:
        raise _stale(folder, found, root)


def _check_dates(folder: str, root: str, present: Sequence[str] | None) -> None:
    """A dataset prepared before its record: refused when a source is newer than its
    ``dataset_info.json``, else reused with one warning that its content is not checked."""
    info = paths.join(folder, INFO)
    if present and paths.exists(info):
        made = _mtime(info)
        newest = max((_mtime(paths.join(root, name)), name) for name in present)
        if newest[0] > made:
            dataset, version, data_dir = _identity(folder)
            raise StaleDatasetError(
                f"{folder}: {dataset}:{version} was prepared before tw_jax recorded what a "
                f"dataset is made from (no {FINGERPRINT}), and {paths.join(root, newest[1])} "
                f"is newer than it; rebuild it with `{build_command(dataset, root, data_dir)}`")
    _warn_unchecked(folder, root, "its sources are checked by modification time only, "
                                  "not by content")


def _warn_unchecked(folder: str, root: str | None, what: str) -> None:
    if folder in _warned:
        return
    _warned.add(folder)
    dataset, _, data_dir = _identity(folder)
    log.warning("%s: no %s (prepared before tw_jax recorded what a dataset is made from): %s; "
                "`%s` rebuilds it with one", folder, FINGERPRINT, what,
                build_command(dataset, root, data_dir))


def _mtime(path: str) -> int:
    import tensorflow as tf

    return int(tf.io.gfile.stat(path).mtime_nsec)


__all__ = ["FINGERPRINT", "StaleDatasetError", "build_command", "changes", "check_folder",
           "check_reuse", "physical_files", "record", "settings", "source_root", "write"]
