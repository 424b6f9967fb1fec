"""The files of a Probes folder, written atomically; ``stats.json`` last.

``{category}.csv`` (``subject,relation,object,subject_id,relation_id,object_id,previous_object,
text,cloze``), ``{category}.tfrecord-00000-of-00001`` (``tf.train.Example`` with the same
fields), ``lighttuning_{category}.csv``, and ``stats.json``: a folder is complete exactly when
``stats.json`` exists. Both runners end here, so their files are byte-identical.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, discard, write_json
from tw_jax.io.tfrecord import ShardedTFRecordWriter, encode_example, frame
from tw_jax.preprocess.probes.categorise import CATEGORIES
from tw_jax.preprocess.probes.records import Probe, csv_text

STATS_FILE = "stats.json"


def clear_stats(out_dir: str | os.PathLike[str]) -> None:
    """An earlier run's stats.json would mark a half-rewritten folder as complete."""
    if paths.is_url(out_dir):
        paths.remove_matching(paths.join(out_dir, STATS_FILE))
        return
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    discard(Path(out_dir) / STATS_FILE)


def write_probes_folder(
    out_dir: str | os.PathLike[str],
    probes: Mapping[str, Sequence[Probe]],
    lighttuning: Mapping[str, Sequence[Probe]],
    stats: dict[str, Any],
) -> None:
    if paths.is_url(out_dir):
        _write_to_object_store(os.fspath(out_dir), probes, lighttuning, stats)
        return
    out = Path(out_dir)
    clear_stats(out)
    for category in CATEGORIES:
        rows = probes.get(category, ())
        with atomic_open(out / f"{category}.csv", "w", encoding="utf-8", newline="") as handle:
            handle.write(csv_text(rows))
        writer = ShardedTFRecordWriter(out / f"{category}.tfrecord", 1 << 40)
        try:
            for probe in rows:
                writer.write(encode_example(probe.as_features()))
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        name = f"lighttuning_{category}.csv"
        with atomic_open(out / name, "w", encoding="utf-8", newline="") as handle:
            handle.write(csv_text(lighttuning.get(category, ())))
    write_json(out / STATS_FILE, stats)


def _write_to_object_store(
    out: str,
    probes: Mapping[str, Sequence[Probe]],
    lighttuning: Mapping[str, Sequence[Probe]],
    stats: dict[str, Any],
) -> None:
    """The same files on gs:// and the like (where a Beam runner writes): an object appears
    when it is closed, so there is nothing to rename; stats.json still comes last."""
    clear_stats(out)
    for category in CATEGORIES:
        rows = probes.get(category, ())
        with paths.open_file(paths.join(out, f"{category}.csv"), "wb") as handle:
            handle.write(csv_text(rows).encode("utf-8"))
        with paths.open_file(paths.join(out, f"{category}.tfrecord-00000-of-00001"), "wb") as handle:
            for probe in rows:
                handle.write(frame(encode_example(probe.as_features())))
        with paths.open_file(paths.join(out, f"lighttuning_{category}.csv"), "wb") as handle:
            handle.write(csv_text(lighttuning.get(category, ())).encode("utf-8"))
    with paths.open_file(paths.join(out, STATS_FILE), "wb") as handle:
        handle.write(
            json.dumps(stats, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"
        )
