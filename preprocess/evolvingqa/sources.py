"""Which build articles a month pair's New and Edited questions may come from.

An EvolvingQA set is defined by its articles: New questions ask about the pair's New articles
(``<MMMM>/evolvingqa/new.jsonl``), Edited questions about its Edited pairs (``edited.jsonl``),
and retrieval for them searches the passages of exactly those articles. Offline generation
(:mod:`.offline`) writes questions from Wikidata probes instead, whose subjects need not be
among those articles (with the 500-character filter a month may have no Edited pair at all);
such a question has no passage to answer it, so it is dropped and counted per set
(``no_source_article`` in ``generate.json``'s set counts, one line each on stdout).

A probe names its subject's English article by title (the sitelink the Probes stage resolved),
so a question's source is found by title, both sides normalised as MediaWiki stores titles
(:func:`tw_jax.preprocess.probes.articles.normalise_title`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from tw_jax.io import jsonl, paths
from tw_jax.preprocess.evolvingqa import layout
from tw_jax.preprocess.evolvingqa.qa_csv import GENERATE_FILE
from tw_jax.preprocess.probes.articles import normalise_title
from tw_jax.preprocess.runners.accounting import require_complete

NO_SOURCE = "no_source_article"  # the set count of questions dropped for want of an article
# Set kind → why its dropped questions were dropped (the generate command's line).
REASONS = {"new": "their subject is not one of {pair}'s New articles, so no passage answers "
                  "them",
           "edited": "their subject is not one of {pair}'s Edited pairs, so no passage "
                     "answers them"}


@dataclass(frozen=True)
class PairSources:
    """The normalised titles of one month pair's New articles and Edited pairs."""

    new: frozenset[str]
    edited: frozenset[str]


def _titles(path: str) -> frozenset[str]:
    titles = (normalise_title(r["title"]) for r in jsonl.records(path, ("title",)))
    return frozenset(t for t in titles if t is not None)


def pair_sources(data: str | os.PathLike[str], pair: str) -> PairSources:
    """The titles of a complete extraction folder of the build ``data`` (refused when the build
    stopped before its ``stats.json``: its lists would be cut short)."""
    folder = layout.extraction_dir(data, pair)
    require_complete(folder, "tw-jax evolvingqa build")
    return PairSources(new=_titles(paths.join(folder, layout.NEW_PASSAGES)),
                       edited=_titles(paths.join(folder, layout.EDITED_PAIRS)))


def has_source(subject: str, titles: frozenset[str]) -> bool:
    """Whether a probe's subject names one of ``titles``."""
    return normalise_title(subject) in titles


def dropped_line(name: str, count: int) -> str:
    """The line the generate command prints for a set that lost ``count`` questions:
    ``new_0809: 10 questions dropped: their subject is not one of 0809's New articles, …``."""
    kind, pair = name.split("_", 1)
    return f"{name}: {count} questions dropped: {REASONS[kind].format(pair=pair)}"


def kept_by_source(rows: Iterable[dict[str, str]], titles: frozenset[str]
                   ) -> tuple[list[tuple[int, dict[str, str]]], int]:
    """(the numbered rows whose subject is among ``titles``, how many were not)."""
    kept: list[tuple[int, dict[str, str]]] = []
    dropped = 0
    for number, row in enumerate(rows):
        if has_source(row["subject"], titles):
            kept.append((number, row))
        else:
            dropped += 1
    return kept, dropped


def no_source_counts(qa_dir: str, label: str) -> dict[str, int] | None:
    """QA set (``new``, ``edited``) → questions the generator dropped for want of a source
    article, from the sets ``new_<label>``/``edited_<label>`` of the QA folder's
    ``generate.json``: what ``retrieve`` and open-book ``eval`` report beside the recall of the
    questions kept. None for a released zip or a folder without ``generate.json``; a set whose
    generator did not check (the LLM one writes only from the articles) is left out."""
    summary = paths.join(qa_dir, GENERATE_FILE)
    if not paths.isdir(qa_dir) or not paths.exists(summary):
        return None
    counts = json.loads(paths.read_text(summary)).get("sets", {})
    return {name: counts[f"{name}_{label}"][NO_SOURCE] for name in ("new", "edited")
            if NO_SOURCE in counts.get(f"{name}_{label}", {})}
