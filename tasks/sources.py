"""Data sources of the tasks: the stages' TFRecord shards and the probes' CSV files.

TFRecords go through ``seqio.TFExampleDataSource`` (file-level sharding and shuffling for
free); a pattern that matches nothing fails with the stage to run, not seqio's bare "No file
is found". Probe CSVs are small (thousands of rows) and are read whole, row by row, so a bad
row fails with its file and line, before any tensor exists
(:mod:`tw_jax.preprocess.probes.probe_csv`, local or ``gs://``).

:func:`use_tfds` switches the sources of a data folder's tasks to the ``temporal_wiki`` TFDS
datasets prepared from it (:func:`stage_source`, :func:`probe_rows`): the same examples in the
same order, read as ``seqio.TfdsDataSource`` (docs/tfds.md).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import seqio
import tensorflow as tf
import tensorflow_datasets as tfds

from tw_jax.preprocess.probes.probe_csv import PROBE_FIELDS, read_stage_probes
from tw_jax.preprocess.runners.whole import check_shard_set
from tw_jax.tasks import names
from tw_jax.tasks.layout import period_folder, snapshot_folder


class TFRecordSource(seqio.TFExampleDataSource):
    """String features of a stage's TFRecord shards, one split per pattern."""

    def __init__(self, split_to_pattern: Mapping[str, str], fields: Sequence[str], stage: str):
        self.stage = stage
        super().__init__(
            split_to_filepattern=dict(split_to_pattern),
            feature_description={f: tf.io.FixedLenFeature([], tf.string) for f in fields},
        )

    def list_shards(self, split: str) -> Sequence[str]:
        """The split's shards when they are whole (:func:`check_shard_set`: every member of the
        set, the stage finished, its recorded count of records)."""
        pattern = self._split_to_filepattern[split]
        files = check_shard_set(pattern)
        if not files:
            raise FileNotFoundError(
                f"no TFRecord shards match {pattern}; they are written by `{self.stage}`"
            )
        return files


Formatter = Callable[[Mapping[str, str]], dict[str, str]]


def rows_dataset(rows: Sequence[Mapping[str, str]], formatter: Formatter) -> tf.data.Dataset:
    """One example per row: the formatter's string features, in row order."""
    examples = [formatter(row) for row in rows]
    keys = list(examples[0]) if examples else list(formatter(_EMPTY_ROW))
    columns = {
        k: tf.constant([ex[k] for ex in examples], dtype=tf.string, shape=[len(examples)])
        for k in keys
    }
    return tf.data.Dataset.from_tensor_slices(columns)


_EMPTY_ROW = {f: "" for f in PROBE_FIELDS}


class RowsSource(seqio.FunctionDataSource):
    """Examples formatted from rows that ``load`` reads when a dataset is built."""

    def __init__(
        self, load: Callable[[], list[dict[str, str]]], formatter: Formatter, splits: Sequence[str]
    ) -> None:
        self._load = load
        self._formatter = formatter

        def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
            del split, shuffle_files, seed  # one file; the task shuffles examples if asked
            return rows_dataset(self._load(), self._formatter)

        super().__init__(dataset_fn=dataset_fn, splits=splits)

    def rows(self) -> list[dict[str, str]]:
        return self._load()


def concatenated(*loads: Callable[[], list[dict[str, str]]]) -> Callable[[], list[dict[str, str]]]:
    """Rows of several files, one after the other (UPDATED then NEW make CHANGED)."""

    def load() -> list[dict[str, str]]:
        return [row for read in loads for row in read()]

    return load


# --- the source switch: the stages' files, or the temporal_wiki TFDS datasets prepared from them


TFDS_DIR_ENV = "TW_JAX_TFDS_DIR"
TFDS_BUILDER = "temporal_wiki"
# seqio wants a version; a wildcard takes the newest prepared of the builder's major version,
# which changes when its examples change (docs/tfds.md)
TFDS_VERSION = "1.*.*"
_tfds: dict[str, str] = {"data_dir": "", "version": TFDS_VERSION}

# <period or snapshot>/<stage folder>/<name>.tfrecord-*-of-* → the config and split holding it
_SHARDS = re.compile(r"(?:^|/)([^/]+)/(diffset|full|ssm)/(diffset|unchanged|full)"
                     r"\.tfrecord-\*-of-\*$")
# <period>/probes[_<retriever>]/<category>.csv → the config (<P>_probes[_<retriever>]) and split
_PROBES = re.compile(r"(?:^|/)([^/]+)/(probes(?:_[a-z0-9]+)?)/"
                     r"((?:lighttuning_)?(?:unchanged|updated|new|deleted))\.csv$")
# The retrievers whose open-book probe folders (``probes_<retriever>/``) temporal_wiki has
# configs for: the built-in ones; another retriever's folder stays on its files.
TFDS_RETRIEVERS = ("bm25", "dpr")


def use_tfds(data_dir: str | None, version: str = TFDS_VERSION) -> None:
    """From now on, tasks registered from a data folder read its DiffSets, snapshots, SSM sets,
    probes and light-tuning sets from the ``temporal_wiki`` TFDS datasets prepared under
    ``data_dir`` (``tfds build --imports tw_jax.datasets temporal_wiki/<config>``; docs/tfds.md)
    instead of the files (``$TW_JAX_TFDS_DIR`` does the same for a process and its
    subprocesses); ``None`` switches back to the files, unless that variable is set.
    ``version`` pins one (default: the newest prepared 1.x). The examples are the same, in the same
    order: the builders keep the files' order. Open-book probe folders of the built-in retrievers
    (``probes_bm25/``, ``probes_dpr/``) read ``<P>_probes_<retriever>``; another retriever's
    stays on its files."""
    _tfds.update(data_dir=os.fspath(data_dir) if data_dir else "", version=version)


def _tfds_dir() -> str | None:
    return _tfds["data_dir"] or os.environ.get(TFDS_DIR_ENV) or None


def _tfds_name(config: str | None, builder: str = TFDS_BUILDER) -> str:
    """``builder[/config]:version``, the version :func:`use_tfds` reads."""
    return f"{builder}/{config}:{_tfds['version']}" if config else f"{builder}:{_tfds['version']}"


def tfds_split(pattern: str) -> tuple[str, str] | None:
    """``(config, split)`` of ``temporal_wiki`` holding a stage's shards (None: no config)."""
    match = _SHARDS.search(pattern.replace(os.sep, "/"))
    if match is None:
        return None
    where, folder, name = match.groups()
    period, snapshot = period_folder(where), snapshot_folder(where)
    ssm = "_ssm" if folder == "ssm" else ""
    if name == "full":  # the snapshot a folder (a snapshot, or a period's new one) holds
        held = period.new if period is not None else snapshot
        return None if held is None else (names.config("full_ssm" if ssm else "full", held), "full")
    if period is None or folder == "full":
        return None
    return (names.config("ssm" if ssm else "diffset", period), name)


class _InOrderLoader(seqio.utils.LazyTfdsLoader):
    """TFDS refuses ``shuffle_files`` on a dataset written in order (``disable_shuffling``)
    unless its ordering guard is off: the task shuffles files and examples, as it does the
    stage's shards."""

    @property
    def read_config(self) -> tfds.ReadConfig:
        return dataclasses.replace(super().read_config, enable_ordering_guard=False)


class TfdsFieldsSource(seqio.TfdsDataSource):
    """A prepared TFDS split read as the file source reads its shards: only ``fields``."""

    def __init__(self, name: str, data_dir: str, splits: Mapping[str, str],
                 fields: Sequence[str]) -> None:
        self.fields = tuple(fields)
        super().__init__(tfds_name=name, tfds_data_dir=data_dir, splits=dict(splits),
                         read_only=True)
        self._tfds_dataset = _InOrderLoader(name, data_dir=data_dir, split_map=dict(splits),
                                            read_only=True)

    def get_dataset(self, split: str | None = None, shuffle: bool = True,
                    seed: int | None = None, shard_info: seqio.ShardInfo | None = None,
                    **kwargs: Any) -> tf.data.Dataset:
        check_prepared(self.tfds_dataset.builder)
        dataset = super().get_dataset(split, shuffle, seed, shard_info, **kwargs)
        return dataset.map(lambda ex: {f: ex[f] for f in self.fields},
                           num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def check_prepared(builder: Any) -> None:
    """A prepared dataset is read only when it was made from the files of now (its fingerprint,
    :func:`~tw_jax.tasks.tfds_fingerprint.check_folder`): the tasks read through TFDS's
    read-only builder, which would not check it."""
    from tw_jax.tasks.tfds_fingerprint import check_folder

    if builder.is_prepared():
        check_folder(os.fspath(builder.data_dir))


def stage_source(split_to_pattern: Mapping[str, str], fields: Sequence[str],
                 stage: str) -> seqio.DataSource:
    """The source of a stage's TFRecord shards: the files, or (after :func:`use_tfds`) the
    ``temporal_wiki`` split prepared from them."""
    tfds_dir = _tfds_dir()
    found = {s: tfds_split(p) for s, p in split_to_pattern.items()} if tfds_dir else {}
    configs = {where[0] for where in found.values() if where}
    if not tfds_dir or None in found.values() or len(configs) != 1:
        return TFRecordSource(split_to_pattern, fields, stage)
    splits = {s: where[1] for s, where in found.items() if where}
    return TfdsFieldsSource(_tfds_name(configs.pop()), tfds_dir, splits, fields)


def probes_config(path: str) -> tuple[str, str] | None:
    """``(config, split)`` of ``temporal_wiki`` holding a probe CSV (None: no config)."""
    match = _PROBES.search(path.replace(os.sep, "/"))
    if match is None:
        return None
    where, folder, split = match.groups()
    period = period_folder(where)
    retriever = folder.removeprefix("probes").removeprefix("_")
    if period is None or retriever and (
            retriever not in TFDS_RETRIEVERS or split.startswith("lighttuning_")):
        return None
    return names.config("probes", period, retriever), split


def probe_rows(path: str) -> Callable[[], list[dict[str, str]]]:
    """What loads a probes CSV's rows: the file, or (after :func:`use_tfds`) the
    ``temporal_wiki/<P>_probes[_<retriever>]`` split prepared from it."""
    config = probes_config(path) if tfds_active() else None
    if config is None:
        return lambda: read_stage_probes(path)
    return lambda: tfds_rows(TFDS_BUILDER, *config)  # every probe feature is text


def tfds_active() -> bool:
    """Whether the tasks registered now read prepared TFDS datasets (:func:`use_tfds`)."""
    return _tfds_dir() is not None


def tfds_rows(builder: str, config: str | None, split: str) -> list[dict[str, Any]]:
    """The examples of a prepared split of a tw_jax builder (``temporal_wiki``, ``ckl_lama``,
    ``ecbd``, ``evolvingqa``) under the :func:`use_tfds` folder, in order, as Python values
    (text as ``str``, sequences as lists), read through ``seqio.TfdsDataSource``. A split the
    prepared dataset lacks is a set without rows (its builder leaves those out); a dataset not
    prepared is an error naming the command that prepares it."""
    tfds_dir = _tfds_dir()
    if tfds_dir is None:
        raise ValueError("the TFDS switch is off: use_tfds(DIR) or $TW_JAX_TFDS_DIR first")
    name = _tfds_name(config, builder)
    source = seqio.TfdsDataSource(tfds_name=name, tfds_data_dir=tfds_dir, read_only=True)
    if not source.tfds_dataset.builder.is_prepared():
        raise FileNotFoundError(
            f"{name} is not prepared in {tfds_dir} (the TFDS switch is on: ${TFDS_DIR_ENV} "
            f"or use_tfds); `tfds build --imports tw_jax.datasets {name.split(':')[0]} "
            f"--manual_dir DIR --data_dir {tfds_dir}` prepares it (docs/tfds.md)")
    check_prepared(source.tfds_dataset.builder)
    if split not in source.splits:
        return []
    dataset = source.get_dataset(split, shuffle=False)
    return [{k: _python(v) for k, v in row.items()} for row in dataset.as_numpy_iterator()]


def _python(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        return [_python(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value
