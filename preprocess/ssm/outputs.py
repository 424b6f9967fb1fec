"""The files of an SSM folder and its ``stats.json``.

``{input}.tfrecord-NNNNN-of-NNNNN`` for each input processed (``diffset``, ``full``), and
``stats.json``, written last: a folder is complete exactly when ``stats.json`` exists. Both
runners write the same records in the same order and cut shards at the same sizes, so their
files are identical; the local runner writes through
:class:`~tw_jax.io.tfrecord.ShardedTFRecordWriter` (temporary names, then renames), into a local
folder or a bucket.
"""

from __future__ import annotations

import os
from typing import Any

from tw_jax.io import paths
from tw_jax.io.atomic import FolderCommit, naming_full_disk
from tw_jax.io.tfrecord import ShardedTFRecordWriter
from tw_jax.preprocess.ssm.examples import SsmOptions
from tw_jax.preprocess.ssm.reader import INPUTS
from tw_jax.preprocess.ssm.stats import SsmTally
from tw_jax.text.spacy_pipeline import PipelineInfo

STATS_FILE = "stats.json"
MAX_SHARD_BYTES = 256 << 20


def shard_pattern(out_dir: str | os.PathLike[str], name: str) -> str:
    return paths.join(out_dir, f"{name}.tfrecord-?????-of-?????")


def clear_outputs(out_dir: str | os.PathLike[str]) -> None:
    """Removes an earlier run's stats.json (it would mark the folder complete too early) and
    shards (those of an input not processed this time would no longer be described)."""
    paths.remove_matching(paths.join(out_dir, STATS_FILE))
    for name in INPUTS:
        paths.remove_matching(shard_pattern(out_dir, name))


def build_report(
    tallies: dict[str, SsmTally],
    *,
    diffset_dir: str | os.PathLike[str],
    options: SsmOptions,
    labels: tuple[str, ...],
    pipeline: PipelineInfo,
    seconds: float,
) -> dict[str, Any]:
    inputs = {name: tally.as_dict() for name, tally in tallies.items()}
    return {
        "diffset_dir": os.fspath(diffset_dir),
        "inputs": list(tallies),
        "options": {**options.as_dict(), "labels": list(labels)},
        "spacy": pipeline.as_dict(),
        **inputs,
        "examples": sum(t["examples"] for t in inputs.values()),
        "accounting": {"balanced": all(t["accounting"]["balanced"] for t in inputs.values())},
        "seconds": round(seconds, 2),
    }


class SsmWriter:
    """One sharded TFRecord writer per input, all renamed into place together, then
    ``stats.json`` (:class:`FolderCommit`): a failure leaves no shard of this run behind."""

    def __init__(
        self, out_dir: str | os.PathLike[str], names: list[str], max_shard_bytes: int
    ) -> None:
        self.out_dir = paths.resolve(out_dir)
        with naming_full_disk(self.out_dir):
            paths.makedirs(self.out_dir)
        clear_outputs(self.out_dir)
        self._folder = FolderCommit(self.out_dir, last=STATS_FILE)
        self.writers = {
            name: ShardedTFRecordWriter(paths.join(self.out_dir, f"{name}.tfrecord"),
                                        max_shard_bytes)
            for name in names
        }

    def write(self, name: str, records: list[bytes]) -> None:
        writer = self.writers[name]
        for record in records:
            writer.write(record)

    def commit(self, report: dict[str, Any]) -> None:
        for writer in self.writers.values():
            writer.commit(into=self._folder)
        self._folder.write_json(STATS_FILE, report)
        self._folder.commit()

    def abort(self) -> None:
        for writer in self.writers.values():
            writer.abort()
        self._folder.abort()
