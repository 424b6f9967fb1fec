"""An evaluator's examples as numpy batches, read from tf.data once and kept for every checkpoint.

``seqio.Evaluator`` hands :mod:`tw_jax.evaluate.seqio_eval`'s model functions its enumerated,
cached model-feature datasets, one call per task and model function. Iterating them costs
Python and tf.data work per example, every call: at a month's 13,000 probes a good share of an
evaluation. So the probe mixtures' evaluators (:class:`tw_jax.evaluate.mixture_eval.
MixtureEvaluators`) :func:`register` their datasets here, and the first call on any of them
reads all of them once into a :class:`RowTable`:

- the *distinct* rows of the evaluator's tasks (a mixture's CHANGED task holds UPDATED's and
  NEW's rows again): each row is computed once per checkpoint and model function, by the first
  task (in the evaluator's order) that holds it, and read by the others;
- each task's own rows sorted by length and cut into batches of ``batch_size`` rows, padded and
  trimmed as before (:func:`~tw_jax.evaluate.seqio_eval.trim_padding`), so a batch runs at its
  rows' bucketed length rather than at the longest of a random 32.

A batch depends only on the data and the batch size, never on which task asks first, so an
example's numbers are the same whichever way they are reached. The table lives as long as the
registration: the datasets are held weakly, and :func:`unregister` drops them with their
evaluator (a new data fingerprint or model family builds a new evaluator, whose rows are read
anew). A dataset nobody registered (any other ``seqio.Evaluator``) is read per call into a
table of its own, never kept.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

# feature group -> the mask that marks its real positions (right-padded); the encoder first:
# rows are sorted by encoder length, then decoder length
GROUP_MASKS: dict[str, str] = {"encoder_": "encoder_mask", "decoder_": "decoder_mask"}
READ_BATCH = 1024

BatchFn = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


@dataclass(frozen=True)
class Batch:
    """Table rows ``rows`` as one model batch: ``features`` padded to the batch size with zero
    rows (its first ``len(rows)`` rows are real)."""

    rows: np.ndarray
    features: dict[str, np.ndarray]


@dataclass
class RowTable:
    """The distinct rows of one or more enumerated model-feature datasets (an evaluator's tasks,
    in its order): ``features`` ``(rows, ...)``, ``owner`` the first dataset holding each row,
    ``lengths`` each row's real length per feature group (for sorting)."""

    features: dict[str, np.ndarray]
    owner: np.ndarray
    lengths: np.ndarray
    _batches: dict[tuple[int, int], list[Batch]] = field(default_factory=dict)

    def batches(self, owner: int, batch_size: int, shape: BatchFn) -> list[Batch]:
        """The rows ``owner`` computes, shortest first, in batches of ``batch_size`` rows shaped
        by ``shape`` (padding and trimming); built once per (owner, batch size)."""
        key = (owner, batch_size)
        if key not in self._batches:
            mine = np.flatnonzero(self.owner == owner)
            if self.lengths.shape[1]:  # np.lexsort sorts by its last key first
                keys = self.lengths[mine]
                mine = mine[np.lexsort(keys.T[::-1])]
            self._batches[key] = [
                Batch(chunk, dict(shape({k: v[chunk] for k, v in self.features.items()})))
                for chunk in (mine[i : i + batch_size] for i in range(0, len(mine), batch_size))]
        return self._batches[key]


@dataclass(frozen=True)
class DatasetRows:
    """One dataset's examples in a :class:`RowTable`: seqio's ``indices`` and each example's
    table ``rows``, in dataset order; ``position`` is the dataset's owner number."""

    table: RowTable
    position: int
    indices: np.ndarray
    rows: np.ndarray


def read_dataset(dataset: tf.data.Dataset) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(indices, features)`` of an enumerated model-feature dataset, every example stacked."""
    indices: list[np.ndarray] = []
    parts: dict[str, list[np.ndarray]] = {}
    for index, features in dataset.batch(READ_BATCH).as_numpy_iterator():
        indices.append(np.asarray(index))
        for key, value in features.items():
            parts.setdefault(key, []).append(np.asarray(value))
    if not indices:
        return np.zeros(0, np.int64), {}
    return np.concatenate(indices), {k: np.concatenate(v) for k, v in parts.items()}


def _lengths(features: Mapping[str, np.ndarray]) -> np.ndarray:
    """``(rows, groups)``: each row's real positions per feature group with a 2-D mask."""
    columns = []
    for mask_key in GROUP_MASKS.values():
        mask = features.get(mask_key)
        if mask is None or mask.ndim != 2:
            continue
        used = mask != 0
        # one past the last real position (0 for an empty row)
        last = mask.shape[1] - np.argmax(used[:, ::-1], axis=1)
        columns.append(np.where(used.any(axis=1), last, 0))
    rows = len(next(iter(features.values()))) if features else 0
    return np.stack(columns, axis=1) if columns else np.zeros((rows, 0), np.int64)


def _row_keys(features: Mapping[str, np.ndarray]) -> list[bytes]:
    """A row's bytes over every feature (the same row in two tasks has the same key)."""
    names = sorted(features)
    if not names:
        return []
    rows = len(features[names[0]])
    flat = np.concatenate([np.ascontiguousarray(features[k]).reshape(rows, -1).view(np.uint8)
                           for k in names], axis=1)
    return [row.tobytes() for row in flat]


def build_table(datasets: Sequence[tf.data.Dataset]) -> list[DatasetRows]:
    """Every dataset read into one :class:`RowTable` of their distinct rows (datasets whose
    features differ in names, shapes or dtypes are never merged: each gets a table of its own)."""
    read = [read_dataset(d) for d in datasets]
    out: list[DatasetRows | None] = [None] * len(read)
    groups: dict[Any, list[int]] = {}
    for position, (_, features) in enumerate(read):
        layout = tuple(sorted((k, v.shape[1:], v.dtype.str) for k, v in features.items()))
        groups.setdefault(layout, []).append(position)
    for positions in groups.values():
        first: dict[bytes, int] = {}
        owners: list[int] = []
        taken: dict[int, list[int]] = {}  # dataset -> its examples that are new table rows
        row_ids: dict[int, np.ndarray] = {}
        for position in positions:
            ids = np.zeros(len(read[position][0]), np.int64)
            mine = taken.setdefault(position, [])
            for example, key in enumerate(_row_keys(read[position][1])):
                if key not in first:
                    first[key] = len(owners)
                    owners.append(position)
                    mine.append(example)
                ids[example] = first[key]
            row_ids[position] = ids
        names = read[positions[0]][1].keys()
        features = {name: np.concatenate([read[p][1][name][taken[p]] for p in positions])
                    for name in names}
        table = RowTable(features, np.asarray(owners, np.int64), _lengths(features))
        for position in positions:
            out[position] = DatasetRows(table, position, read[position][0], row_ids[position])
    return [rows for rows in out if rows is not None]


class _Group:
    """Registered datasets (held weakly: they live as long as their evaluator), read together
    on first use."""

    def __init__(self, datasets: Sequence[tf.data.Dataset]) -> None:
        self._refs = [weakref.ref(d) for d in datasets]
        self._rows: list[DatasetRows] | None = None

    def position(self, dataset: tf.data.Dataset) -> int | None:
        return next((i for i, ref in enumerate(self._refs) if ref() is dataset), None)

    def rows(self, position: int) -> DatasetRows | None:
        if self._rows is None:
            datasets = [ref() for ref in self._refs]
            if any(d is None for d in datasets):  # part of the evaluator is gone
                return None
            self._rows = build_table(datasets)
        return self._rows[position]


# id(dataset) -> its group, while the dataset lives (a finalizer drops it)
_REGISTERED: dict[int, _Group] = {}


def _forget(key: int, group: _Group) -> None:
    if _REGISTERED.get(key) is group:
        del _REGISTERED[key]


def register(datasets: Iterable[tf.data.Dataset]) -> None:
    """Keep the rows of ``datasets`` (one evaluator's, whose contents never change) once read,
    for as long as the datasets live or until :func:`unregister`."""
    chosen = list(datasets)
    group = _Group(chosen)
    for dataset in chosen:
        _REGISTERED[id(dataset)] = group
        weakref.finalize(dataset, _forget, id(dataset), group)


def unregister(datasets: Iterable[tf.data.Dataset]) -> None:
    """Forget ``datasets`` and their rows (their evaluator is dropped)."""
    for dataset in datasets:
        group = _REGISTERED.get(id(dataset))
        if group is not None and group.position(dataset) is not None:
            del _REGISTERED[id(dataset)]


def _kept(dataset: tf.data.Dataset) -> tuple[_Group, int] | None:
    group = _REGISTERED.get(id(dataset))
    position = group.position(dataset) if group is not None else None
    return (group, position) if group is not None and position is not None else None


def dataset_rows(dataset: tf.data.Dataset) -> DatasetRows:
    """``dataset``'s rows: from its registered table (read on first use), else read now."""
    kept = _kept(dataset)
    rows = kept[0].rows(kept[1]) if kept is not None else None
    return rows if rows is not None else build_table([dataset])[0]


def registered(dataset: tf.data.Dataset) -> bool:
    """Whether ``dataset``'s rows are kept (:func:`register`)."""
    return _kept(dataset) is not None
