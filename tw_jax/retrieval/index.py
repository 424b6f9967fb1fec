"""Month-aware indexes: one per month pair and retriever, stored beside the month's passages.

For month pair ``MMMM`` (old month → new month) the index holds the passages of the new
snapshot as ``tw-jax evolvingqa build`` wrote them (:mod:`tw_jax.preprocess.evolvingqa.layout`):

- ``DATA/evolvingqa/unchanged.jsonl``: the Unchanged passages (the same text in every snapshot
  of the window), ids ``unchanged/<file id>``;
- ``DATA/MMMM/evolvingqa/new.jsonl``: the New passages of the pair, ids ``new/<file id>``;
- ``DATA/MMMM/evolvingqa/edited.jsonl``: the current side (``new_text``) of each Edited revision,
  the text the updated answer was written from, ids ``edited/<file id>``.

so a question is answered from what the world says at that month, and an Edited question finds
the updated fact, not the outdated one. The index lives in ``DATA/MMMM/evolvingqa/index/<name>/``:
the retriever's own files, ``passages.jsonl`` (id, title, text in index order: what a position
returned by a search means, and what the open-book reader will read) and ``index.json``, the
completion marker, written last. The marker holds a fingerprint of the inputs (each passage
file's size and SHA-256, whatever its modification time: hashed streamed, once per process,
:func:`tw_jax.io.manifest.digest_once`) and of the retriever's settings and model
(:meth:`Retriever.fingerprint`: BM25's parameters, DPR's encoder weights and tokenizers); a
later call with the same fingerprint loads the stored index, any change rebuilds it with one
warning line naming what changed (``DIR: built from other data or settings (DATA/0809/
diffset/full.jsonl does not match its checksum (its bytes changed after it was indexed));
rebuilding the index``): every command that reads an index builds it. The marker
also records the size and SHA-256 of every index file and the passage count: before a stored
index is reused its files are checked against them (every size first, then the hashes,
streamed; the time it took is the index's ``verify_seconds``), and the retriever's own count
against the passages'. A file moved, cut, replaced or shifted is one warning line and a
rebuild; an index whose files pass but cannot be read is an error naming the file and the flag
that rebuilds it. Every file is written atomically and the old marker removed before a rebuild
starts, so an interrupted build is never taken for a finished one. ``DATA`` may be local or
``gs://``.

The machinery (fingerprint, marker, reuse, rebuild) is the same for any :class:`PassageSource`:
what files the passages come from, how they are read and cut, and where the index lives.
:func:`evolvingqa_source` is the one above; :mod:`tw_jax.retrieval.snapshot` makes the
TemporalWiki one (every article of a month's snapshot, cut into passages) and
:func:`source_index` serves both.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import jsonl, manifest, paths
from tw_jax.io.atomic import atomic_open, discard, write_json
from tw_jax.preprocess.evolvingqa import layout
from tw_jax.preprocess.runners.accounting import require_complete
from tw_jax.retrieval.base import Passage, Retriever

log = logging.getLogger(__name__)

FORMAT = 1
INDEX = "index"
MARKER = "index.json"
PASSAGES = "passages.jsonl"
UNCHANGED, NEW, EDITED = "unchanged", "new", "edited"
_TEXT_FIELD = {UNCHANGED: "text", NEW: "text", EDITED: "new_text"}
_BUILD = "tw-jax evolvingqa build"


@dataclass(frozen=True)
class MonthIndex:
    """A month's index, ready to search: ``passages[i]`` is what position ``i`` means."""

    pair: str
    folder: str
    retriever: Retriever
    passages: list[Passage]
    fingerprint: str
    reused: bool
    seconds: float  # building (or loading) it
    verify_seconds: float = 0.0  # checking a stored index's files before reusing it


@dataclass(frozen=True)
class PassageSource:
    """Where a month's passages come from and where their index is stored.

    ``files`` (kind → file) are fingerprinted by size and SHA-256, ``settings`` (how the files
    are cut into passages, JSON values) with them, so a change of either rebuilds the index;
    ``read`` returns the passages in index order; the index of retriever ``name`` lives in
    ``root/<name>``; the marker counts the passages of each of ``kinds`` (ids ``<kind>/…``)."""

    pair: str
    root: str
    files: Mapping[str, str]
    read: Callable[[], list[Passage]]
    settings: Mapping[str, Any] = field(default_factory=dict)
    kinds: tuple[str, ...] = ()

    def folder(self, name: str) -> str:
        return paths.join(self.root, name)


def passage_files(data: str, pair: str) -> dict[str, str]:
    """Kind → the file its passages come from, each checked to be a finished build output."""
    window, month = layout.window_dir(data), layout.extraction_dir(data, pair)
    require_complete(window, _BUILD)
    require_complete(month, _BUILD)
    files = {UNCHANGED: paths.join(window, layout.UNCHANGED_PASSAGES),
             NEW: paths.join(month, layout.NEW_PASSAGES),
             EDITED: paths.join(month, layout.EDITED_PAIRS)}
    for path in files.values():
        if not paths.isfile(path):
            raise DumpError(path, None, f"missing (run {_BUILD})")
    return files


def file_digest(path: str) -> dict[str, Any]:
    """Size and SHA-256 of a file, streamed, hashed once per process while its size and
    modification time stay (:func:`tw_jax.io.manifest.digest_once`)."""
    size, sha = manifest.digest_once(path)
    return {"size": size, "sha256": sha}


def input_fingerprint(files: Mapping[str, str], retriever: Retriever,
                      settings: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """(fingerprint, what it hashes): the passage files' sizes and hashes (by kind, so a moved
    data folder keeps its index), the retriever's own fingerprint and, when given, the settings
    that cut the files into passages (absent for EvolvingQA, whose fingerprints stay as
    before)."""
    inputs: dict[str, Any] = {
        "format": FORMAT, "retriever": retriever.name,
        "retriever_fingerprint": retriever.fingerprint(),
        "files": {kind: file_digest(path) for kind, path in sorted(files.items())}}
    if settings:
        inputs["passage_settings"] = dict(settings)
    text = json.dumps(inputs, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest(), inputs


def read_passages(files: dict[str, str]) -> list[Passage]:
    """The snapshot's passages in a fixed order (Unchanged, New, Edited; file order within)."""
    found: list[Passage] = []
    seen: dict[str, str] = {}
    for kind in (UNCHANGED, NEW, EDITED):
        path, field = files[kind], _TEXT_FIELD[kind]
        for number, record in enumerate(jsonl.records(path, ("id", "title", field)), start=1):
            text, title = record[field], record["title"]
            if not isinstance(text, str) or not isinstance(title, str):
                raise DumpError(path, f"record {number}", f"{field} and title must be strings")
            passage = Passage(f"{kind}/{record['id']}", title, text)
            if passage.id in seen:
                raise DumpError(path, f"record {number}",
                                f"id {record['id']!r} repeats (first in {seen[passage.id]})")
            seen[passage.id] = path
            found.append(passage)
    return found


def _marker(folder: str) -> dict[str, Any] | None:
    """The completion marker of a stored index; None: there is none (an unreadable one reads
    as an empty one, rebuilt like a stale one)."""
    marker = paths.join(folder, MARKER)
    if not paths.isfile(marker):
        return None
    try:
        stored = json.loads(paths.read_text(marker))
    except json.JSONDecodeError:
        return {}
    return stored if isinstance(stored, dict) else {}


def input_changes(marker: Mapping[str, Any], inputs: Mapping[str, Any],
                  files: Mapping[str, str], retriever: Retriever) -> list[str]:
    """What differs between the inputs a stored index was built from (its marker) and
    ``inputs`` now, in words: a passage file resized or changed (by its SHA-256, whatever its
    modification time), added or no longer read, the retriever's settings or model, how the
    files are cut into passages."""
    was = marker.get("inputs")
    if not isinstance(was, dict):
        return [f"{MARKER} is unreadable or records no inputs"]
    found = []
    if was.get("format") != inputs["format"]:
        found.append(f"index format {was.get('format')} → {inputs['format']}")
    if was.get("retriever_fingerprint") != inputs["retriever_fingerprint"]:
        found += _retriever_changes(marker.get("retriever_settings"), retriever)
    before, now = was.get("files") or {}, inputs["files"]
    for kind in sorted(set(before) | set(now)):
        path = files.get(kind, kind)
        old, new = before.get(kind) or {}, now.get(kind)
        if new is None:
            found.append(f"{kind} passages are no longer read")
        elif not old:
            found.append(f"{path} is new")
        elif old.get("size") != new["size"]:
            found.append(f"{path} has {new['size']} bytes, {old.get('size')} were indexed")
        elif old.get("sha256") != new["sha256"]:
            found.append(f"{path} does not match its checksum (its bytes changed after it was "
                         "indexed)")
    old_cut, new_cut = was.get("passage_settings") or {}, inputs.get("passage_settings") or {}
    found += [f"{key} {old_cut.get(key)!r} → {new_cut.get(key)!r}"
              for key in sorted(set(old_cut) | set(new_cut))
              if old_cut.get(key) != new_cut.get(key)]
    return found or ["its fingerprint differs"]


def _retriever_changes(recorded: Any, retriever: Retriever) -> list[str]:
    """The retriever settings that changed, by name where the marker recorded them (markers
    from before ``retriever_settings`` name none)."""
    if not isinstance(recorded, dict):
        return [f"the {retriever.name} settings or model"]
    now = json.loads(json.dumps(retriever.settings()))  # as the marker holds them
    found = [f"{retriever.name} {key} {_short(recorded.get(key))} → {_short(now.get(key))}"
             for key in sorted(set(recorded) | set(now)) if recorded.get(key) != now.get(key)]
    return found or [f"the {retriever.name} model"]


def _short(value: Any) -> str:
    """A setting as the warning shows it: a long hash cut to 12 characters."""
    return repr(value[:12] + "…") if isinstance(value, str) and len(value) > 16 else repr(value)


def _first(found: Sequence[str], shown: int = 3) -> str:
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    return ", ".join(found[:shown]) + more


def _write_passages(folder: str, passages: Sequence[Passage]) -> None:
    with atomic_open(paths.join(folder, PASSAGES), "w", encoding="utf-8") as handle:
        for p in passages:
            handle.write(json.dumps({"id": p.id, "title": p.title, "text": p.text},
                                    ensure_ascii=False) + "\n")


def load_passages(folder: str) -> list[Passage]:
    """The passages of a stored index, in index order."""
    path = paths.join(folder, PASSAGES)
    return [Passage(str(r["id"]), str(r["title"]), str(r["text"]))
            for r in jsonl.records(path, ("id", "title", "text"))]


def evolvingqa_source(data: str, pair: str) -> PassageSource:
    """EvolvingQA's passages of month pair ``pair`` (see the module docstring)."""
    files = passage_files(data, pair)
    return PassageSource(pair, paths.join(layout.extraction_dir(data, pair), INDEX), files,
                         lambda: read_passages(files), kinds=(UNCHANGED, NEW, EDITED))


def source_index(source: PassageSource, retriever: Retriever, *,
                 force: bool = False) -> MonthIndex:
    """The index of ``source``'s passages for ``retriever``'s kind and settings: loaded when the
    stored one was built from the same inputs, else built from the passages and stored."""
    start = time.perf_counter()
    fingerprint, inputs = input_fingerprint(source.files, retriever, source.settings)
    folder = source.folder(retriever.name)
    marker = None if force else _marker(folder)
    stored = marker if marker is not None and marker.get("fingerprint") == fingerprint else None
    if marker is not None and stored is None:
        changed = input_changes(marker, inputs, source.files, retriever)
        log.warning("%s: built from other data or settings (%s); rebuilding the index", folder,
                    _first(changed))
    verified = time.perf_counter()
    damage = None if stored is None else _damage(folder, stored)
    verify_seconds = time.perf_counter() - verified
    if damage:
        log.warning("%s: %s; rebuilding the index", folder, damage)
    elif stored is not None:
        loaded, passages = _load(folder, retriever)
        counts = {len(passages), stored.get("passages"), loaded.num_passages or len(passages)}
        if len(counts) != 1:
            raise DumpError(paths.join(folder, PASSAGES), None,
                            f"{len(passages)} passages, the marker says {stored.get('passages')} "
                            f"and the {retriever.name} index holds {loaded.num_passages}; "
                            f"{_REBUILD}")
        return MonthIndex(source.pair, folder, loaded, passages, fingerprint, True,
                          time.perf_counter() - start, verify_seconds)
    discard(paths.join(folder, MARKER))  # from here on the folder is not a finished index
    passages = source.read()
    retriever.build(passages)
    retriever.save(folder)
    _write_passages(folder, passages)
    seconds = time.perf_counter() - start
    done: dict[str, Any] = {"fingerprint": fingerprint, "inputs": inputs, "pair": source.pair,
                            "retriever_settings": retriever.settings(),
                            "passages": len(passages), "indexed": retriever.num_passages,
                            "files": manifest.record(folder, {MARKER})}
    if source.kinds:
        done["kinds"] = {kind: sum(p.id.startswith(f"{kind}/") for p in passages)
                           for kind in source.kinds}
    done["build_seconds"] = round(seconds, 3)
    write_json(paths.join(folder, MARKER), done)
    return MonthIndex(source.pair, folder, retriever, passages, fingerprint, False, seconds)


_REBUILD = ("rebuild it with --rebuild (tw-jax probe-contexts, evolvingqa retrieve, "
            "evolvingqa eval)")


def _damage(folder: str, stored: Mapping[str, Any]) -> str | None:
    """Why a stored index's files cannot be trusted (missing, resized or changed since the
    build), or None."""
    files = stored.get("files")
    if not isinstance(files, dict):
        return f"{MARKER} records no index files (built by an older tw_jax)"
    return manifest.problem(folder, files, since="built")


def _load(folder: str, retriever: Retriever) -> tuple[Retriever, list[Passage]]:
    """A stored index and its passages; what cannot be read is one error naming the file."""
    try:
        return type(retriever).load(folder), load_passages(folder)
    except DumpError as error:
        raise DumpError(error.path, error.record, f"{error.message}; {_REBUILD}") from None
    except (OSError, ValueError, KeyError, IndexError) as error:
        raise DumpError(folder, None, f"stored index cannot be read ({error}); {_REBUILD}") from None


def month_index(data: str, pair: str, retriever: Retriever, *, force: bool = False) -> MonthIndex:
    """The EvolvingQA index of month pair ``pair`` (:func:`evolvingqa_source`,
    :func:`source_index`)."""
    return source_index(evolvingqa_source(data, pair), retriever, force=force)
