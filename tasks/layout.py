"""Where the tasks find their data: the folders the CLIs write, discovered by name.

``DATA_DIR`` (argument, gin binding of ``register_all.data_dir``, or ``TW_JAX_DATA_DIR``) holds:

- ``<MMMM>/`` for every month pair (old month MM, new month MM, e.g. ``0809``), with
  ``diffset/`` (``tw-jax diffset``: ``diffset.*``, ``full.*`` = the NEW month's snapshot,
  ``unchanged.*`` = the NON-DiffSet), ``probes/`` (``tw-jax probes``) and ``ssm/``
  (``tw-jax ssm``: ``diffset.*`` and ``full.*`` with salient spans masked).
- ``<MM>/`` for a month that no pair ends in (the INITIAL snapshot, e.g. ``08``), with
  ``full/`` (``full.jsonl`` + ``full.tfrecord-*``, fields id, title, text) and ``ssm/full.*``.

The full snapshot of month MM is therefore ``<MM>/full/full.*`` when that folder exists, else
``<PPMM>/diffset/full.*`` of the pair whose NEW month is MM (its SSM version likewise
``<MM>/ssm/full.*``, else ``<PPMM>/ssm/full.*``). Months are discovered from the folders present;
a task is registered when the stage folder it reads exists. Discovery goes through
:mod:`tw_jax.io.paths`, so a ``gs://`` data folder works as a local one (on any GCS endpoint,
an emulator included), and the file patterns handed to seqio are the URLs themselves
(``gs://bucket/data/0809/ssm/diffset.tfrecord-*-of-*``), which tf.data reads.

The initial snapshot of a pair (what Mix-Review replays) is found by walking back along the
pairs: ``1011`` → ``0910`` → ``0809`` → ``08``, the first month no pair ends in.
"""

from __future__ import annotations

import dataclasses
import os
import re

from tw_jax.io import paths
from tw_jax.preprocess.runners.accounting import STATS_FILE

DATA_DIR_ENV = "TW_JAX_DATA_DIR"
T5_VOCAB_ENV = "TW_JAX_T5_VOCAB"
GPT2_VOCAB_ENV = "TW_JAX_GPT2_VOCAB"

_PAIR = re.compile(r"^(\d{2})(\d{2})$")
_MONTH = re.compile(r"^\d{2}$")
_CONTEXTS = re.compile(r"^probes_([a-z0-9]+)$")


def join(*parts: str) -> str:
    """Joins a data folder (a local path or a ``gs://`` URL) and names below it."""
    return paths.join(*parts)


def shards(folder: str, name: str) -> str:
    """The file pattern of a stage's TFRecord shards (``name.tfrecord-?????-of-?????``)."""
    return join(folder, f"{name}.tfrecord-*-of-*")


@dataclasses.dataclass(frozen=True)
class Pair:
    """One month pair folder, e.g. ``DATA_DIR/0809``."""

    name: str
    old: str
    new: str
    folder: str

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
class Snapshot:
    """Where the full snapshot of one month lives (``None``: that form is absent)."""

    month: str
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
    pairs: dict[str, Pair]
    snapshots: dict[str, Snapshot]
    folders: Folders = dataclasses.field(default_factory=Folders, compare=False, repr=False)

    def initial_month(self, pair: Pair) -> str:
        """The first month of the chain of pairs that ``pair`` belongs to."""
        ending_in = {p.new: p for p in self.pairs.values()}
        month, seen = pair.old, {pair.old}
        while month in ending_in:
            month = ending_in[month].old
            if month in seen:  # a cycle of pairs (12→01 … →12): no first month
                break
            seen.add(month)
        return month

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
    """The pairs and snapshots present under ``data_dir`` (empty when the folder is missing)."""
    data_dir = os.fspath(data_dir)
    folders = Folders()
    names = sorted(n.rstrip("/") for n in paths.listdir(data_dir)) if paths.isdir(data_dir) else []
    pairs: dict[str, Pair] = {}
    for name in names:
        match = _PAIR.match(name)
        folder = join(data_dir, name)
        if match and folders.isdir(folder):
            pairs[name] = Pair(name, match.group(1), match.group(2), folder)
    by_new: dict[str, Pair] = {}
    for pair in pairs.values():
        by_new.setdefault(pair.new, pair)  # sorted: the earliest pair ending in a month wins
    months = set(by_new) | {n for n in names if _MONTH.match(n)}
    snapshots = {}
    for month in sorted(months):
        own = join(data_dir, month)
        pair = by_new.get(month)
        text = _first_present(folders, (join(own, "full"), "full"),
                              (pair.diffset, "full") if pair else None)
        ssm = _first_present(folders, (join(own, "ssm"), "full"),
                             (pair.ssm, "full") if pair else None)
        if text or ssm:
            snapshots[month] = Snapshot(month, text, ssm)
    return Layout(data_dir, pairs, snapshots, folders)


def _first_present(folders: Folders, *candidates: tuple[str, str] | None) -> str | None:
    for candidate in candidates:
        if candidate and folders.isdir(candidate[0]):
            return shards(*candidate)
    return None
