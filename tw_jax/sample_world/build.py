"""Builds the sample world: monthly Wikipedia and Wikidata dumps plus their ground truth.

Layout under ``out_dir`` (a contract other stages rely on), for each snapshot of the world's
:class:`~.span.Span` (by default the four months 2021-08 .. 2021-11) and each period between two::

    wikipedia/enwiki-<Snapshot.dump>-pages-articles.xml.bz2     (enwiki-20210801-...)
    wikidata/wikidata-<Snapshot.dump>-all.json.bz2 and .json.gz
    truth/articles-<Snapshot.iso>.jsonl, truth/redirects-<Snapshot.iso>.jsonl   (2021-08)
    truth/diffset-<Period.name>.jsonl, truth/facts-..., truth/changes-...       (0809)
    world.json

Periods are named as :func:`tw_jax.time.benchmark_spelling` spells the world's snapshots: the
2021 layout (``0809``) for the benchmark's own months, with years otherwise
(``2021-12_2022-01``). ``world.json``'s ``months`` and ``pairs`` list them in that spelling.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from tw_jax.time import Period, Snapshot, TimeError

from .articles import write_article
from .check import check_paragraphs
from .dumps import atomic_path, write_json_dump, write_jsonl, write_mediawiki_xml
from .evolve import Evolution
from .infobox import build_render_index
from .pages import PageStore
from .populate import populate
from .site import create_initial_pages
from .span import DEFAULT_SPAN, Span
from .truth import MonthTruth, diffset, fact_records, snapshot
from .wikidata import RevisionClock, dump_lines
from .world import World

DEFAULT_ENTITIES = 180
MIN_ENTITIES = 60


def month_paths(month: Snapshot | str | int) -> dict[str, str]:
    """The files of one snapshot, relative to the world's folder; ``month`` a snapshot, its
    name (``2021-08``) or an index into the default world's months."""
    if isinstance(month, int):
        month = DEFAULT_SPAN.snapshot(month)
    snap = _snapshot(month)
    d, iso = snap.dump, snap.iso
    return {
        "wikipedia": f"wikipedia/enwiki-{d}-pages-articles.xml.bz2",
        "wikidata_bz2": f"wikidata/wikidata-{d}-all.json.bz2",
        "wikidata_gz": f"wikidata/wikidata-{d}-all.json.gz",
        "articles": f"truth/articles-{iso}.jsonl",
        "redirects": f"truth/redirects-{iso}.jsonl",
    }


def pair_paths(pair: Period | str) -> dict[str, str]:
    """The truth files of one period, named as given (a :class:`Period` by its ``name``)."""
    name = pair.name if isinstance(pair, Period) else str(pair)
    return {"diffset": f"truth/diffset-{name}.jsonl", "facts": f"truth/facts-{name}.jsonl",
            "changes": f"truth/changes-{name}.jsonl"}


def wikipedia_dump(out_dir: str | Path, month: Snapshot | str) -> Path:
    """Path of the month's ``pages-articles.xml.bz2`` in a built world (month a
    :class:`Snapshot` or its name, "2021-08")."""
    return Path(out_dir) / month_paths(_snapshot(month))["wikipedia"]


def wikidata_dump(out_dir: str | Path, month: Snapshot | str, compression: str = "bz2") -> Path:
    """Path of the month's Wikidata JSON dump (``compression`` "bz2" or "gz")."""
    return Path(out_dir) / month_paths(_snapshot(month))[f"wikidata_{compression}"]


def truth_file(out_dir: str | Path, name: str, key: Snapshot | Period | str) -> Path:
    """Path of a truth file: ``name`` is articles/redirects (key: a snapshot or its name,
    "2021-08") or diffset/facts/changes (key: a period or its name, "0809"; spelled as the
    world's ``world.json`` spells it, so ``Period.parse("0809")`` finds ``diffset-0809.jsonl``
    and ``2021-12_2022-01`` a dated world's file)."""
    if name in ("articles", "redirects"):
        return Path(out_dir) / month_paths(_snapshot(key))[name]
    period = key if isinstance(key, Period) else Period.parse(str(key))
    return Path(out_dir) / pair_paths(world_spelling(out_dir, period))[name]


def world_spelling(out_dir: str | Path, period: Period) -> Period:
    """``period`` as the world in ``out_dir`` names it (its ``world.json``'s ``pairs``); as
    given when the world is not built or does not hold it."""
    try:
        pairs = json.loads((Path(out_dir) / "world.json").read_text(encoding="utf-8"))["pairs"]
        spelled = [Period.parse(name) for name in pairs]
    except (OSError, ValueError, KeyError, TypeError):
        return period
    return next((p for p in spelled if p == period), period)


def _snapshot(month: Snapshot | str) -> Snapshot:
    if isinstance(month, Snapshot):
        return month
    try:
        return Snapshot.parse(str(month))
    except TimeError as error:
        raise ValueError(f"not a month of the sample world: {error}") from None


def initial_world(seed: int, n_entities: int, span: Span = DEFAULT_SPAN) -> tuple[World, PageStore]:
    """The world of the span's first month with its articles and pages (ids assigned)."""
    if n_entities < MIN_ENTITIES:
        raise ValueError(f"the sample world needs at least {MIN_ENTITIES} main entities, got {n_entities}")
    w = World(seed, n_entities, span)
    populate(w)
    w.render_index = build_render_index(w)  # nothing moves while the first articles are written
    for e in list(w.entities.values()):
        if e.kind != "support":
            write_article(w, e)
    w.render_index = None
    store = PageStore(w)
    create_initial_pages(w, store)
    return w, store


def cross_check(w: World, month: int, prev: MonthTruth, records: list[dict]) -> None:
    """The text-level DiffSet must equal the sentences the month's edits marked as new."""
    by_id = {r["id"]: r for r in records}
    for e in w.entities.values():
        if e.article is None:
            continue
        pid = e.article.page_id
        marked = [s.plain for s in e.article.sentences() if s.born == month]
        got = by_id.get(pid)
        if pid not in prev.articles:
            if not got or got["kind"] != "new" or len(marked) != len(got["sentences"]):
                raise AssertionError(f"new article {e.article.title}: DiffSet record wrong or stale sentences")
            continue
        found = got["sentences"] if got else []
        if found != marked:
            raise AssertionError(f"{e.article.title}: DiffSet {found!r} != intended {marked!r}")


def build_sample_world(out_dir: str | Path, seed: int = 0, n_entities: int = DEFAULT_ENTITIES,
                       *, check: bool = True, change_rounds: int = 1,
                       span: Span = DEFAULT_SPAN) -> dict:
    """Write the sample world under ``out_dir`` and return the content of its ``world.json``.

    ``span``: the months it has a snapshot of (by default 2021-08 .. 2021-11, the world the
    tests pin down byte for byte).

    ``change_rounds`` applies each month's set of changes that many times (one ``busy`` set, so
    no article changes twice in a month): more DiffSet text and CHANGED facts per month, for a
    demo that trains on more than a few blocks. 1 is the world the tests pin down."""
    if change_rounds < 1:
        raise ValueError(f"change_rounds must be at least 1, got {change_rounds}")
    out = Path(out_dir)
    w, store = initial_world(seed, n_entities, span)
    periods = span.periods
    clock = RevisionClock(w)
    truths: list[MonthTruth] = []
    texts: list[dict[int, str]] = []  # article wikitext by page id, per month
    files: dict = {"months": {}, "pairs": {}}
    counts: dict = {}
    pair_counts: dict = {}
    for m, snap in enumerate(span.snapshots):
        month = snap.iso
        log: list[dict] = []
        if m:
            w.month = m
            evolution = Evolution(w, store)
            for _ in range(change_rounds):
                log = evolution.run()
        store.sync(m)
        truth = snapshot(w, store)
        texts.append({p.page_id: p.text for p in store.pages if p.ns == 0 and p.target is None})
        if check:
            for title, paragraphs in truth.articles.values():
                check_paragraphs(title, paragraphs)
        paths = month_paths(snap)
        files["months"][month] = paths
        write_mediawiki_xml(store.pages, out / paths["wikipedia"])
        write_json_dump(dump_lines(w, clock, m), out / paths["wikidata_bz2"], out / paths["wikidata_gz"])
        write_jsonl(({"id": pid, "title": t, "paragraphs": p} for pid, (t, p) in sorted(truth.articles.items())),
                    out / paths["articles"])
        write_jsonl(truth.redirects, out / paths["redirects"])
        counts[month] = {
            "articles": len(truth.articles), "redirects": len(truth.redirects),
            "other_namespace_pages": truth.other_pages, "entities": truth.entities,
            "main_entities": sum(1 for e in w.entities.values() if e.article is not None),
            "facts": sum(len(f) for f in truth.facts.values()),
        }
        if m:
            pair = periods[m - 1].name
            prev = truths[-1]
            records = diffset(prev, truth)
            if check:
                cross_check(w, m, prev, records)
            facts = fact_records(prev, truth)
            pp = pair_paths(pair)
            files["pairs"][pair] = pp
            write_jsonl(records, out / pp["diffset"])
            write_jsonl(facts, out / pp["facts"])
            write_jsonl(log, out / pp["changes"])
            pair_counts[pair] = pair_summary(prev, truth, records, facts, log)
            old_text, new_text = texts[-2], texts[-1]
            pair_counts[pair]["wikitext_changed_articles"] = sum(
                1 for pid, text in new_text.items() if pid in old_text and old_text[pid] != text)
        truths.append(truth)
    world = {
        "seed": seed, "n_entities": n_entities, "change_rounds": change_rounds,
        "months": [s.iso for s in span.snapshots], "pairs": [p.name for p in periods],
        "files": files, "counts": counts, "pair_counts": pair_counts,
    }
    with atomic_path(out / "world.json") as tmp:
        tmp.write_text(json.dumps(world, indent=2) + "\n", encoding="utf-8")
    return world


def pair_summary(prev: MonthTruth, recent: MonthTruth, records: list[dict], facts: list[dict],
                 log: list[dict]) -> dict:
    changed_ids = [pid for pid in recent.articles if pid in prev.articles]
    kinds = Counter(r["kind"] for r in records)
    cats = Counter(f["category"] for f in facts)
    changes = Counter(c["type"] for c in log)
    return {
        "diffset_articles": {"new": kinds.get("new", 0), "changed": kinds.get("changed", 0)},
        "diffset_sentences": sum(len(r["sentences"]) for r in records),
        "facts": {c: cats.get(c, 0) for c in ("new", "updated", "unchanged", "deleted")},
        "facts_mentioned": {c: sum(1 for f in facts if f["category"] == c and f["mentioned"])
                            for c in ("new", "updated", "unchanged", "deleted")},
        "deleted_articles": sum(1 for pid in prev.articles if pid not in recent.articles),
        "renamed_articles": sum(1 for pid in changed_ids if prev.articles[pid][0] != recent.articles[pid][0]),
        "plain_changed_articles": sum(1 for pid in changed_ids if prev.articles[pid][1] != recent.articles[pid][1]),
        "changes": dict(sorted(changes.items())),
    }
