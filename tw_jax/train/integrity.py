"""Checksums of finished checkpoint steps, so that a damaged step is never restored as good.

Orbax makes a step folder appear only when it is complete, but nothing checks its bytes later:
a flipped byte in a compressed data file can restore silently, and a deleted metadata or
manifest file can restore nothing with no word. So once a step is finalised, process 0 writes
``<step>/tw_jax_integrity.json``: the size and SHA-256 of every file below the step. Before a
step is restored, :func:`check_step` reads them back.

A step without the file (saved by an older tw_jax, or killed between orbax's commit and the
checksums) is restored with a warning: it cannot be told apart from an intact one, and refusing
it would throw away finished work. A save that fails, or whose checksums cannot be written (a
full disk), leaves no such step: the trainer removes it (:class:`tw_jax.train.checkpoints.Saves`),
and a half-written step is only ever orbax's temporary folder, which is never a step.
"""

from __future__ import annotations

import hashlib
import json
import logging

from tw_jax.io import paths
from tw_jax.io.atomic import write_json

log = logging.getLogger(__name__)

MANIFEST = "tw_jax_integrity.json"
_BLOCK = 1 << 22


def _files(step_dir: str, prefix: str = "") -> list[str]:
    """Every file below ``step_dir`` (relative, ``/``-separated, sorted), the manifest aside."""
    found = []
    for name in sorted(n.rstrip("/") for n in paths.listdir(step_dir)):
        path = paths.join(step_dir, name)
        relative = f"{prefix}{name}"
        if paths.isdir(path):
            found += _files(path, f"{relative}/")
        elif relative != MANIFEST:
            found.append(relative)
    return found


def _digest(path: str) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    with paths.open_file(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def write_manifest(step_dir: str) -> None:
    """Record the size and digest of every file of a finalised step."""
    files = {}
    for relative in _files(step_dir):
        size, digest = _digest(paths.join(step_dir, relative))
        files[relative] = {"bytes": size, "sha256": digest}
    write_json(paths.join(step_dir, MANIFEST), {"files": files})


def check_step(step_dir: str) -> str | None:
    """What is wrong with a step folder (a missing, resized or changed file), or None.

    A step with no manifest is None too, after a warning (see the module docstring).
    """
    manifest = paths.join(step_dir, MANIFEST)
    if not paths.exists(manifest):
        log.warning("%s: no %s, so its bytes cannot be checked; restoring it as it is",
                    step_dir, MANIFEST)
        return None
    try:
        files = json.loads(paths.read_text(manifest))["files"]
    except (ValueError, KeyError, TypeError):
        return f"{MANIFEST} is not a checksum manifest"
    for relative, expected in sorted(files.items()):
        path = paths.join(step_dir, relative)
        if not paths.exists(path):
            return f"{relative} is missing"
        size, digest = _digest(path)
        if size != expected["bytes"]:
            return f"{relative} has {size} bytes, {expected['bytes']} were saved"
        if digest != expected["sha256"]:
            return f"{relative} does not match its checksum (its bytes changed after the save)"
    return None
