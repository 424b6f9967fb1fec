"""Retrieval for a month's EvolvingQA sets: search, answer recall@k, and the files the
open-book step reads (``tw-jax evolvingqa retrieve``).

Each set's questions are searched once against the month's index
(:func:`tw_jax.retrieval.index.month_index`); Unchanged and New are scored against their
answer, Edited twice, as ``edited_updated`` (the current answer, ``answer2``) and
``edited_outdated`` (the previous one, ``answer1``): an index of the current snapshot should
find the first and, where the revision replaced it, not the second. Recall is reported at 1, 5
and 20 (:mod:`.recall`); the search runs at least 20 deep whatever ``k`` the files keep.

Outputs, each written atomically: ``OUT/retrieved_<set>.jsonl`` (per question, in the CSV's
order: the question, its answer columns, the top-``k`` passage ids and scores) and
``OUT/retrieval.json`` last (recalls, counts, timings, the index used). An earlier run's report
(and files of sets not searched now) are removed first, so the folder holds one run's files
with its report, or no report.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, discard, write_json
from tw_jax.retrieval.index import MonthIndex
from tw_jax.retrieval.recall import KS, first_hit, recall_at

REPORT = "retrieval.json"
UNCHANGED, NEW, EDITED = "unchanged", "new", "edited"
SETS = (UNCHANGED, NEW, EDITED)
# Reported set → (QA set, answer column).
SCORED = {UNCHANGED: (UNCHANGED, "answer"), NEW: (NEW, "answer"),
          "edited_updated": (EDITED, "answer2"), "edited_outdated": (EDITED, "answer1")}


@dataclass(frozen=True)
class Searched:
    """One QA set's questions and what the index returned for each."""

    name: str
    rows: list[dict[str, str]]
    hits: list[list[tuple[int, float]]]
    seconds: float


def retrieved_file(name: str) -> str:
    return f"retrieved_{name}.jsonl"


def search_sets(index: MonthIndex, sets: Mapping[str, Sequence[dict[str, str]]],
                depth: int) -> list[Searched]:
    """Every set searched ``depth`` deep, timed one set at a time."""
    found = []
    for name, rows in sets.items():
        start = time.perf_counter()
        hits = index.retriever.search([r["question"] for r in rows], depth) if rows else []
        found.append(Searched(name, list(rows), hits, time.perf_counter() - start))
    return found


def score(index: MonthIndex, searched: Sequence[Searched],
          ks: Sequence[int] = KS) -> dict[str, dict[str, Any]]:
    """Reported set → ``answer_recall@k`` for each k and the number of questions."""
    by_name = {s.name: s for s in searched}
    texts = [p.text for p in index.passages]
    results: dict[str, dict[str, Any]] = {}
    for reported, (name, column) in SCORED.items():
        if name not in by_name:
            continue
        done = by_name[name]
        firsts = [first_hit([texts[i] for i, _ in hits[: max(ks)]], [row[column]])
                  for row, hits in zip(done.rows, done.hits, strict=True)]
        results[reported] = {**recall_at(firsts, ks), "questions": len(done.rows)}
    return results


def write_retrieved(out: str, index: MonthIndex, searched: Sequence[Searched], k: int) -> None:
    for done in searched:
        with atomic_open(paths.join(out, retrieved_file(done.name)), "w",
                         encoding="utf-8") as handle:
            for row, hits in zip(done.rows, done.hits, strict=True):
                top = hits[:k]
                handle.write(json.dumps({
                    **row, "passage_ids": [index.passages[i].id for i, _ in top],
                    "scores": [round(s, 6) for _, s in top]}, ensure_ascii=False) + "\n")


def retrieve_month(index: MonthIndex, sets: Mapping[str, Sequence[dict[str, str]]], k: int,
                   out: str, *, details: Mapping[str, Any] | None = None,
                   no_source: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Searches, scores and writes every set (see the module docstring); returns the report.

    ``no_source`` (QA set → count) is how many of a set's questions its generator dropped for
    want of a source article (``generate.json``); each reported set carries its count as
    ``no_source_article``, beside the recall of the questions that were kept."""
    # From here on OUT is not a finished retrieval: an earlier run's report must not stand
    # beside this run's files if it stops, nor files of sets this run has not searched.
    discard(paths.join(out, REPORT))
    for name in SETS:
        if name not in sets:
            discard(paths.join(out, retrieved_file(name)))
    searched = search_sets(index, sets, max(k, *KS))
    results = score(index, searched)
    write_retrieved(out, index, searched, k)
    questions = sum(len(s.rows) for s in searched)
    seconds = sum(s.seconds for s in searched)
    for name, figures in results.items():
        figures["seconds"] = round(next(s.seconds for s in searched if s.name == SCORED[name][0]),
                                   6)
        if no_source is not None and SCORED[name][0] in no_source:
            figures["no_source_article"] = no_source[SCORED[name][0]]
    report = {
        **(details or {}),
        "month": index.pair, "retriever": index.retriever.name,
        "settings": index.retriever.settings(), "k": k,
        "index": {"folder": index.folder, "fingerprint": index.fingerprint,
                  "passages": len(index.passages), "reused": index.reused,
                  "seconds": round(index.seconds, 3),
                  "verify_seconds": round(index.verify_seconds, 3)},
        "sets": results, "files": {s.name: retrieved_file(s.name) for s in searched},
        "questions": questions, "search_seconds": round(seconds, 6),
        "questions_per_second": round(questions / seconds, 3) if seconds > 0 else None,
    }
    write_json(paths.join(out, REPORT), report)
    return report


def summary_line(report: Mapping[str, Any]) -> str:
    """The one JSON line a script reads: recalls per reported set, and questions per second."""
    line: dict[str, Any] = {
        name: {key: value for key, value in figures.items() if key.startswith("answer_recall@")}
        for name, figures in report["sets"].items()}
    line["questions_per_second"] = report["questions_per_second"]
    return json.dumps(line)
