"""Writes an entity's article (dispatching on its kind) and names the spare sentences for edits."""

from __future__ import annotations

from . import articles_people, articles_things
from .model import Article, Entity, Raw
from .schema import MONTH_NAMES
from .world import World

BUILDERS = {**articles_people.BUILDERS, **articles_things.BUILDERS}
SPARES = {**articles_people.SPARES, **articles_things.SPARES}
KIND_TABLES = articles_things.KIND_TABLES
INTERWIKI = ("de", "fr", "nl", "sv", "pl")
EDITOR_NOTES = (
    "<!-- Please discuss major changes on the talk page before editing this section. -->",
    "<!-- Keep this section in chronological order. -->",
)


def write_article(w: World, e: Entity, *, new: bool = False) -> Article:
    """Create ``e.article`` (page id assigned later by the page store)."""
    r = w.rng
    sections = BUILDERS[e.kind](w, e)
    if r.random() < 0.1 and len(sections) > 1:  # an editors' note on a line of its own
        sections[r.randrange(1, len(sections))].blocks.insert(0, Raw(r.choice(EDITOR_NOTES)))
    if new:
        dmy = w.changing().long_name
    else:
        dmy = f"{r.choice(MONTH_NAMES)} {r.randint(w.year(2015), w.year(2020))}"
    interwiki = tuple(sorted(r.sample(INTERWIKI, r.randint(0, 3))))
    see_also: tuple[str, ...] = ()
    if r.random() < 0.2:
        same = w.of_kind(e.kind)
        see_also = tuple(dict.fromkeys(x.label for x in (r.choice(same), r.choice(same)) if x is not e))
    e.article = Article(0, e.label, sections, dmy, notoc=r.random() < 0.1, interwiki=interwiki, see_also=see_also)
    return e.article


def spare_table(e: Entity) -> dict[str, tuple[str, ...]]:
    """Spare sentence templates that copy-edits may insert into ``e``'s article."""
    return SPARES[e.kind]
