"""The stages of a build: what each writes, from what, in the order they can run.

The first snapshot is exported whole (``DATA/<first>/full``: the corpus an initial model
learns) and masked for T5 (``DATA/<first>/ssm``); then each consecutive period gets its DiffSet,
its Probes (against the old Wikipedia snapshot too, so DELETED facts are checked in the old
article) and its masked DiffSet (``DATA/<period>/ssm``). Folders are named as
:func:`tw_jax.time.benchmark_spelling` spells the snapshots (years, or the 2021 layout's
``0809`` for TemporalWiki's own dumps) and keep a spelling DATA already has
(:func:`tw_jax.preprocess.dump_dates.stage_folder`). A stage is complete when its folder's
``stats.json`` exists (every stage writes it last), and fresh while the inputs it records there
(``made_from``: the dumps' and the DiffSet's sizes and fingerprints) are what it read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tw_jax.io import paths
from tw_jax.preprocess.build.dumps import SnapshotDumps
from tw_jax.preprocess.dump_dates import stage_folder
from tw_jax.preprocess.runners.accounting import STATS_FILE
from tw_jax.preprocess.runners.whole import made_from_problem
from tw_jax.time import Period, Snapshot, benchmark_spelling


@dataclass(frozen=True)
class Stage:
    """One folder to write. ``old`` is None for the first snapshot's export and its SSM;
    ``source`` is the folder SSM masks (``inputs``: which of its files)."""

    kind: str
    when: Period | Snapshot
    folder: str
    new: SnapshotDumps
    old: SnapshotDumps | None = None
    source: str | None = None
    inputs: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return paths.isfile(paths.join(self.folder, STATS_FILE))

    def stale(self) -> str | None:
        """Why a complete folder must be built again (an input it records has other bytes now:
        :func:`tw_jax.preprocess.runners.whole.made_from_problem`), or None."""
        try:
            stats = json.loads(paths.read_text(paths.join(self.folder, STATS_FILE)))
        except (ValueError, UnicodeDecodeError) as error:
            return f"its {STATS_FILE} is not JSON ({error})"
        return made_from_problem(self.folder, stats)

    @property
    def title(self) -> str:
        """``2024-12→2025-01 probes``: how the build's lines name the stage."""
        return f"{self.when.label} {self.kind}"


def plan(data: str, snapshots: list[SnapshotDumps], *, ssm: bool = True) -> list[Stage]:
    """Every stage of ``snapshots`` (oldest first, two at least) under ``data``."""
    spelled = benchmark_spelling([s.snapshot for s in snapshots])
    first = spelled[0]
    full = stage_folder(data, first, "full")
    stages = [Stage("full", first, full, snapshots[0])]
    if ssm:
        stages.append(Stage("ssm", first, stage_folder(data, first, "ssm"), snapshots[0],
                            source=full, inputs=("full",)))
    for index in range(1, len(snapshots)):
        period = Period(spelled[index - 1], spelled[index])
        old, new = snapshots[index - 1], snapshots[index]
        diffset = stage_folder(data, period, "diffset")
        stages.append(Stage("diffset", period, diffset, new, old))
        stages.append(Stage("probes", period, stage_folder(data, period, "probes"), new, old,
                            source=diffset))
        if ssm:
            stages.append(Stage("ssm", period, stage_folder(data, period, "ssm"), new, old,
                                source=diffset, inputs=("diffset", "full")))
    return stages
