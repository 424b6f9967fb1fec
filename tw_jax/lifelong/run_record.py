"""What a lifelong run was asked, recorded beside its state, so a rerun resumes only the same run.

A rerun on the same ``--out`` skips every update its state records (:mod:`.state`). That is
right only when the rerun asks for the same thing: other gin settings (``TRAIN_STEPS``), another
data folder, data rebuilt since, another ``--max-probes`` or trainer would give figures that are
not the recorded updates'. ``OUT/state/<method>/run.json`` records those settings when the
method first runs there; a rerun that differs is one line naming each difference. What a rerun
may add stays allowed: more metric groups, ``--eval-matrix``, another ``--eval-batch-size``.

Runs written before the record existed are adopted (the record is written then), and a
``results.jsonl`` in an ``--out`` that holds no lifelong state at all is another program's:
refused, rather than mixed into one report.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tw_jax.io import paths
from tw_jax.io.atomic import write_json
from tw_jax.time import Period

RUN_FILE = "run.json"
# What of a parsed run changes the figures it gives (not where it writes, how it logs or how
# often it checkpoints).
_TRAINING_FIELDS = ("model_config", "task_feature_lengths", "train_steps", "batch_size",
                    "optimizer", "schedule_fn", "accumulate_steps", "seed", "pack", "loss_terms")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_STATS = "stats.json"
_VOLATILE = ("seconds",)  # what a rebuild of the same data changes in a stats.json


def data_fingerprint(stage_folders: Sequence[str]) -> str:
    """A short hash of the ``stats.json`` of each stage folder given (their counts and options,
    not their timings): data rebuilt differently, or replaced, changes it."""
    digest = hashlib.sha256()
    for folder in sorted(stage_folders):
        path = paths.join(folder, _STATS)
        if not paths.isfile(path):
            continue
        try:
            stats = json.loads(paths.read_text(path))
        except ValueError:
            stats = {"unreadable": paths.read_bytes(path).hex()}
        if isinstance(stats, dict):
            stats = {k: v for k, v in stats.items() if k not in _VOLATILE}
        digest.update(folder.rstrip("/").rsplit("/", 1)[-1].encode())
        digest.update(json.dumps(stats, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def training_settings(run: Any) -> dict[str, str]:
    """The settings of a parsed run (``TrainConfig``) that its figures depend on, as text: what
    gin resolved, so ``SCHEDULE=constant`` and ``SCHEDULE='constant'`` are one setting."""
    if run is None:
        return {}
    return {name: _ADDRESS.sub("", repr(getattr(run, name, None))) for name in _TRAINING_FIELDS}


def run_settings(*, method: str, training: Mapping[str, str], fingerprints: Mapping[str, str],
                 periods: Sequence[Period], max_probes: int | None, trainer: str,
                 train_on: str | None, initial_checkpoint: str | None) -> dict[str, Any]:
    """The settings a rerun must share with the run it resumes. The data folder is compared by
    content (``fingerprints``: period → :func:`data_fingerprint`), not by path: a folder moved,
    or copied to a bucket, is the same data."""
    return {
        "method": method,
        **{f"training.{name}": value for name, value in training.items()},
        "data_fingerprints": dict(fingerprints),
        "first_period": periods[0].name if periods else None,
        "max_probes": max_probes,
        "trainer": trainer,
        "train_on": train_on,
        "initial_checkpoint": initial_checkpoint,
    }


def _differences(recorded: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    """What differs; of the data, only the periods both runs read (a rerun may add a period at
    the chain's end, or stop before it)."""
    found = []
    for key, value in settings.items():
        if key not in recorded:
            continue
        if isinstance(value, dict) and isinstance(recorded[key], dict):
            found += [f"the data of {name} (stats.json of its stages: rebuilt or replaced)"
                      for name in value if name in recorded[key]
                      and recorded[key][name] != value[name]]
        elif recorded[key] != value:
            found.append(f"{key} {recorded[key]!r} → {value!r}")
    return found


def check_run(out_dir: str, method: str, settings: Mapping[str, Any]) -> None:
    """Refuses a rerun whose settings differ from those ``out_dir`` recorded for ``method``
    (one line, each difference), or an ``out_dir`` whose ``results.jsonl`` no lifelong run
    wrote; records the settings when the method first runs there."""
    from tw_jax.lifelong.options import LifelongError

    record = paths.join(out_dir, "state", method, RUN_FILE)
    if paths.isfile(record):
        try:
            recorded = json.loads(paths.read_text(record))
        except ValueError:
            recorded = {}
        differences = _differences(recorded, settings)
        if differences:
            raise LifelongError(
                f"{out_dir} holds a {method} run with other settings ({'; '.join(differences)}):"
                f" its recorded updates are not this run's; use another --out, or delete "
                f"{paths.join(out_dir, 'state', method)} and its checkpoints to redo them")
        if recorded.get("data_fingerprints") != settings.get("data_fingerprints"):
            write_json(record, {**recorded, "data_fingerprints": {
                **recorded.get("data_fingerprints", {}), **settings["data_fingerprints"]}})
        return
    results = paths.join(out_dir, "results.jsonl")
    if paths.isfile(results) and not paths.isdir(paths.join(out_dir, "state")):
        raise LifelongError(f"{results}: no lifelong run wrote it (no state/ beside it); "
                            "give another --out so two runs' results do not mix")
    write_json(record, dict(settings))
