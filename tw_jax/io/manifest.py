"""The size and SHA-256 of every file below a folder, recorded when it is finished and checked
before it is trusted again: checkpoint steps (:mod:`tw_jax.runtime.integrity`) and stored
retrieval indexes (:mod:`tw_jax.retrieval.index`). Local or ``gs://``."""

from __future__ import annotations

import hashlib
from collections.abc import Container, Mapping
from typing import Any

from tw_jax.io import paths

_BLOCK = 1 << 22


def files_below(folder: str, skip: Container[str] = (), prefix: str = "") -> list[str]:
    """Every file below ``folder`` (relative, ``/``-separated, sorted), those in ``skip``
    aside."""
    found = []
    for name in sorted(n.rstrip("/") for n in paths.listdir(folder)):
        path = paths.join(folder, name)
        relative = f"{prefix}{name}"
        if paths.isdir(path):
            found += files_below(path, skip, f"{relative}/")
        elif relative not in skip:
            found.append(relative)
    return found


def digest(path: str) -> tuple[int, str]:
    """``(bytes, SHA-256)`` of a file, streamed."""
    hashed, size = hashlib.sha256(), 0
    with paths.open_file(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            hashed.update(block)
            size += len(block)
    return size, hashed.hexdigest()


def record(folder: str, skip: Container[str] = ()) -> dict[str, dict[str, Any]]:
    """``{relative path: {"bytes": n, "sha256": hex}}`` of every file below ``folder``."""
    files = {}
    for relative in files_below(folder, skip):
        size, sha = digest(paths.join(folder, relative))
        files[relative] = {"bytes": size, "sha256": sha}
    return files


def problem(folder: str, files: Mapping[str, Mapping[str, Any]],
            since: str = "recorded") -> str | None:
    """What differs from the record ``files`` (a missing, resized or changed file), or None;
    ``since`` names when the record was made ("saved"). Every size is compared before any file
    is hashed, so a file cut or grown is found without reading the others."""
    for relative, expected in sorted(files.items()):
        path = paths.join(folder, relative)
        if not paths.exists(path):
            return f"{relative} is missing"
        size = paths.size(path)
        if size != expected["bytes"]:
            return f"{relative} has {size} bytes, {expected['bytes']} were {since}"
    for relative, expected in sorted(files.items()):
        size, sha = digest(paths.join(folder, relative))
        if size != expected["bytes"]:
            return f"{relative} has {size} bytes, {expected['bytes']} were {since}"
        if sha != expected["sha256"]:
            return (f"{relative} does not match its checksum (its bytes changed after it was "
                    f"{since})")
    return None


__all__ = ["digest", "files_below", "problem", "record"]
