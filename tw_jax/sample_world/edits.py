"""Edits to an article's body: the prose copy-edits, and the helpers fact changes use.

Every edit that introduces text marks the new sentences with the current month (``Sent.born``);
a deletion leaves nothing new. The build checks these marks against the text-level diff.
"""

from __future__ import annotations

from .articles import spare_table
from .compose import make, pronouns
from .model import Entity, Items, Para, Section
from .schema import PERSON_KINDS
from .text import Sent, words
from .world import World

TAIL_SECTIONS = ("Career statistics", "Honours", "Awards", "Awards and nominations", "Players", "Gallery",
                 "Participants", "Financial data", "Filmography", "Current squad")


def spare_ctx(w: World, e: Entity) -> dict:
    a = e.attrs
    if e.kind in PERSON_KINDS:
        ctx = dict(pronouns(a["gender"]))
        ctx.update(Last=a["last"], Short=a["last"], bcitylabel=words(w.label(a["city"])) if a["city"] in w.entities
                   else "the capital", demonym=w.get(a["country"]).attrs["demonym"], ymin=a["birth"][0] + 16)
        return ctx
    short = a.get("short", e.label).replace(" & Co.", "")
    if e.kind == "event":
        short = "the " + e.label
    start = {"film": lambda: int(e.values("P577")[0][1][1:5]), "company": lambda: a["founded"],
             "club": lambda: a["founded"], "event": lambda: a["year"]}.get(e.kind, lambda: w.year(1960))()
    return {"Short": words(short), "ymin": max(start, w.year(1960))}


def spare_sentence(w: World, e: Entity, exclude: frozenset[str] = frozenset()) -> Sent | None:
    """A spare sentence whose template the article does not use yet."""
    table = spare_table(e)
    used = e.article.keys() | exclude
    free = [k for k in table if k not in used]
    if not free:
        return None
    key = w.rng.choice(free)
    return make(w, key, table[key], spare_ctx(w, e))


def paragraphs(e: Entity, min_len: int = 1) -> list[Para]:
    return [b for s in e.article.sections for b in s.blocks if isinstance(b, Para) and len(b.sents) >= min_len]


def insert_start(w: World, e: Entity) -> list[Sent]:
    """A new paragraph before everything else in the body (text the reference diff missed)."""
    first = spare_sentence(w, e)
    if first is None:
        return []
    sents = [first]
    more = spare_sentence(w, e, frozenset({first.key}))
    if more:
        sents.append(more)
    e.article.sections[0].blocks.insert(0, Para(sents))
    return sents


def insert_middle(w: World, e: Entity) -> list[Sent]:
    """A sentence inserted inside a paragraph, between two existing sentences."""
    paras = paragraphs(e, 2)
    s = spare_sentence(w, e)
    if not paras or s is None:
        return []
    p = w.rng.choice(paras)
    p.sents.insert(w.rng.randint(1, len(p.sents) - 1), s)
    return [s]


def append_end(w: World, e: Entity) -> list[Sent]:
    """A new paragraph after everything else in the body (the other text the reference diff missed)."""
    s = spare_sentence(w, e)
    if s is None:
        return []
    sents = [s]
    more = spare_sentence(w, e, frozenset({s.key}))
    if more and w.rng.random() < 0.5:
        sents.append(more)
    e.article.sections[-1].blocks.append(Para(sents))
    return sents


def delete_sentence(w: World, e: Entity) -> list[Sent]:
    candidates = [(p, s) for p in paragraphs(e, 2) for s in p.sents if s.key != "lead" and s.born != w.month]
    if not candidates:
        return []
    p, s = w.rng.choice(candidates)
    p.sents.remove(s)
    return [s]


def reword(w: World, e: Entity) -> list[Sent]:
    candidates = [s for s in e.article.sentences() if len(s.variants) > 1 and s.born != w.month]
    if not candidates:
        return []
    s = w.rng.choice(candidates)
    s.reword(w.month)
    return [s]


def change_number(w: World, e: Entity) -> list[Sent]:
    """Correct a number of three or more digits (a year, a count) in one sentence."""
    candidates = [s for s in e.article.sentences() if s.numbers() and s.born != w.month]
    if not candidates:
        return []
    s = w.rng.choice(candidates)
    name = w.rng.choice(s.numbers())
    old = s.params[name]
    this_year = w.changing().date.year
    if w.year(1000) <= old <= this_year:  # a year, kept from passing the year of the edit
        new = old + w.rng.choice([-2, -1, 1]) if old < this_year else old - 1
    else:
        step = max(1, old // 25)
        new = old + w.rng.choice([-1, 1]) * w.rng.randint(1, step)
        new = max(new, 100)
        if new == old:
            new = old + 1
    s.update(w.month, **{name: new})
    return [s]


# -- helpers for fact-driven edits ---------------------------------------------------------

def find_sent(e: Entity, key: str) -> Sent | None:
    return next((s for s in e.article.sentences() if s.key == key), None)


def set_lead(w: World, e: Entity, variants: tuple[str, ...], **params) -> Sent:
    """Rewrite the lead sentence with a new wording family and new slot values."""
    s = find_sent(e, "lead")
    s.variants = variants
    s.variant %= len(variants)
    s.update(w.month, **params)
    return s


def section_for(e: Entity, title: str, level: int = 2) -> Section:
    """The section called ``title``, created before the trailing list/table sections if missing."""
    found = e.article.section(title)
    if found:
        return found
    sections = e.article.sections
    idx = len(sections)
    while idx > 1 and sections[idx - 1].title in TAIL_SECTIONS:
        idx -= 1
    new = Section(title, level, [])
    sections.insert(idx, new)
    return new


def append_sentence(w: World, e: Entity, title: str | None, s: Sent) -> None:
    """Append ``s`` to the last paragraph of a section (a new paragraph if it has none)."""
    section = e.article.sections[0] if title is None else section_for(e, title)
    paras = [b for b in section.blocks if isinstance(b, Para)]
    if paras:
        paras[-1].sents.append(s)
    else:
        section.blocks.append(Para([s]))


def add_list_item(w: World, e: Entity, title: str, s: Sent) -> None:
    section = e.article.section(title)
    if section is None:
        section = Section(title, 2, [])
        e.article.sections.append(section)
    lists = [b for b in section.blocks if isinstance(b, Items)]
    if lists:
        lists[-1].sents.append(s)
    else:
        section.blocks.append(Items([s]))
