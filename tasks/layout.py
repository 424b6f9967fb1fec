"""Where the tasks find their data: the folders the CLIs write, discovered by name.

``DATA_DIR`` (argument, gin binding of ``register_all.data_dir``, or ``TW_JAX_DATA_DIR``) holds:

- ``<period>/`` for every period (:class:`tw_jax.time.Period`: ``2024-12_2025-01``, or in the
  2021 layout ``0809``), with ``diffset/`` (``tw-jax diffset``: ``diffset.*``, ``full.*`` = the
  NEW snapshot, ``unchanged.*`` = the NON-DiffSet), ``probes/`` (``tw-jax probes``) and
  ``ssm/`` (``tw-jax ssm``: ``diffset.*`` and ``full.*`` with salient spans masked).
- ``<snapshot>/`` for a snapshot that no period ends at (the INITIAL snapshot: ``2024-12``, or
  ``08``), with ``full/`` (``full.jsonl`` + ``full.tfrecord-*``, fields id, title, text) and
  ``ssm/full.*``.

A folder is found by its name in the form :mod:`tw_jax.time` writes (``Period.name``,
``Snapshot.name``); other folders (``vocab/``, ``seqio_cache/``) are not periods. One period in
two spellings (``0809/`` and ``2021-08_2021-09/``) is an error naming both. The full snapshot
of a snapshot S is ``<S>/full/full.*`` when that folder exists, else ``<P>/diffset/full.*`` of
the earliest period P that ends at S (its SSM version likewise ``<S>/ssm/full.*``, else
``<P>/ssm/full.*``). A task is registered when the stage folder it reads exists. Discovery
goes through :mod:`tw_jax.io.paths`, so a ``gs://`` data folder works as a local one (on any
GCS endpoint, an emulator included), and the file patterns handed to seqio are the URLs
themselves (``gs://bucket/data/0809/ssm/diffset.tfrecord-*-of-*``), which tf.data reads.

The initial snapshot of a period (what Mix-Review replays) is found by walking back along the
periods by date: ``1011`` → ``0910`` → ``0809`` → ``08``, the first snapshot no period ends at.
"""

from __future__ import annotations

import dataclasses
import os
import re

from tw_jax.io import paths
from tw_jax.preprocess.runners.accounting import STATS_FILE
from tw_jax.time import Period, Snapshot, period_named, snapshot_named

DATA_DIR_ENV = "TW_JAX_DATA_DIR"
T5_VOCAB_ENV = "TW_JAX_T5_VOCAB"
GPT2_VOCAB_ENV = "TW_JAX_GPT2_VOCAB"

_CONTEXTS = re.compile(r"^probes_([a-z0-9]+)$")


def join(*parts: str) -> str:
    """Joins a data folder (a local path or a ``gs://`` URL) and names below it."""
    return paths.join(*parts)


def shards(folder: str, name: str) -> str:
    """The file pattern of a stage's TFRecord shards (``name.tfrecord-?????-of-?????``)."""
    return join(folder, f"{name}.tfrecord-*-of-*")


class LayoutError(ValueError):
    """A data folder whose folders cannot be told apart (one period in two spellings)."""


# The period or snapshot a data folder's child holds, from its name (None: it holds none).
period_folder = period_named
snapshot_folder = snapshot_named


@dataclasses.dataclass(frozen=True)
class Pair:
    """One period's folder, e.g. ``DATA_DIR/0809`` or ``DATA_DIR/2024-12_2025-01``."""

    period: Period
    folder: str

    @property
    def name(self) -> str:
        return self.period.name

    @property
    def diffset(self) -> str:
        return join(self.folder, "diffset")

    @property
    def probes(self) -> str:
        return join(self.folder, "probes")

    @property
    def ssm(self) -> str:
        return join(self.folder, "ssm")

    def context_folders(self) -> dict[str, str]:
        """``{retriever: folder}`` of the finished open-book probe folders
        ``probes_<retriever>/`` (``tw-jax probe-contexts``: the probe CSVs with the passages
        retrieved for each row; finished when its ``stats.json`` exists)."""
        found = {}
        for name in sorted(n.rstrip("/") for n in paths.listdir(self.folder)):
            match = _CONTEXTS.match(name)
            folder = join(self.folder, name)
            if match and paths.isfile(join(folder, STATS_FILE)):
                found[match.group(1)] = folder
        return found


@dataclasses.dataclass(frozen=True)
class SnapshotFiles:
    """Where the full snapshot of one snapshot lives (``None``: that form is absent);
    ``snapshot`` is spelled as its folder (or the period that ends at it) spells it."""

    snapshot: Snapshot
    text_pattern: str | None
    ssm_pattern: str | None


class Folders:
    """Which folders exist. Locally each is asked about; in a bucket each parent is listed once
    and its children read from the listing (one request per parent, not one per folder asked
    about: every host of a job registers the tasks at import)."""

    def __init__(self) -> None:
        self._listings: dict[str, frozenset[str]] = {}

    def isdir(self, folder: str) -> bool:
        if not paths.is_url(folder):
            return os.path.isdir(folder)
        parent, name = folder.rstrip("/").rsplit("/", 1)
        if parent not in self._listings:
            found = paths.listdir(parent) if paths.isdir(parent) else []
            self._listings[parent] = frozenset(n.rstrip("/") for n in found)
        return name in self._listings[parent]


@dataclasses.dataclass(frozen=True)
class Layout:
    data_dir: str
    pairs: dict[Period, Pair]
    snapshots: dict[Snapshot, SnapshotFiles]
    folders: Folders = dataclasses.field(default_factory=Folders, compare=False, repr=False)

    def initial_snapshot(self, pair: Pair) -> Snapshot:
        """The first snapshot of the chain of periods that ``pair`` belongs to (periods run
        forward, so the walk back ends)."""
        ending_in: dict[Snapshot, Pair] = {}
        for found in sorted(self.pairs.values(), key=lambda p: p.period):
            ending_in.setdefault(found.period.new, found)
        snapshot = pair.period.old
        while snapshot in ending_in:
            snapshot = ending_in[snapshot].period.old
        return snapshot

    def pair(self, period: Period) -> Pair | None:
        """The folder of ``period`` in whichever spelling it was found (``0809`` for
        ``2021-08_2021-09``)."""
        return self.pairs.get(period)

    def has(self, folder: str) -> bool:
        return self.folders.isdir(folder)


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> str | None:
    """The argument, else ``$TW_JAX_DATA_DIR``, else ``None``; a URL stays a URL (a trailing
    ``/`` dropped, so the patterns built from it have no ``//``)."""
    found = os.fspath(data_dir) if data_dir is not None else os.environ.get(DATA_DIR_ENV)
    if not found:
        return None
    return paths.resolve(found) if paths.is_url(found) else found


def discover(data_dir: str | os.PathLike[str]) -> Layout:
    """The periods and snapshots present under ``data_dir`` (empty when the folder is missing)."""
    data_dir = os.fspath(data_dir)
    folders = Folders()
    names = sorted(n.rstrip("/") for n in paths.listdir(data_dir)) if paths.isdir(data_dir) else []
    pairs: dict[Period, Pair] = {}
    own: dict[Snapshot, tuple[Snapshot, str]] = {}
    for name in names:
        folder = join(data_dir, name)
        period, snapshot = period_folder(name), snapshot_folder(name)
        if period is not None and folders.isdir(folder):
            if period in pairs:
                raise LayoutError(f"{data_dir}: {pairs[period].name}/ and {name}/ are one "
                                  f"period ({period.dated().label}); keep one of them")
            pairs[period] = Pair(period, folder)
        elif snapshot is not None and folders.isdir(folder):
            if snapshot in own:
                raise LayoutError(f"{data_dir}: {own[snapshot][0].name}/ and {name}/ are one "
                                  f"snapshot ({snapshot.iso}); keep one of them")
            own[snapshot] = (snapshot, folder)
    by_new: dict[Snapshot, Pair] = {}
    for pair in sorted(pairs.values(), key=lambda p: p.period):
        by_new.setdefault(pair.period.new, pair)  # the earliest period ending there wins
    snapshots = {}
    for snapshot in sorted(set(by_new) | set(own)):
        pair = by_new.get(snapshot)
        spelled, folder = own.get(snapshot, (pair.period.new if pair else snapshot, None))
        text = _first_present(folders, (join(folder, "full"), "full") if folder else None,
                              (pair.diffset, "full") if pair else None)
        ssm = _first_present(folders, (join(folder, "ssm"), "full") if folder else None,
                             (pair.ssm, "full") if pair else None)
        if text or ssm:
            snapshots[snapshot] = SnapshotFiles(spelled, text, ssm)
    return Layout(data_dir, pairs, snapshots, folders)


def _first_present(folders: Folders, *candidates: tuple[str, str] | None) -> str | None:
    for candidate in candidates:
        if candidate and folders.isdir(candidate[0]):
            return shards(*candidate)
    return None


def spelled(data_dir: str | os.PathLike[str], period: Period) -> Period:
    """``period`` as ``data_dir`` spells its folder (``2021-08_2021-09`` → ``0809`` in a folder of
    the 2021 layout), so its folders and task names are the data's; ``period`` itself when the
    folder has none."""
    found = discover(data_dir).pair(period)
    return found.period if found is not None else period
