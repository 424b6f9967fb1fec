"""``tw-jax ecbd build``: an ECBD folder from a Wikidata dump and a Wikipedia dump.

Output, in the released layout (JSON lines, one example per masked span)::

    OUT/{subset}/np_spans_{dev,test}.json       NP-COMMON / NP-PROPER spans
    OUT/{subset}/random_spans_{dev,test}.json   RANDOM spans
    OUT/entities.jsonl                          every entity kept, its split and counts
    OUT/stats.json                              written last: the folder is complete when it exists

A subset is an origination year. Each example has the released fields (``ex_id``,
``masked_sentence``, ``answer_str``, ``answer_d``, ``span_type``, ``definition``, ``year``,
``entity_span_str``, ``entity_span_loc``) plus ``entity_span_char`` (the mention's characters in
``masked_sentence``), ``entity_id``, ``pageid``, ``title`` and ``original_sentence``.
``ex_id`` is ``{title}_{pageid}_{paragraph}_{sentence}``, so the spans of one sentence share it.

Per entity at most ``max_spans_per_entity`` (100) examples are kept, NP and random together,
drawn with a generator seeded by (seed, entity); the rest keep their article order. Entities with
at least one example are split by subset into dev and test: sorted by id, shuffled with a
generator seeded by (seed, subset), the first ``ceil(n * dev_fraction)`` go to dev. The output is
a function of the dumps and the options alone.

The dumps and ``OUT`` may be local paths or ``gs://`` URLs: dumps are streamed, every file is
written atomically (in a bucket an object appears whole when its upload completes), and
``stats.json`` last.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tw_jax.io import paths
from tw_jax.io.atomic import FolderCommit, discard
from tw_jax.io.jsonl import json_line
from tw_jax.preprocess.ecbd import spans as span_rules
from tw_jax.preprocess.ecbd.articles import Article, read_articles
from tw_jax.preprocess.ecbd.empty import why_empty
from tw_jax.preprocess.ecbd.entities import OriginEntity, iter_origin_entities
from tw_jax.preprocess.ecbd.sentences import (
    Candidate,
    candidate_sentences,
    definition_of,
    entity_names,
    word_count,
)
from tw_jax.preprocess.runners.accounting import Skips

SPLITS = ("dev", "test")
FILE_KINDS = {"np": "np_spans", "random": "random_spans"}


@dataclass(frozen=True)
class BuildOptions:
    """The builder's knobs; the defaults are the paper's."""

    years: tuple[int, int] | None = (2017, 2021)
    min_words: int = 500
    min_sentence_words: int = 5
    max_tokens: int = span_rules.MAX_TOKENS
    max_distance: int = span_rules.MAX_DISTANCE
    random_per_sentence: int = span_rules.RANDOM_PER_SENTENCE
    max_spans_per_entity: int = 100
    dev_fraction: float = 0.5
    seed: int = 0
    spacy_model: str = "en_core_web_sm"

    def check(self) -> None:
        for name in ("min_words", "min_sentence_words", "max_tokens", "max_spans_per_entity"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_distance < 0 or self.random_per_sentence < 0:
            raise ValueError("max_distance and random_per_sentence must not be negative")
        if not 0.0 <= self.dev_fraction <= 1.0:
            raise ValueError(f"dev_fraction must be within [0, 1], got {self.dev_fraction}")


class EmptyBuildError(ValueError):
    """The dumps and options give no example: nothing is written, and the message names the
    filter that removed them (:func:`tw_jax.preprocess.ecbd.empty.why_empty`)."""


def file_name(kind: str, split: str) -> str:
    """``np_spans_dev.json`` and the like (the released names)."""
    return f"{FILE_KINDS[kind]}_{split}.json"


def _record(entity: OriginEntity, article: Article, definition: list[str], candidate: Candidate,
            span: span_rules.MaskedSpan, mention_tokens: tuple[int, int]) -> dict[str, Any]:
    masked, answer = span_rules.mask(candidate.text, span)
    return {
        "ex_id": f"{article.title}_{article.page_id}_{candidate.paragraph}_{candidate.sentence}",
        "masked_sentence": masked,
        "answer_str": answer,
        "answer_d": {span_rules.SENTINEL_0: span.text},
        "span_type": span.span_type,
        "definition": definition,
        "year": entity.subset,
        "entity_span_str": candidate.mention_text,
        "entity_span_loc": list(mention_tokens),
        "entity_span_char": list(candidate.mention),
        "entity_id": entity.qid,
        "pageid": article.page_id,
        "title": article.title,
        "original_sentence": candidate.text,
    }


class _Builder:
    def __init__(self, options: BuildOptions, nlp: Any) -> None:
        self.options = options
        self.nlp = nlp
        self.skips = Skips()
        self.counts: Counter[str] = Counter()

    def entity_examples(self, entity: OriginEntity, article: Article) -> list[dict[str, Any]]:
        """The capped examples of one entity, in article order ([] counted with a reason)."""
        options, where = self.options, f"{entity.qid} {article.title!r}"
        paragraphs = list(article.paragraphs)
        words = word_count(paragraphs)
        if words < options.min_words:
            self.skips.add("short_article", f"{where} {words} words")
            return []
        definition = definition_of(paragraphs)
        if not definition:
            self.skips.add("no_definition", where)
            return []
        names = entity_names(entity.label, (entity.enwiki, article.title), entity.aliases)
        candidates = candidate_sentences(paragraphs, names, self.skips, where,
                                         min_sentence_words=options.min_sentence_words)
        self.counts["sentences"] += len(candidates)
        if not candidates:
            self.skips.add("no_sentences", where)
            return []
        examples = []
        docs = self.nlp.pipe([c.text for c in candidates], batch_size=64)
        for candidate, doc in zip(candidates, docs, strict=True):
            mention = span_rules.mention_tokens(doc, candidate.mention)
            rng = random.Random(f"{options.seed}:{entity.qid}:{candidate.paragraph}:"
                                f"{candidate.sentence}")
            spans = span_rules.noun_phrase_spans(
                doc, candidate, max_tokens=options.max_tokens, max_distance=options.max_distance)
            spans += span_rules.random_spans(
                doc, candidate, rng, max_tokens=options.max_tokens,
                max_distance=options.max_distance, count=options.random_per_sentence)
            if not spans:
                self.skips.add("no_spans", f"{where} {candidate.paragraph}_{candidate.sentence}")
            spans.sort(key=lambda s: (s.start, s.end, s.span_type))
            examples += [_record(entity, article, definition, candidate, s, mention)
                         for s in spans]
        if not examples:
            self.skips.add("no_examples", where)
            return []
        if len(examples) > options.max_spans_per_entity:
            self.counts["capped_examples"] += len(examples) - options.max_spans_per_entity
            rng = random.Random(f"{options.seed}:cap:{entity.qid}")
            keep = sorted(rng.sample(range(len(examples)), options.max_spans_per_entity))
            examples = [examples[i] for i in keep]
        return examples


def _qid_key(qid: str) -> tuple[int, str]:
    digits = qid[1:]
    return (int(digits), qid) if digits.isdigit() else (-1, qid)


def split_entities(subset: str, qids: Sequence[str], options: BuildOptions) -> dict[str, str]:
    """``{qid: "dev" | "test"}`` for one subset (see the module docstring)."""
    ordered = sorted(qids, key=_qid_key)
    random.Random(f"{options.seed}:split:{subset}").shuffle(ordered)
    n_dev = math.ceil(len(ordered) * options.dev_fraction)
    return {qid: ("dev" if i < n_dev else "test") for i, qid in enumerate(ordered)}


def _write_jsonl(folder: FolderCommit, name: str, rows: Sequence[dict[str, Any]]) -> None:
    with folder.open(name, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json_line(row))


def build_ecbd(
    wikidata: str | os.PathLike[str],
    wikipedia: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    options: BuildOptions | None = None,
    *,
    nlp: Any = None,
) -> dict[str, Any]:
    """Build the ECBD folder ``out_dir`` (see the module docstring); returns ``stats.json``.

    ``nlp`` is a loaded spaCy pipeline with a parser (default: ``options.spacy_model``).
    No example at all raises :class:`EmptyBuildError` naming the filter that removed them
    (``OUT`` is left without a ``stats.json``).
    """
    options = options or BuildOptions()
    options.check()
    started = time.perf_counter()
    out = os.fspath(out_dir)
    discard(paths.join(out, "stats.json"))  # an interrupted rebuild must not look complete
    source = "given"
    if nlp is None:
        nlp, source = span_rules.load_parser(options.spacy_model)
    wikidata_skips, wikipedia_skips = Skips(), Skips()
    dated_years: list[int] = []
    entities = list(iter_origin_entities(wikidata, wikidata_skips, options.years, dated_years))
    index = read_articles(wikipedia, [e.enwiki for e in entities], wikipedia_skips)

    builder = _Builder(options, nlp)
    per_entity: dict[str, tuple[OriginEntity, Article, list[dict[str, Any]]]] = {}
    claimed: dict[int, str] = {}
    for entity in sorted(entities, key=lambda e: _qid_key(e.qid)):
        article = index.resolve(entity.enwiki)
        if article is None:
            builder.skips.add("no_article", f"{entity.qid} {entity.enwiki!r}")
            continue
        if article.page_id in claimed:
            builder.skips.add("article_taken", f"{entity.qid} by {claimed[article.page_id]}")
            continue
        claimed[article.page_id] = entity.qid
        builder.counts["with_article"] += 1
        examples = builder.entity_examples(entity, article)
        if examples:
            per_entity[entity.qid] = (entity, article, examples)

    if not per_entity:  # an empty folder with exit status 0 would pass for a build
        raise EmptyBuildError(why_empty(
            options.years, dated_years, len(entities), builder.skips.counts,
            {"--min-words": options.min_words,
             "--min-sentence-words": options.min_sentence_words}))
    subsets: dict[str, dict[str, Any]] = {}
    entity_rows = []
    by_subset: dict[str, list[str]] = {}
    for qid, (entity, _, _) in per_entity.items():
        by_subset.setdefault(entity.subset, []).append(qid)
    written = []
    # Every file renamed into place together once all are written, stats.json last.
    with FolderCommit(out, last="stats.json") as folder:
        _write_files(folder, per_entity, by_subset, options, subsets, entity_rows, written)
        span_types = Counter(ex["span_type"] for _, _, rows in per_entity.values() for ex in rows)
        stats = {
            "options": {k: list(v) if isinstance(v, tuple) else v
                        for k, v in asdict(options).items()},
            "spacy_model": source,
            "seconds": round(time.perf_counter() - started, 2),
            "entities": {
                "dated_in_years_with_sitelink": len(entities),
                "with_article": builder.counts["with_article"],
                "with_examples": len(per_entity),
            },
            "sentences": builder.counts["sentences"],
            "examples": dict(sorted(span_types.items())),
            "capped_examples": builder.counts["capped_examples"],
            "subsets": subsets,
            "files": written + ["entities.jsonl"],
            "skipped": {
                "wikidata": wikidata_skips.as_dict(),
                "wikipedia": wikipedia_skips.as_dict(),
                "entities": builder.skips.as_dict(),
            },
            "wikipedia_passes": index.passes,
        }
        folder.write_json("stats.json", stats)
    return stats


def _write_files(
    folder: FolderCommit,
    per_entity: dict[str, tuple[OriginEntity, Article, list[dict[str, Any]]]],
    by_subset: dict[str, list[str]],
    options: BuildOptions,
    subsets: dict[str, dict[str, Any]],
    entity_rows: list[dict[str, Any]],
    written: list[str],
) -> None:
    """The span files of every subset and ``entities.jsonl``, staged in ``folder``; fills
    ``subsets``, ``entity_rows`` and ``written`` for ``stats.json``."""
    for subset in sorted(by_subset, key=lambda s: (len(s), s)):
        assignment = split_entities(subset, by_subset[subset], options)
        subsets[subset] = {}
        for split in SPLITS:
            qids = sorted((q for q, s in assignment.items() if s == split), key=_qid_key)
            rows = [ex for q in qids for ex in per_entity[q][2]]
            files = {
                "np": [r for r in rows if r["span_type"] != span_rules.RANDOM],
                "random": [r for r in rows if r["span_type"] == span_rules.RANDOM],
            }
            for kind, kind_rows in files.items():
                name = f"{subset}/{file_name(kind, split)}"
                _write_jsonl(folder, name, kind_rows)
                written.append(name)
            subsets[subset][split] = {"entities": len(qids), "np_spans": len(files["np"]),
                                      "random_spans": len(files["random"])}
        for qid in sorted(by_subset[subset], key=_qid_key):
            entity, article, examples = per_entity[qid]
            types = Counter(ex["span_type"] for ex in examples)
            entity_rows.append({
                "entity_id": qid, "label": entity.label, "title": article.title,
                "pageid": article.page_id, "year": entity.year, "date": entity.date,
                "property": entity.property, "split": assignment[qid],
                "sentences": len({ex["ex_id"] for ex in examples}),
                "examples": dict(sorted(types.items())),
            })
    _write_jsonl(folder, "entities.jsonl", entity_rows)
