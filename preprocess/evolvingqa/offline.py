"""QA generation without an LLM: questions from the Wikidata probes (``tw-jax probes``).

The paper writes its questions with GPT-3.5 from passages. Offline, the facts the TWiki-Probes
stage already aligned with Wikipedia give questions whose answers are known exactly, through the
relation question templates of :mod:`.questions`:

- Unchanged: the UNCHANGED facts of every month pair of the window (a fact must be UNCHANGED in
  each pair's ``unchanged.csv``, as an Unchanged article must be unchanged in every snapshot),
  question → object;
- New (per pair): NEW facts, question → object;
- Edited (per pair): UPDATED facts, question → previous object (``answer1``, outdated; the first
  when there were several) and object (``answer2``, updated). Rows without a previous object or
  whose previous object equals the new one after normalisation are dropped and counted.

Given the build folder (``build=``), a set's questions come from that set's articles only
(:mod:`.sources`): a NEW fact whose subject is not one of the pair's New articles, or an UPDATED
fact whose subject is not one of its Edited pairs, has no passage to answer it and is dropped;
each set's count says how many (``no_source_article``). Without a build there are no articles to
check against, and every probe becomes a question (``sources_checked`` is false).

The probes folder is a TemporalWiki data folder (``<MMMM>/probes/{unchanged,new,updated}.csv``);
the sets are written as :mod:`.qa_csv` writes every generator's. Both folders may be local or
``gs://`` URLs (read through :mod:`tw_jax.io.paths`, not TensorFlow's file system, which cannot
be pointed at a storage emulator).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.preprocess.evolvingqa import layout
from tw_jax.preprocess.evolvingqa.filters import same_answer
from tw_jax.preprocess.evolvingqa.qa_csv import PAPER_FINETUNE_FRACTION, QA, write_qa_sets
from tw_jax.preprocess.evolvingqa.questions import question
from tw_jax.preprocess.evolvingqa.sources import (
    NO_SOURCE,
    PairSources,
    kept_by_source,
    pair_sources,
)
from tw_jax.preprocess.probes.probe_csv import read_probe_csv
from tw_jax.preprocess.runners.accounting import require_complete
from tw_jax.time import period_named

PREVIOUS_SEPARATOR = " | "


def probe_pairs(probes: str | os.PathLike[str]) -> list[str]:
    """The month pairs (periods) of a data folder that have a ``<period>/probes`` folder, in
    date order."""
    if not paths.isdir(probes):
        return []
    found = [name for name in paths.listdir(probes)
             if layout.is_pair(name) and paths.isdir(paths.join(probes, name, "probes"))]
    return sorted(found, key=period_named)


def _read(probes: str, pair: str, category: str) -> list[dict[str, str]]:
    path = paths.join(probes, pair, "probes", f"{category}.csv")
    if not paths.exists(path):
        raise DumpError(path, None, f"no {category} probes for {pair} (run tw-jax probes)")
    return read_probe_csv(path)


def _qa(row: dict[str, str], tally: Counter, answer2: str | None = None,
        source: str = "") -> QA:
    text, kind = question(row["subject"], row["relation"])
    tally[kind] += 1
    if answer2 is None:
        return QA(text, row["object"], source=source)
    return QA(text, answer2, row["object"], source=source)


def _sourced(rows: list[dict[str, str]], titles: frozenset[str] | None,
             dropped: dict[str, int], name: str) -> list[tuple[int, dict[str, str]]]:
    """The numbered rows of set ``name`` whose subject is one of ``titles`` (all rows when no
    build is checked against), the others counted in ``dropped``."""
    if titles is None:
        return list(enumerate(rows))
    kept, dropped[name] = kept_by_source(rows, titles)
    return kept


def generate_offline(
    probes: str | os.PathLike[str],
    pairs: list[str],
    qa_dir: str | os.PathLike[str],
    *,
    build: str | os.PathLike[str] | None = None,
    finetune_fraction: float = PAPER_FINETUNE_FRACTION,
    seed: int = 0,
) -> dict[str, Any]:
    """Writes the QA sets of ``pairs`` from the probes under ``probes``, New and Edited ones
    kept to the articles of the build folder ``build`` when given; returns the summary."""
    if not pairs:
        raise ValueError("no month pairs to generate questions for")
    probes = os.fspath(probes)
    for pair in pairs:  # an interrupted probes run leaves some CSVs and no stats.json
        require_complete(paths.join(probes, pair, "probes"), "tw-jax probes")
    sources: dict[str, PairSources] = {} if build is None else {
        pair: pair_sources(build, pair) for pair in pairs}
    templates: Counter = Counter()
    skipped: Counter = Counter()
    dropped: dict[str, int] = {}
    facts = [_read(probes, pair, "unchanged") for pair in pairs]
    keys = [{(r["subject"], r["relation"], r["object"]) for r in rows} for rows in facts[1:]]
    unchanged = [
        _qa(row, templates, source=f"{pairs[0]}/unchanged/{i}")
        for i, row in enumerate(facts[0])
        if all((row["subject"], row["relation"], row["object"]) in k for k in keys)
    ]
    new: dict[str, list[QA]] = {}
    edited: dict[str, list[QA]] = {}
    for pair in pairs:
        articles = sources.get(pair)
        new[pair] = [_qa(r, templates, source=f"{pair}/new/{i}") for i, r in _sourced(
            _read(probes, pair, "new"), articles and articles.new, dropped, f"new_{pair}")]
        edited[pair] = []
        for i, row in _sourced(_read(probes, pair, "updated"), articles and articles.edited,
                               dropped, f"edited_{pair}"):
            previous = [p.strip() for p in row["previous_object"].split(PREVIOUS_SEPARATOR)]
            previous = [p for p in previous if p]
            if not previous:
                skipped["no_previous_object"] += 1
            elif same_answer(previous[0], row["object"]):
                skipped["same_answer"] += 1
            else:
                edited[pair].append(_qa(row, templates, previous[0], f"{pair}/updated/{i}"))
    details = {"generator": "offline", "probes": probes, "pairs": pairs,
               "templates": dict(sorted(templates.items())), "skipped": dict(sorted(skipped.items())),
               "sources_checked": build is not None,
               "build": None if build is None else os.fspath(build)}
    return write_qa_sets(qa_dir, unchanged, new, edited, finetune_fraction=finetune_fraction,
                         seed=seed, details=details, set_figures={
                             name: {NO_SOURCE: count} for name, count in dropped.items()})
