"""Open-book contexts for TemporalWiki probes: each probe with the passages retrieved for it
from its month's snapshot, so a reader can be scored with retrieval beside DIFF, K-Adapter,
LoRA and Mix-Review.

For a period ``P`` (``0809``, ``2024-12_2025-01``) and a retriever (``bm25``, ``dpr``: :mod:`tw_jax.retrieval`):

- the index holds every article of the new snapshot, ``DATA/P/diffset/full.jsonl``, cut into
  passages of at most ``chunk_words`` words (:mod:`tw_jax.retrieval.snapshot`), stored
  in ``DATA/P/probes_context/index/<retriever>/`` and reused while ``full.jsonl``, the
  retriever's settings and ``chunk_words`` are unchanged;
- each probe of ``DATA/P/probes/{unchanged,updated,new,deleted}.csv`` (those present) asks
  ``"{subject} {relation}"``, the fact without its object, and gets the top ``k`` passages;
- its ``context`` is those passages best first, each as ``"{title}: {text}"``, joined by spaces
  with whitespace runs collapsed, then cut to at most ``context_words`` words by dropping words
  from the END, so the lowest-ranked passage goes first and the best one is kept longest (the
  truncation rule of EvolvingQA's open-book inputs, :mod:`tw_jax.evaluate.open_book`, counted in
  words here because the reader and its tokenizer are not known yet);
- ``DATA/P/probes_<retriever>/{category}.csv`` holds the probe CSV's columns, in its order,
  plus ``context``, written as the Probes stage writes its CSVs (UTF-8, RFC 4180 quoting,
  ``\\n`` line ends; :func:`~tw_jax.preprocess.probes.probe_csv.read_probe_csv` reads them back
  with ``context``); ``stats.json``, written last, is the completion marker: the settings
  (retriever and its settings, ``k``, ``context_words``, ``chunk_words``, the index
  fingerprint) and per category ``rows``, ``answer_in_context`` (the share of rows whose
  context holds the object: SQuAD-normalised whole-word containment,
  :func:`tw_jax.retrieval.recall.has_answer`, DPR's top-k retrieval accuracy applied to
  the text a reader would read) and, for UPDATED, ``previous_in_context`` (the context holds a
  previous object, ``" | "``-separated in ``previous_object``) and ``made_from``, the size and
  SHA-256 of each probe CSV read (:func:`tw_jax.preprocess.runners.whole.made_from`): every
  reader of the folder (tasks, TFDS, evaluators, lm-eval export) refuses it once those CSVs
  change, naming the CSV and this command. An old ``stats.json`` is removed before anything
  is rewritten, so an interrupted rerun is never taken for a finished one.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, discard, write_json
from tw_jax.io.csv_reader import csv_rows
from tw_jax.preprocess.probes.categorise import CATEGORIES, UPDATED
from tw_jax.preprocess.probes.probe_csv import read_probe_csv
from tw_jax.preprocess.runners.accounting import STATS_FILE, require_complete
from tw_jax.preprocess.runners.whole import MADE_FROM, made_from
from tw_jax.retrieval.base import Passage, Retriever
from tw_jax.retrieval.index import MonthIndex, source_index
from tw_jax.retrieval.recall import has_answer
from tw_jax.retrieval.snapshot import DEFAULT_CHUNK_WORDS, snapshot_source
from tw_jax.time import Period

PROBES = "probes"
CONTEXT = "context"
PREVIOUS_SEPARATOR = " | "  # how the Probes stage joins several previous objects
DEFAULT_K = 5  # EvolvingQA's open-book default (tw_jax.evaluate.open_book.DEFAULT_K)
DEFAULT_CONTEXT_WORDS = 100
_PROBES_STAGE = "tw-jax probes"


@dataclass(frozen=True)
class ContextOptions:
    """How many passages each probe gets, how much of them is kept, how articles are cut."""

    k: int = DEFAULT_K
    context_words: int = DEFAULT_CONTEXT_WORDS
    chunk_words: int = DEFAULT_CHUNK_WORDS

    def __post_init__(self) -> None:
        for name in ("k", "context_words", "chunk_words"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


def output_dir(data: str, period: Period, retriever: str) -> str:
    """``DATA/<period>/probes_<retriever>``."""
    return paths.join(data, period.name, f"{PROBES}_{retriever}")


def probe_files(data: str, period: Period) -> dict[str, str]:
    """Category → ``DATA/<period>/probes/<category>.csv``, for the categories present; the
    folder must be a finished Probes stage output."""
    folder = paths.join(data, period.name, PROBES)
    if not paths.isdir(folder):
        raise DumpError(folder, None, f"no probes folder (run {_PROBES_STAGE})")
    require_complete(folder, _PROBES_STAGE)
    files = {c: paths.join(folder, f"{c}.csv") for c in CATEGORIES}
    found = {c: path for c, path in files.items() if paths.isfile(path)}
    if not found:
        raise DumpError(folder, None, f"no probe CSV ({', '.join(f'{c}.csv' for c in CATEGORIES)})")
    return found


def query(row: Mapping[str, str]) -> str:
    """What a probe asks the retriever: its subject and relation, not its object."""
    return f"{row['subject']} {row['relation']}"


def context_text(passages: Sequence[Passage], max_words: int) -> str:
    """``"{title}: {text}"`` of each passage (best first; a passage without a title: its text),
    joined by spaces, whitespace collapsed, the first ``max_words`` words kept."""
    words: list[str] = []
    for p in passages:
        title = p.title.strip()
        words += (f"{title}: {p.text}" if title else p.text).split()
    return " ".join(words[:max_words])


def previous_objects(row: Mapping[str, str]) -> list[str]:
    """The previous objects of an UPDATED probe (``" | "``-separated), blanks dropped."""
    return [p.strip() for p in row.get("previous_object", "").split(PREVIOUS_SEPARATOR)
            if p.strip()]


def csv_header(path: str) -> list[str]:
    """The column names of a CSV, as its first line gives them (``objective`` read as
    ``object``, as :func:`read_probe_csv` reads it)."""
    with paths.open_file(path, "r", encoding="utf-8", newline="") as handle:
        try:
            header = next(csv_rows(handle, path))[1]
        except StopIteration:
            raise DumpError(path, "line 1", "empty file: expected a CSV header") from None
    names = [c.strip() for c in header]
    if "object" not in names:
        names = ["object" if c == "objective" else c for c in names]
    return names


def csv_text(columns: Sequence[str], rows: Sequence[Mapping[str, str]]) -> str:
    """The whole CSV as the Probes stage writes one (``csv.writer``, ``\\n`` line ends)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([row.get(c, "") for c in columns])
    return buffer.getvalue()


def _rate(flags: Sequence[bool]) -> float | None:
    """A share of rows; None for no rows (a rate of nothing is not 0)."""
    return sum(flags) / len(flags) if flags else None


@dataclass(frozen=True)
class CategoryContexts:
    """One category's probes with their contexts, and how long the search took."""

    category: str
    columns: list[str]
    rows: list[dict[str, str]]  # the probe's columns plus ``context``
    passage_ids: list[list[str]]
    seconds: float

    def figures(self) -> dict[str, Any]:
        contexts = [row[CONTEXT] for row in self.rows]
        found: dict[str, Any] = {
            "rows": len(self.rows),
            "answer_in_context": _rate([has_answer(c, [r["object"]])
                                        for c, r in zip(contexts, self.rows, strict=True)])}
        if self.category == UPDATED:
            found["previous_in_context"] = _rate([
                has_answer(c, previous_objects(r))
                for c, r in zip(contexts, self.rows, strict=True)])
        found["search_seconds"] = round(self.seconds, 6)
        return found


def category_contexts(index: MonthIndex, category: str, path: str,
                      options: ContextOptions) -> CategoryContexts:
    """A probe CSV's rows, each with its context from ``index`` (see the module docstring)."""
    rows = read_probe_csv(path)
    columns = [c for c in csv_header(path) if c != CONTEXT] + [CONTEXT]
    start = time.perf_counter()
    hits = index.retriever.search([query(r) for r in rows], options.k) if rows else []
    seconds = time.perf_counter() - start
    out, ids = [], []
    for row, found in zip(rows, hits, strict=True):
        passages = [index.passages[i] for i, _ in found[: options.k]]
        out.append({**row, CONTEXT: context_text(passages, options.context_words)})
        ids.append([p.id for p in passages])
    return CategoryContexts(category, columns, out, ids, seconds)


def write_probe_contexts(data: str, period: Period, retriever: Retriever,
                         options: ContextOptions = ContextOptions(), *,
                         force_index: bool = False) -> dict[str, Any]:
    """Builds (or reuses) the period's index, writes every category's CSV with contexts and then
    ``stats.json``; returns what ``stats.json`` holds."""
    files = probe_files(data, period)
    index = source_index(snapshot_source(data, period.name, chunk_words=options.chunk_words),
                         retriever, force=force_index)
    out = output_dir(data, period, index.retriever.name)
    paths.makedirs(out)
    discard(paths.join(out, STATS_FILE))  # from here on the folder is not a finished output
    for category in CATEGORIES:
        if category not in files:  # an earlier run's file of a category that is gone now
            discard(paths.join(out, f"{category}.csv"))
    done = [category_contexts(index, c, path, options) for c, path in files.items()]
    for contexts in done:
        with atomic_open(paths.join(out, f"{contexts.category}.csv"), "w", encoding="utf-8",
                         newline="") as handle:
            handle.write(csv_text(contexts.columns, contexts.rows))
    questions = sum(len(c.rows) for c in done)
    seconds = sum(c.seconds for c in done)
    stats = {
        "month": period.name,
        "settings": {"retriever": index.retriever.name, "k": options.k,
                     "context_words": options.context_words,
                     "chunk_words": options.chunk_words,
                     "index_fingerprint": index.fingerprint,
                     "retriever_settings": index.retriever.settings()},
        "index": {"folder": index.folder, "passages": len(index.passages),
                  "reused": index.reused, "seconds": round(index.seconds, 3),
                  "verify_seconds": round(index.verify_seconds, 3)},
        "categories": {c.category: c.figures() for c in done},
        "files": {c.category: f"{c.category}.csv" for c in done},
        "questions": questions, "search_seconds": round(seconds, 6),
        "questions_per_second": round(questions / seconds, 3) if seconds > 0 else None,
        # the probe CSVs as they were read: a reader refuses the folder once they change
        MADE_FROM: made_from(out, beside=list(files.values())),
    }
    write_json(paths.join(out, STATS_FILE), stats)
    return {**stats, "out": out}


def summary_line(stats: Mapping[str, Any]) -> dict[str, Any]:
    """The last line's object: per category its figures (without timings), and the
    questions per second of the search."""
    line: dict[str, Any] = {
        category: {k: v for k, v in figures.items() if k != "search_seconds"}
        for category, figures in stats["categories"].items()}
    line["questions_per_second"] = stats["questions_per_second"]
    return line
