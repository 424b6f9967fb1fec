"""What a demo's OUT folder holds, so that a rerun never passes old results off as new.

``OUT/demo.json`` records the settings behind OUT: the sample world (its seed and
:class:`~tw_jax.demo.DemoWorld`) that made ``OUT/data``, with the data's summary and build time
once the data is complete, and, from the moment training starts, the training settings
(:class:`~tw_jax.demo_training.DemoTraining`) behind ``OUT/runs`` and ``OUT/report``. A rerun
asking for the same settings reuses what is there (the data as is; the lifelong runner skips the
updates it recorded and resumes an interrupted one); a rerun asking for others is refused with
one line naming each difference, before anything is built or trained: use another ``--out``, or
``--fresh`` to replace what OUT holds.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tw_jax.io.atomic import write_json

RECORD = "demo.json"
# What a demo writes into OUT (its XLA cache is kept: it only saves compilation).
WRITTEN = ("sample_world", "data", "runs", "report", "summary.json", RECORD)


class DemoRerunError(ValueError):
    """OUT holds a demo run with other settings (or with no record of them)."""


def read_record(out: Path) -> dict[str, Any] | None:
    """OUT's record, or None when OUT holds no demo output at all."""
    path = out / RECORD
    if path.is_file():
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise DemoRerunError(f"{path}: not JSON ({error.msg}); use --fresh to replace "
                                 f"{out}'s demo output") from None
        if isinstance(record, dict) and isinstance(record.get("world"), dict):
            return record
        raise DemoRerunError(f"{path}: not a demo record; use --fresh to replace {out}'s output")
    if any((out / name).exists() for name in ("data", "runs")):
        raise DemoRerunError(
            f"{out} holds demo output with no record of its settings (written by an older "
            f"tw-jax): use another --out, or --fresh to replace it")
    return None


def differences(stored: Mapping[str, Any], requested: Mapping[str, Any]) -> list[str]:
    """``name stored (now requested)`` for every setting that differs."""
    names = sorted(set(stored) | set(requested))
    return [f"{name} {_shown(stored.get(name))} (now {_shown(requested.get(name))})"
            for name in names if _plain(stored.get(name)) != _plain(requested.get(name))]


def check_rerun(out: Path, world: Mapping[str, Any],
                training: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """OUT's record when OUT may be continued with these settings (None: OUT holds nothing);
    a :class:`DemoRerunError` naming the differences otherwise."""
    record = read_record(out)
    if record is None:
        return None
    changed = differences(record["world"], world)
    if training is not None and record.get("training") is not None:
        changed += differences(record["training"], training)
    if changed:
        raise DemoRerunError(
            f"{out} holds a demo run with other settings: {'; '.join(changed)}. Use another "
            f"--out, or --fresh to replace it")
    return record


def clear(out: Path) -> None:
    """Remove what a demo wrote into OUT (``--fresh``)."""
    for name in WRITTEN:
        target = out / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()


def write_record(out: Path, record: Mapping[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / RECORD, _plain(record))


def _plain(value: Any) -> Any:
    """JSON's view of a value (tuples as lists), so stored and requested compare alike."""
    return json.loads(json.dumps(value))


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
