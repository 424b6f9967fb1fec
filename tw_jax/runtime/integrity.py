"""Checksums of finished checkpoint steps, so that a damaged step is never restored as good.

Orbax makes a step folder appear only when it is complete, but nothing checks its bytes later:
a flipped byte in a compressed data file can restore silently, and a deleted metadata or
manifest file can restore nothing with no word. So once a step is finalised, process 0 writes
``<step>/tw_jax_integrity.json``: the size and SHA-256 of every file below the step. Before a
step is restored, :func:`check_step` reads them back.

A step without the file (saved by an older tw_jax, or killed between orbax's commit and the
checksums) is restored with a warning: it cannot be told apart from an intact one, and refusing
it would throw away finished work. A save that fails, or whose checksums cannot be written (a
full disk), leaves no such step: the trainer removes it (:class:`tw_jax.runtime.checkpoints.Saves`),
and a half-written step is only ever orbax's temporary folder, which is never a step.
"""

from __future__ import annotations

import json
import logging

from tw_jax.io import manifest, paths
from tw_jax.io.atomic import write_json

log = logging.getLogger(__name__)

MANIFEST = "tw_jax_integrity.json"


def write_manifest(step_dir: str) -> None:
    """Record the size and digest of every file of a finalised step."""
    write_json(paths.join(step_dir, MANIFEST), {"files": manifest.record(step_dir, {MANIFEST})})


def check_step(step_dir: str) -> str | None:
    """What is wrong with a step folder (a missing, resized or changed file), or None.

    A step with no manifest is None too, after a warning (see the module docstring).
    """
    record = paths.join(step_dir, MANIFEST)
    if not paths.exists(record):
        log.warning("%s: no %s, so its bytes cannot be checked; restoring it as it is",
                    step_dir, MANIFEST)
        return None
    try:
        files = json.loads(paths.read_text(record))["files"]
    except (ValueError, KeyError, TypeError):
        return f"{MANIFEST} is not a checksum manifest"
    if not isinstance(files, dict):
        return f"{MANIFEST} is not a checksum manifest"
    return manifest.problem(step_dir, files, since="saved")
