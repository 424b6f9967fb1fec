"""The size and SHA-256 of every file below a folder, recorded when it is finished and checked
before it is trusted again: checkpoint steps (:mod:`tw_jax.runtime.integrity`) and stored
retrieval indexes (:mod:`tw_jax.retrieval.index`). Local or ``gs://``."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Container, Iterable, Mapping
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


# --- files named one by one (a SeqIO cache's sources), hashed once per process -------------------

_hashed: dict[tuple[str, int, int], str] = {}  # (path, bytes, modification stamp) -> SHA-256


def stamp(path: str) -> tuple[int, int]:
    """``(bytes, modification time)`` of a file (nanoseconds locally, seconds in a bucket): what
    says, without reading it, that a file hashed earlier in this process is still the same."""
    if paths.is_url(path):
        stat = paths.as_path(path).stat()
        return int(stat.length), int(stat.mtime)
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def digest_once(path: str) -> tuple[int, str]:
    """``(bytes, SHA-256)`` of a file, streamed, hashed once per process while its size and
    modification time stay: a run checks many tasks that share files (a mixture's probe tasks,
    a month's SSM and LM tasks), and a rerun of the check costs one ``stat`` per file."""
    size, when = stamp(path)
    key = (path, size, when)
    if key not in _hashed:
        hashed_size, sha = digest(path)
        if hashed_size != size:  # changed while it was read: never remember that
            return hashed_size, sha
        _hashed[key] = sha
    return size, _hashed[key]


# --- files too big to hash at every read (a stage's dumps), fingerprinted by samples -----------

SAMPLED_ABOVE = 1 << 26  # 64 MiB: larger inputs are fingerprinted by samples, not hashed whole
_SAMPLES, _SAMPLE_BYTES = 16, 1 << 20
_sampled: dict[tuple[str, int, int], str] = {}


def sampled_digest(path: str) -> str:
    """SHA-256 of 16 blocks of 1 MiB spread evenly over the file, its first and last among them:
    what a stage records of a dump of tens of gigabytes, read again by every process that reads
    the stage's output. A dump replaced by another (another date, another wiki, a cut or a
    re-download that differs) differs in its size or in these blocks; a byte edited in place
    between them is not seen, which a whole hash would catch at minutes per read."""
    size, when = stamp(path)
    key = (path, size, when)
    if key not in _sampled:
        hashed = hashlib.sha256(str(size).encode())
        last = max(size - _SAMPLE_BYTES, 0)
        with paths.open_file(path, "rb") as handle:
            for offset in sorted({last * i // (_SAMPLES - 1) for i in range(_SAMPLES)}):
                handle.seek(offset)
                hashed.update(handle.read(_SAMPLE_BYTES))
        _sampled[key] = hashed.hexdigest()
    return _sampled[key]


def fingerprint(path: str, sample_above: int | None = None) -> dict[str, Any]:
    """``{"bytes", "sha256"}`` of a file, or ``{"bytes", "sampled_sha256"}``
    (:func:`sampled_digest`) where it is larger than ``sample_above``."""
    size, _ = stamp(path)
    if sample_above is not None and size > sample_above:
        return {"bytes": size, "sampled_sha256": sampled_digest(path)}
    size, sha = digest_once(path)
    return {"bytes": size, "sha256": sha}


def record_files(files: Iterable[str], root: str,
                 sample_above: int | None = None) -> dict[str, dict[str, Any]]:
    """:func:`record` of the files named, keyed relative to ``root`` (those outside it by their
    own path); files larger than ``sample_above`` by samples (:func:`fingerprint`)."""
    prefix = root.rstrip("/") + "/"
    return {path[len(prefix):] if path.startswith(prefix) else path:
            fingerprint(path, sample_above) for path in sorted(files)}


def differences(root: str, files: Mapping[str, Mapping[str, Any]], present: Iterable[str],
                since: str = "recorded") -> list[tuple[str, str]]:
    """Every ``(relative path, what differs)`` between the record ``files`` and the files
    ``present`` now (relative to ``root``): missing, new, resized, changed. Sizes are compared
    before any file is hashed, and only files of the recorded size are hashed
    (:func:`digest_once`, or :func:`sampled_digest` for a file recorded by samples)."""
    now = set(present)
    found = [(relative, "is missing") for relative in sorted(set(files) - now)]
    found += [(relative, "is new") for relative in sorted(now - set(files))]
    same_size = []
    for relative in sorted(now & set(files)):
        size, _ = stamp(paths.join(root, relative))
        if size != files[relative]["bytes"]:
            found.append((relative, f"has {size} bytes, {files[relative]['bytes']} were {since}"))
        else:
            same_size.append(relative)
    for relative in same_size:
        path, expected = paths.join(root, relative), files[relative]
        if "sampled_sha256" in expected:
            sha, recorded = sampled_digest(path), expected["sampled_sha256"]
        else:
            sha, recorded = digest_once(path)[1], expected["sha256"]
        if sha != recorded:
            found.append((relative, f"does not match its checksum (its bytes changed after it "
                                    f"was {since})"))
    return found


__all__ = ["SAMPLED_ABOVE", "differences", "digest", "digest_once", "files_below", "fingerprint",
           "problem", "record", "record_files", "sampled_digest", "stamp"]
