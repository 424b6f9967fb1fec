"""The files of an InvariantLAMA folder, written atomically; ``stats.json`` last.

- ``invariantLAMA.csv``: ``id,input,output``, CKL's released format, so the same reader
  (:mod:`tw_jax.preprocess.ckl.release`) loads a build and the release;
- ``invariantLAMA_answers.json``: ``id → [answers]``, the layout of the release's other answer
  files (CKL's own InvariantLAMA has none: its ``output`` is the answer);
- ``invariantLAMA_facts.csv``: ``id,subject_id,relation_id,object_id,subject,relation,object``,
  the Wikidata fact behind each probe;
- ``stats.json``: counts of every step; the folder is complete exactly when it exists.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tw_jax.io import paths
from tw_jax.io.atomic import FolderCommit, discard
from tw_jax.preprocess.ckl.release import INVARIANT, LamaRow, answers_json_text

if TYPE_CHECKING:  # lama.py writes through this module
    from tw_jax.preprocess.ckl.lama import LamaProbe

LAMA_FILE = "invariantLAMA.csv"
ANSWERS_FILE = "invariantLAMA_answers.json"
FACTS_FILE = "invariantLAMA_facts.csv"
STATS_FILE = "stats.json"
LAMA_COLUMNS = ("id", "input", "output")
FACT_COLUMNS = ("id", "subject_id", "relation_id", "object_id", "subject", "relation", "object")


def clear_stats(out_dir: str | os.PathLike[str]) -> None:
    """An earlier run's stats.json would mark a half-rewritten folder as complete (``out_dir``
    is a local folder or a ``gs://`` URL)."""
    paths.makedirs(out_dir)
    discard(paths.join(out_dir, STATS_FILE))


def _csv(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def write_lama_folder(
    out_dir: str | os.PathLike[str], probes: Sequence[LamaProbe], stats: dict[str, Any]
) -> None:
    out = os.fspath(out_dir)
    clear_stats(out)
    files = {
        LAMA_FILE: _csv(LAMA_COLUMNS, [(p.id, p.input, p.output) for p in probes]),
        ANSWERS_FILE: answers_json_text(
            [LamaRow(p.id, p.input, (p.output,)) for p in probes], INVARIANT),
        FACTS_FILE: _csv(FACT_COLUMNS, [
            (p.id, p.probe.subject_id, p.probe.relation_id, p.probe.object_id, p.probe.subject,
             p.probe.relation, p.probe.object) for p in probes
        ]),
    }
    with FolderCommit(out, last=STATS_FILE) as folder:  # all renamed together, stats.json last
        for name, text in files.items():
            with folder.open(name, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        folder.write_json(STATS_FILE, stats)
