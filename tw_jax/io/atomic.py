"""Outputs that appear whole or not at all.

A stage writes every file under a temporary name beside its final one and renames it into place
only when the stage has succeeded, so an interrupted run (Ctrl-C, SIGKILL, a full disk) never
leaves a file that looks complete. Stages write ``stats.json`` last: a folder is finished exactly
when its ``stats.json`` exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def temporary_sibling(path: str | os.PathLike[str]) -> Path:
    """A hidden name in the same folder (so the final rename stays on one filesystem)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def commit(temporary: str | os.PathLike[str], final: str | os.PathLike[str]) -> None:
    """Moves a finished temporary file into place, replacing any older version atomically."""
    os.replace(temporary, final)


def discard(path: str | os.PathLike[str]) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """``open`` for writing whose file only appears under ``path`` if the block succeeds."""
    if not any(flag in mode for flag in "wx"):
        raise ValueError(f"atomic_open writes whole files; got mode {mode!r}")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_sibling(path)
    try:
        with open(temporary, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        commit(temporary, path)
    except BaseException:
        discard(temporary)
        raise


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Writes pretty, key-sorted JSON atomically (stats and manifests that people read)."""
    with atomic_open(path, "w", encoding="utf-8") as handle:
        json.dump(obj, handle, indent=2, sort_keys=True, ensure_ascii=False)
        handle.write("\n")
