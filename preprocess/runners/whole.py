"""Whole or nothing: a stage's files are read only as the stage wrote them.

A stage writes its ``stats.json`` last and records in it how many records each of its files
holds (:func:`recorded_counts`); its TFRecords are shard sets whose names carry their count
(``diffset.tfrecord-00001-of-00003``). A reader that takes a stage's files (the SeqIO sources,
the TFDS builders, the evaluators) goes through :func:`check_shard_set` or
:func:`read_stage_probes`, so a shard deleted from a set, a CSV cut or replaced after the stage,
or a folder whose stage never finished is one line naming the file, never a smaller dataset.
It also records what it was made from (:func:`made_from`: the dumps and the DiffSet files it
read), and a folder whose inputs have other bytes now is stale (:func:`check_made_from`), to
every reader and to ``tw-jax build``, which rebuilds it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.atomic import write_json
from tw_jax.io.manifest import (
    SAMPLED_ABOVE,
    differences,
    files_below,
    fingerprint,
    record_files,
)
from tw_jax.io.tfrecord import count_records
from tw_jax.preprocess.runners.accounting import STATS_FILE

_SHARD = re.compile(r"-(\d+)-of-(\d+)$")
# Which command writes a stage's folder, by the folder's name.
_WRITERS = {"diffset": "tw-jax diffset", "full": "tw-jax diffset", "ssm": "tw-jax ssm",
            "probes": "tw-jax probes"}
_OPEN_BOOK = "tw-jax probe-contexts"  # writes DATA/<period>/probes_<retriever>/
MADE_FROM = "made_from"  # stats.json: {"files": {path below the folder's parent: bytes, sha256}}


def writer_of(folder: str) -> str:
    """The command that writes ``folder`` (``DATA/<period>/ssm`` → ``tw-jax ssm``)."""
    name = os.path.basename(folder.rstrip("/"))
    if name.startswith("probes_"):
        return _OPEN_BOOK
    return _WRITERS.get(name, "the stage that wrote it")


def input_files(inputs: Sequence[str]) -> list[str]:
    """The files of a stage's inputs (a dump may be a folder of files: every file below it)."""
    found = []
    for path in inputs:
        if paths.isdir(path):
            found += [paths.join(path, relative) for relative in files_below(path)]
        else:
            found.append(path)
    return found


def made_from(folder: str, *, beside: Sequence[str] = (),
              dumps: Sequence[str] = ()) -> dict[str, dict[str, dict[str, object]]]:
    """What a stage's ``stats.json`` records of its inputs: size and SHA-256, by samples for a
    file over 64 MiB (:func:`tw_jax.io.manifest.sampled_digest`). Files ``beside`` the folder
    (in a sibling folder: ``DATA/P/diffset/full.jsonl`` for ``DATA/P/ssm``) are keyed below the
    folder's parent (``diffset/full.jsonl``), so a data folder can move; ``dumps`` (files or
    folders of files read from wherever they are) by their own paths."""
    resolved = [paths.resolve(f) for f in input_files(dumps)]
    return {"files": {
        **record_files([paths.resolve(f) for f in beside], paths.parent(paths.resolve(folder)),
                       sample_above=SAMPLED_ABOVE),
        **{path: fingerprint(path, SAMPLED_ABOVE) for path in resolved}}}


def record_made_from(folder: str, made: Mapping[str, object],
                     stats: Mapping[str, Any]) -> dict[str, Any]:
    """Adds ``made`` (:func:`made_from`, taken before the stage read its inputs) to the finished
    stage's ``stats.json``; ``stats`` (what the stage returned) with it. Written in place
    atomically: a crash before it leaves the stage's own ``stats.json``, which is read as
    written before stages recorded their inputs (counts checked, inputs not)."""
    stats_path = paths.join(folder, STATS_FILE)
    written = json.loads(paths.read_text(stats_path))
    write_json(stats_path, {**written, MADE_FROM: dict(made)})
    return {**stats, MADE_FROM: dict(made)}


def _input_path(root: str, key: str) -> str:
    return key if paths.is_url(key) or os.path.isabs(key) else paths.join(root, key)


def made_from_problem(folder: str, stats: Mapping[str, object]) -> str | None:
    """Why the folder is stale (an input it records has other bytes now), or None. An input no
    longer there is not a difference: dumps are deleted once a build is done and data folders
    move to other machines; what the folder holds is still what its stage made. Sizes first; a
    file is hashed once per process while its size and modification time stay."""
    record = stats.get(MADE_FROM)
    if not isinstance(record, Mapping) or not isinstance(record.get("files"), Mapping):
        return None  # written before stages recorded their inputs: counts are all there is
    root = paths.parent(folder)
    files = {key: value for key, value in record["files"].items()
             if paths.exists(_input_path(root, key))}
    by_path = {_input_path(root, key): value for key, value in files.items()}
    changed = differences("", by_path, list(by_path), since=f"recorded by {writer_of(folder)}")
    if not changed:
        return None
    path, what = changed[0]
    return f"it was made from {path}, which {what}"


def check_made_from(folder: str, stats: Mapping[str, object]) -> None:
    """A stage folder whose inputs changed after it was written is stale: one line naming the
    input and the command that rebuilds the folder (:func:`made_from_problem`)."""
    problem = made_from_problem(folder, stats)
    if problem:
        raise DumpError(folder, None, f"is stale: {problem}; run {rebuild_command(folder)}")


def complete_shards(files: Sequence[str], pattern: str) -> list[str]:
    """``files`` (the matches of ``pattern``), sorted, when they are whole shard sets: for each
    name, every member ``-00000-of-N`` … ``-(N-1)-of-N`` of one N; else a :class:`DumpError`
    naming the first member missing."""
    sets: dict[str, tuple[set[int], set[int]]] = {}  # prefix → (its counts N, its indices)
    for path in files:
        match = _SHARD.search(path)
        if match is None:
            raise DumpError(path, None, f"matches {pattern} but is not a shard of a set "
                                        "(…-00000-of-00001)")
        counts, indices = sets.setdefault(path[:match.start()], (set(), set()))
        counts.add(int(match.group(2)))
        indices.add(int(match.group(1)))
    for prefix, (counts, indices) in sets.items():
        if len(counts) > 1:
            raise DumpError(f"{prefix}-*", None, f"holds shards of {len(counts)} sets (-of-"
                            f"{', -of-'.join(str(c) for c in sorted(counts))}): an old run's "
                            "shards were left beside a new one's; rebuild the folder")
        (count,) = counts
        missing = sorted(set(range(count)) - indices)
        if missing:
            raise DumpError(f"{prefix}-{missing[0]:05d}-of-{count:05d}", None,
                            f"is missing ({len(missing)} of the set's {count} shards): the "
                            "set is not whole; rebuild the folder")
    return sorted(files)


def rebuild_command(folder: str) -> str:
    """The command line that writes ``folder`` again."""
    name = os.path.basename(folder.rstrip("/"))
    if name.startswith("probes_"):
        period = paths.parent(folder)
        return (f"{_OPEN_BOOK} --data {paths.parent(period)} --month "
                f"{os.path.basename(period.rstrip('/'))} --retriever {name[len('probes_'):]}")
    return f"{writer_of(folder)} again (or tw-jax build on the dumps: it rebuilds stale stages)"


def recorded_counts(folder: str) -> dict[str, int]:
    """``{file stem: records}`` that the folder's ``stats.json`` records: a DiffSet folder's
    ``diffset``/``full``/``unchanged``, an SSM folder's inputs, a probes folder's categories and
    light-tuning sets. A folder without ``stats.json`` is an error: its stage did not finish."""
    stats_path = paths.join(folder, STATS_FILE)
    if not paths.isfile(stats_path):
        raise DumpError(folder, None, f"has no {STATS_FILE}: the stage that writes it "
                                      f"({writer_of(folder)}) did not finish; run it again")
    try:
        stats = json.loads(paths.read_text(stats_path))
    except (ValueError, UnicodeDecodeError) as error:
        raise DumpError(stats_path, None, f"is not JSON ({error})") from None
    check_made_from(folder, stats)
    counts: dict[str, int] = {}
    if writer_of(folder) == _OPEN_BOOK and isinstance(stats.get("categories"), dict):
        counts |= {c: v["rows"] for c, v in stats["categories"].items()
                   if isinstance(v, dict) and isinstance(v.get("rows"), int)}
    elif isinstance(stats.get("categories"), dict):  # tw-jax probes
        counts |= {c: v["final"] for c, v in stats["categories"].items()
                   if isinstance(v, dict) and "final" in v}
        counts |= {f"lighttuning_{c}": n for c, n in stats.get("lighttuning", {}).items()}
    elif isinstance(stats.get("inputs"), list):  # tw-jax ssm
        counts |= {name: stats[name]["examples"] for name in stats["inputs"]
                   if isinstance(stats.get(name), dict)}
    else:  # tw-jax diffset
        counts |= {name: stats[name]["articles"] for name in ("diffset", "full", "unchanged")
                   if isinstance(stats.get(name), dict) and "articles" in stats[name]}
    return counts


def check_count(path: str, found: int, counts: dict[str, int]) -> None:
    """``found`` records in ``path`` against what its folder's ``stats.json`` records."""
    stem = os.path.basename(path).split(".", 1)[0]
    if stem in counts and counts[stem] != found:
        folder = paths.parent(path)
        raise DumpError(path, None, f"holds {found} records where {paths.join(folder, STATS_FILE)}"
                                    f" records {counts[stem]}: the folder was changed or cut "
                                    f"after {writer_of(folder)} wrote it; rebuild it")


_checked: dict[tuple[str, ...], list[str]] = {}


def check_shard_set(pattern: str) -> list[str]:
    """The shards of a stage's ``pattern`` (``DATA/0809/ssm/diffset.tfrecord-*-of-*``) when they
    are whole: every member there, the stage finished, and as many records as its
    ``stats.json`` records (counted from the records' headers; once per process for the same
    files and sizes)."""
    files = complete_shards(paths.glob(pattern), pattern)
    if not files:
        return files
    key = (pattern, *(f"{f}:{paths.size(f)}" for f in files))
    if key not in _checked:
        counts = recorded_counts(paths.parent(files[0]))
        try:
            found = sum(count_records(f) for f in files)
        except ValueError as error:  # a shard cut inside a record, or a damaged length
            path, _, why = str(error).partition(": ")
            raise DumpError(path, None, f"{why}: the shard was cut or damaged after the stage "
                                        "wrote it; rebuild the folder") from None
        check_count(files[0], found, counts)
        _checked[key] = files
    return list(_checked[key])
