"""The files of a Probes folder, written atomically; ``stats.json`` last.

``{category}.csv`` (``subject,relation,object,subject_id,relation_id,object_id,previous_object,
text,cloze``), ``{category}.tfrecord-00000-of-00001`` (``tf.train.Example`` with the same
fields), ``lighttuning_{category}.csv``, and ``stats.json``: a folder is complete exactly when
``stats.json`` exists. Both runners end here, so their files are byte-identical.

Probes are written as they are read, row by row: a category's probes may be a stream from the
stage's :class:`~tw_jax.preprocess.probes.kept.KeptStore` (read twice: the CSV, then the
TFRecords), never a list of them all.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from tw_jax.io import paths
from tw_jax.io.atomic import FolderCommit, discard
from tw_jax.io.tfrecord import ShardedTFRecordWriter, encode_example
from tw_jax.preprocess.probes.categorise import CATEGORIES
from tw_jax.preprocess.probes.records import Probe, write_csv

STATS_FILE = "stats.json"


def clear_stats(out_dir: str | os.PathLike[str]) -> None:
    """An earlier run's stats.json would mark a half-rewritten folder as complete."""
    paths.makedirs(out_dir)
    discard(paths.join(out_dir, STATS_FILE))


def write_probes_folder(
    out_dir: str | os.PathLike[str],
    probes: Mapping[str, Iterable[Probe]],
    lighttuning: Mapping[str, Iterable[Probe]],
    stats: dict[str, Any],
) -> None:
    """Every file under a temporary name first, all renamed into place together, stats.json
    last (:class:`FolderCommit`; in a bucket too, where the rename is a server-side copy of the
    finished object): a run that fails on any file leaves none of its files final-named.

    Each category's ``probes`` are iterated twice (CSV, then TFRecords): a list, or a
    re-iterable stream such as :meth:`KeptStore.final`'s."""
    out = paths.resolve(out_dir)
    clear_stats(out)
    with FolderCommit(out, last=STATS_FILE) as folder:
        for category in CATEGORIES:
            rows = probes.get(category, ())
            with folder.open(f"{category}.csv", "w", encoding="utf-8", newline="") as handle:
                write_csv(handle, rows)
            writer = ShardedTFRecordWriter(folder.path(f"{category}.tfrecord"), 1 << 40)
            try:
                for probe in rows:
                    writer.write(encode_example(probe.as_features()))
                writer.commit(into=folder)
            except BaseException:
                writer.abort()
                raise
            name = f"lighttuning_{category}.csv"
            with folder.open(name, "w", encoding="utf-8", newline="") as handle:
                write_csv(handle, lighttuning.get(category, ()))
        folder.write_json(STATS_FILE, stats)
