"""The released TemporalWiki files as tasks, so the published benchmark trains directly.

``register_published(folder_or_zip)`` reads a folder (or a ``.zip``, or a folder of the three
released zips ``TWiki_Diffsets.zip``, ``TWiki_Probes.zip``, ``Wikipedia_Full.zip``) holding

- ``TWiki_Diffsets/wikipedia_MMMM_gpt2.csv`` (``text``) → ``twiki_diffset_MMMM_lm``; when only
  ``wikipedia_MMMM_subset.csv`` (``id,url,title,text``) is there, its ``text`` is used;
- ``Wikipedia_Full/…/part*.csv`` (``text``) → ``twiki_full_MM_lm``, the month MM read from the
  folders below ``Wikipedia_Full`` (:func:`tw_jax.time.release_full_snapshot`: a two-digit
  name such as ``08`` or ``wikipedia_08``, else ``YYYYMM``, else ``MMDD``);
- ``TWiki_Probes/MMDD-MMDD_{changed,unchanged}.csv`` (``subject,relation,object``) →
  ``twiki_probes_MMMM_{changed,unchanged}`` in the four formats of :mod:`tw_jax.tasks.probes`
  (``0801-0901`` is pair ``0809``);

plus ``twiki_mixreview_MMMM_lm`` and ``twiki_replay_MMMM_lm`` (:mod:`tw_jax.tasks.replay`; the
release records no sizes, so its weighting is ``uniform`` or ``recent``) where the initial
month's full snapshot is present. The release
is the 2021 benchmark: its periods and snapshots keep the 2021 layout's names
(:mod:`tw_jax.time`). The release
has no SSM version, NON-DiffSet or light-tuning sets, so those tasks need ``tw-jax`` data.

The folder or zip may be local or in a bucket (``gs://``); :mod:`tw_jax.preprocess.dumps.released`
lists and reads its files (zip members in place, unsafe archives refused).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import seqio
import tensorflow as tf

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.released import PublishedFile, csv_texts, index_files
from tw_jax.preprocess.probes.probe_csv import read_probe_rows
from tw_jax.tasks import names
from tw_jax.tasks.mixreview import MixReviewMixture
from tw_jax.tasks.probes import PROBE_SPLITS, register_row_tasks
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.replay import ReplayMixture, ReplaySource, chain
from tw_jax.tasks.twiki import CORPUS_SPLITS, register_lm_task
from tw_jax.time import Period, Snapshot, TimeError, release_full_snapshot, release_probe_period

_DIFFSET = re.compile(r"^wikipedia_([0-9]+)_(subset|gpt2)\.csv$")
_PROBES = re.compile(r"^([0-9]+)-([0-9]+)_(changed|unchanged)\.csv$")
_PART = re.compile(r"^part[^/]*\.csv$")


@dataclass
class Release:
    diffsets: dict[Period, dict[str, PublishedFile]] = field(default_factory=dict)
    probes: dict[Period, dict[str, PublishedFile]] = field(default_factory=dict)
    full: dict[Snapshot, list[PublishedFile]] = field(default_factory=dict)


def full_month(file: PublishedFile) -> Snapshot:
    """The snapshot of a ``Wikipedia_Full`` part, from the folders between it and the root."""
    parts = file.path.parts
    found = release_full_snapshot(parts[parts.index("Wikipedia_Full") + 1 : -1])
    if found is None:
        raise DumpError(file.name, None, "cannot tell the snapshot's month from its folders")
    return found


def _period(file: PublishedFile, read: Callable[[], Period]) -> Period:
    try:
        return read()
    except TimeError as error:
        raise DumpError(file.name, None, f"not a period of the release: {error}") from None


def classify(files: list[PublishedFile]) -> Release:
    release = Release()
    for file in files:
        name = file.path.name
        if match := _DIFFSET.match(name):
            period = _period(file, lambda m=match: Period.parse(m.group(1)))
            release.diffsets.setdefault(period, {})[match.group(2)] = file
        elif match := _PROBES.match(name):
            period = _period(file, lambda m=match: release_probe_period(m.group(1), m.group(2)))
            release.probes.setdefault(period, {})[match.group(3)] = file
        elif _PART.match(name) and "Wikipedia_Full" in file.path.parts:
            release.full.setdefault(full_month(file), []).append(file)
    for parts in release.full.values():
        parts.sort(key=lambda f: f.path)
    return release


# --- datasets -----------------------------------------------------------------------------


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


def _initial_snapshot(periods: list[Period], snapshot: Snapshot) -> Snapshot:
    """The first snapshot of the chain of released periods that ends at ``snapshot``."""
    ending_in: dict[Snapshot, Period] = {}
    for period in sorted(periods):
        ending_in.setdefault(period.new, period)
    while snapshot in ending_in:
        snapshot = ending_in[snapshot].old
    return snapshot


def register_release(
    registrar: Registrar, root: str | os.PathLike[str], vocabularies: Mapping[str, seqio.Vocabulary]
) -> list[str]:
    """Registers the tasks a release supports (see the module docstring); returns their names."""
    release = classify(index_files(root))
    gpt2 = vocabularies["gpt2"]
    for period, versions in sorted(release.diffsets.items()):
        file = versions.get("gpt2") or versions["subset"]
        source = seqio.FunctionDataSource(texts_dataset_fn([file]), splits=CORPUS_SPLITS)
        register_lm_task(registrar, names.diffset(period, "lm"), source, gpt2)
    full = {snapshot: snapshot for snapshot in release.full}  # as the release spells them
    for snapshot, parts in sorted(release.full.items()):
        source = seqio.FunctionDataSource(texts_dataset_fn(parts), splits=CORPUS_SPLITS)
        register_lm_task(registrar, names.full(snapshot, "lm"), source, gpt2)
    for period, categories in sorted(release.probes.items()):
        for category, file in sorted(categories.items()):
            register_row_tasks(
                registrar,
                names.probes(period, category),
                _probe_loader(file),
                vocabularies,
                PROBE_SPLITS,
            )
    for period in sorted(release.diffsets):
        initial = _initial_snapshot(list(release.diffsets), period.old)
        if initial in full:
            registrar.mixture(
                MixReviewMixture(
                    names.mixreview(period, "lm"),
                    names.diffset(period, "lm"),
                    names.full(full[initial], "lm"),
                    preset="temporalwiki",
                )
            )
        initial, earlier = chain(period, release.diffsets)
        if initial in full:
            old_sources = [ReplaySource(names.full(full[initial], "lm"), full[initial])]
            old_sources += [ReplaySource(names.diffset(p, "lm"), p) for p in earlier]
            registrar.mixture(ReplayMixture(names.replay(period, "lm"),
                                            names.diffset(period, "lm"), old_sources))
    return list(registrar.names)
