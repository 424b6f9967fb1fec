"""A large pair of Wikipedia dumps for benchmarking the DiffSet pipeline.

The old dump holds ``n_articles`` articles in the sample world's style, padded with extra prose
sections to about ``article_bytes`` of wikitext; the new dump edits ``changed_frac`` of them
with the same copy-edits the sample world uses and adds ``new_frac`` new articles (larger page
ids). Only the edited and new articles are rendered twice, so 20,000 articles take seconds,
and compression runs on all cores (bz2 releases the GIL).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from tw_jax.sample_world.articles import write_article
from tw_jax.sample_world.compose import make
from tw_jax.sample_world.dumps import write_mediawiki_xml, write_parallel_bz2
from tw_jax.sample_world.edits import (
    append_end,
    change_number,
    delete_sentence,
    insert_middle,
    insert_start,
    reword,
    spare_ctx,
)
from tw_jax.sample_world.infobox import build_render_index
from tw_jax.sample_world.model import Entity, Para, Section
from tw_jax.sample_world.populate import populate
from tw_jax.sample_world.render import render_article, render_body, render_parts
from tw_jax.sample_world.text import link
from tw_jax.sample_world.world import World

PAD_SECTIONS = ("Background", "Legacy", "Public image", "Later developments", "Analysis", "Archives")
PAD_TEMPLATES: tuple[tuple[str, ...], ...] = (
    ("In {y1}, a committee in {place} reviewed the records of {Short} and published {n3} pages of notes, "
     "which were later summarised for a wider audience by a newspaper in {place2}.",
     "A committee in {place} published {n3} pages of notes on {Short} after a review in {y1}, and a newspaper "
     "in {place2} later summarised them for a wider audience."),
    ("A newspaper in {place} described {Short} as {adj} in a long article from {y2}, and readers in {place2} "
     "sent more than {n3} letters in response over the following months.",
     "In {y2}, a long newspaper article from {place} described {Short} as {adj}, prompting more than {n3} "
     "letters from readers in {place2} over the following months."),
    ("Historians at the University of {ucity} have compared {Short} with similar cases from the {century} century, "
     "drawing on records kept in {place} and in {place2}.",
     "Drawing on records kept in {place} and in {place2}, historians at the University of {ucity} have compared "
     "{Short} with similar cases from the {century} century."),
    ("The annual survey of {y3} listed {Short} among the {n2} most discussed topics in {place}, well ahead of "
     "the figures recorded in {place2} during the same year.",
     "{Short} was among the {n2} most discussed topics in {place} according to the annual survey of {y3}, well "
     "ahead of the figures recorded in {place2}."),
    ("A travelling exhibition about {Short} visited {place} and {place2} between {y4} and {y5}, attracting "
     "about {n5} visitors in total.",
     "Between {y4} and {y5} an exhibition about {Short} toured {place} and {place2}, where about {n5} visitors "
     "saw it in total."),
    ("Letters kept in the archive of {place} mention {Short} at least {n3} times, most of them written by "
     "residents of {place2} during the {century} century.",
     "The archive of {place} holds letters that mention {Short} at least {n3} times, most of them written by "
     "residents of {place2} during the {century} century."),
    ("A radio programme broadcast in {y6} discussed {Short} with guests from {place}, and a second programme "
     "recorded in {place2} followed a year later.",
     "Guests from {place} discussed {Short} in a radio programme broadcast in {y6}, and a second programme "
     "recorded in {place2} followed a year later."),
    ("Local schools in {place} have used material about {Short} in their lessons since {y7}, and teachers in "
     "{place2} adopted the same material soon afterwards.",
     "Since {y7}, schools in {place} have used material about {Short} in lessons, and teachers in {place2} "
     "adopted it soon afterwards."),
    ("An academic conference held in {place} in {y8} devoted a full session to {Short}, with {n2} papers "
     "presented by researchers from {place2} and elsewhere.",
     "In {y8}, a full session of an academic conference in {place} was devoted to {Short}, with {n2} papers "
     "presented by researchers from {place2} and elsewhere."),
    ("The municipal library of {place} lists {n3} books that refer to {Short}, more than the library of "
     "{place2} holds on any comparable subject.",
     "According to the municipal library of {place}, {n3} books refer to {Short}, more than the library of "
     "{place2} holds on any comparable subject."),
)
ADJECTIVES = ("remarkable", "controversial", "influential", "unusual", "widely admired", "modest", "ambitious")
CENTURIES = ("17th", "18th", "19th", "20th")


@dataclass
class BenchPage:
    """The fields the XML writer needs."""

    page_id: int
    ns: int
    title: str
    text: str
    target: str | None
    rev_id: int
    parent_id: int | None
    timestamp: str
    contributor: tuple
    comment: str
    minor: bool


def pad_article(w: World, e: Entity, deficit: int) -> list[Section]:
    """Append prose sections of fresh sentences worth about ``deficit`` bytes; return them."""
    r = w.rng
    cities = w.of_kind("city")
    seen = {s.plain for s in e.article.sentences()}
    ctx = spare_ctx(w, e)
    titles = [t for t in PAD_SECTIONS if e.article.section(t) is None]
    added, i = 0, 0
    new: list[Section] = []
    while added < deficit and titles:
        section = Section(titles.pop(0), 2, [Para([])])
        new.append(section)
        added += len(section.title) + 8
        for _ in range(r.randint(3, 5)):
            variants = PAD_TEMPLATES[r.randrange(len(PAD_TEMPLATES))]
            place, place2 = r.choice(cities), r.choice(cities)
            s = make(w, f"pad_{i}", variants, ctx, place=link(place.label), place2=link(place2.label),
                     adj=r.choice(ADJECTIVES), century=r.choice(CENTURIES))
            i += 1
            if s.plain in seen or place is place2:
                continue
            seen.add(s.plain)
            section.blocks[0].sents.append(s)
            added += len(s.wiki) + 1
            if added >= deficit:
                break
    new = [sec for sec in new if sec.blocks[0].sents]
    e.article.sections.extend(new)
    return new


def padded_text(w: World, e: Entity, article_bytes: int) -> str:
    """Render the article, padding it first if it is short; the padding is rendered alone and
    spliced in, which gives exactly what rendering the padded article would."""
    head, body, tail = render_parts(w, e)
    size = len(head) + len(body) + len(tail)
    if size < article_bytes:
        extra = pad_article(w, e, article_bytes - size)
        if extra:
            body += "\n\n" + render_body(w, e, extra)
    return head + body + tail


def _page(w: World, e: Entity, text: str, rev_id: int, month: int) -> BenchPage:
    r = w.rng
    day = r.randint(1, 28)
    stamp = f"2021-{7 + month:02d}-{day:02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z"
    return BenchPage(e.article.page_id, 0, e.article.title, text, None, rev_id, None, stamp,
                     ("user", "Kesselwriter", 1204331), "", False)


class _Ids:
    def __init__(self, w: World) -> None:
        self.r = w.rng
        self.page, self.rev = 10_000, 1_000_000_000

    def next(self) -> tuple[int, int]:
        self.page += self.r.randint(1, 40)
        self.rev += self.r.randint(1, 5000)
        return self.page, self.rev


def write_bench_pair(out_dir: str | Path, n_articles: int = 20000, changed_frac: float = 0.05,
                     new_frac: float = 0.05, article_bytes: int = 3500, seed: int = 0,
                     threads: int | None = None) -> tuple[Path, Path]:
    """Write ``enwiki-20210801-…`` (old) and ``enwiki-20210901-…`` (new) bench dumps; return their paths.

    The old dump is compressed while its articles are still being generated (compression runs
    in worker threads), so generation and compression overlap.
    """
    # Millions of small objects and no reference cycles worth collecting: the cyclic GC would
    # rescan them all again and again (it doubled the run time).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _write_bench_pair(Path(out_dir), n_articles, changed_frac, new_frac, article_bytes, seed, threads)
    finally:
        if enabled:
            gc.enable()


def _write_bench_pair(out: Path, n_articles: int, changed_frac: float, new_frac: float, article_bytes: int,
                      seed: int, threads: int | None) -> tuple[Path, Path]:
    threads = threads or os.cpu_count() or 1
    n_new = round(n_articles * new_frac)
    w = World(seed, max(n_articles + n_new, 60))
    populate(w)
    w.render_index = build_render_index(w)
    entities = [e for e in w.entities.values() if e.kind != "support"][: n_articles + n_new]
    r = w.rng
    held_out = set(r.sample(range(len(entities)), min(n_new, max(0, len(entities) - n_articles))))
    ids = _Ids(w)
    old_pages: list[BenchPage] = []
    fresh: list[tuple[Entity, str]] = []

    def generate() -> Iterator[BenchPage]:
        for i, e in enumerate(entities):
            write_article(w, e)
            text = padded_text(w, e, article_bytes)
            if i in held_out:
                fresh.append((e, text))
                continue
            e.article.page_id, rev = ids.next()
            old_pages.append(_page(w, e, text, rev, 0))
            yield old_pages[-1]

    old_path = out / "enwiki-20210801-pages-articles.xml.bz2"
    # The calling thread generates; worker threads compress what it has generated so far.
    write_parallel_bz2(generate(), old_path, max(2, threads))

    w.month = 1
    article_of = {p.page_id: e for p, e in zip(old_pages, (e for i, e in enumerate(entities) if i not in held_out),
                                                strict=True)}
    new_pages = {p.page_id: p for p in old_pages}
    edits = (insert_start, insert_middle, append_end, delete_sentence, reword, change_number)
    for page_id in sorted(r.sample(sorted(new_pages), round(len(old_pages) * changed_frac))):
        e = article_of[page_id]
        for _ in range(6):
            if r.choice(edits)(w, e):
                break
        old = new_pages[page_id]
        ids.rev += r.randint(1, 5000)
        new_pages[page_id] = replace(old, text=render_article(w, e), rev_id=ids.rev, parent_id=old.rev_id,
                                     comment="Copyedit")
    for e, text in fresh:  # rendered above; nothing they show has changed since
        e.article.page_id, rev = ids.next()
        new_pages[e.article.page_id] = _page(w, e, text, rev, 1)
    w.render_index = None
    new_path = out / "enwiki-20210901-pages-articles.xml.bz2"
    write_mediawiki_xml([new_pages[k] for k in sorted(new_pages)], new_path, threads=threads)
    return old_path, new_path
