"""Outputs that appear whole or not at all, in a local folder or a bucket.

A stage writes every file under a temporary name beside its final one and renames it into place
only when the stage has succeeded, so an interrupted run (Ctrl-C, SIGKILL, a full disk) never
leaves a file that looks complete. Stages write ``stats.json`` last: a folder is finished exactly
when its ``stats.json`` exists. In a bucket the same holds: an object appears only once its
upload completes, and the rename is a server-side copy of the finished object.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from typing import IO, Any

from tw_jax.io import paths
from tw_jax.io.paths import PathLike


def temporary_sibling(path: PathLike) -> paths.Path:
    """A hidden name in the same folder (so the final rename stays on one filesystem)."""
    path = paths.as_path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def commit(temporary: PathLike, final: PathLike) -> None:
    """Moves a finished temporary file into place, replacing any older version atomically."""
    paths.replace(temporary, final)


def discard(path: PathLike) -> None:
    paths.remove(path, missing_ok=True)


@contextlib.contextmanager
def atomic_open(path: PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """``open`` for writing whose file only appears under ``path`` if the block succeeds.

    ``kwargs`` are :func:`open`'s text options (``encoding``, ``newline``, ``errors``).
    """
    if not any(flag in mode for flag in "wx"):
        raise ValueError(f"atomic_open writes whole files; got mode {mode!r}")
    paths.makedirs(paths.parent(path))
    temporary = temporary_sibling(path)
    try:
        with paths.open_file(temporary, mode.replace("x", "w"), **kwargs) as handle:
            yield handle
            handle.flush()
            if not paths.is_url(temporary):
                os.fsync(handle.fileno())
        commit(temporary, path)
    except BaseException:
        discard(temporary)
        raise


def write_json(path: PathLike, obj: Any) -> None:
    """Writes pretty, key-sorted JSON atomically (stats and manifests that people read)."""
    with atomic_open(path, "w", encoding="utf-8") as handle:
        json.dump(obj, handle, indent=2, sort_keys=True, ensure_ascii=False)
        handle.write("\n")
