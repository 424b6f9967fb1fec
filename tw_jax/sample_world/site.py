"""The pages around the articles: redirects from aliases, talk pages, categories, templates.

They exist so that a pipeline has to skip them for the right reason (``redirect``,
``namespace``); none of them contributes plain text.
"""

from __future__ import annotations

from .model import Entity
from .pages import USERS, PageStore
from .schema import MONTH_NAMES, PERSON_KINDS
from .world import World

TALK_TOPICS = (
    ("Infobox photo", "Is there a more recent photo we could use in the infobox?"),
    ("Birth date", "Two sources give different birth dates; I kept the one from the official profile."),
    ("Neutrality", "The second paragraph reads like a press release and could be toned down."),
    ("Sources", "Several statements in the history section still need a reliable source."),
)
TEMPLATES = (
    "Infobox football biography", "Infobox officeholder", "Infobox person", "Infobox football club",
    "Infobox company", "Infobox settlement", "Infobox country", "Infobox film",
    "Infobox football tournament season",
)


def signature(w: World) -> str:
    r = w.rng
    user, _ = r.choice(USERS)
    return (f"[[User:{user}|{user}]] ([[User talk:{user}|talk]]) {r.randint(0, 23):02d}:{r.randint(0, 59):02d}, "
            f"{r.randint(1, 28)} {r.choice(MONTH_NAMES)} {r.randint(w.year(2014), w.year(2020))} (UTC)")


def talk_text(w: World, e: Entity) -> str:
    project = {"footballer": "Football", "coach": "Football", "club": "Football", "event": "Football",
               "film": "Film", "actor": "Biography", "politician": "Politics", "business": "Business",
               "company": "Companies", "city": "Cities", "country": "Countries"}[e.kind]
    topic, message = w.rng.choice(TALK_TOPICS)
    return (f"{{{{WikiProject banner shell|class=Start|\n{{{{WikiProject {project}|importance=Low}}}}\n}}}}\n\n"
            f"== {topic} ==\n{message} {signature(w)}\n:Agreed, I will look into it. {signature(w)}\n")


def add_talk_comment(w: World, store: PageStore, page_title: str) -> bool:
    page = store.by_title(page_title)
    if page is None:
        return False
    page.text = page.text.rstrip("\n") + f"\n::Done now, thanks for the note. {signature(w)}\n"
    page.pending = "/* Reply */ new comment"
    return True


TEMPLATE_BODY = """{{Infobox
| bodyclass = vcard
| above = {{{name|{{PAGENAME}}}}}
| image = {{{image|}}}
| label1 = Born
| data1 = {{{birth_date|}}}
}}<noinclude>
{{Documentation}}
[[Category:CATNAME infobox templates]]
</noinclude>"""


def template_text(name: str) -> str:
    return TEMPLATE_BODY.replace("CATNAME", name.split()[1].capitalize())


def navbox_text(w: World, country: Entity) -> str:
    clubs = [c for c in w.of_kind("club") if c.attrs["country"] == country.qid]
    links = " &middot; ".join(f"[[{c.label}]]" for c in clubs)
    return (f"{{{{Navbox\n| name = {country.label} Premier League\n| title = [[{country.label} Premier League]]\n"
            f"| list1 = {links}\n}}}}<noinclude>\n[[Category:{country.label} football templates]]\n</noinclude>")


def add_entity_pages(w: World, store: PageStore, e: Entity, *, talk_prob: float = 0.25) -> None:
    """The article of a new entity, redirects from its aliases, maybe a talk page."""
    store.add_article(e)
    for alias in e.aliases:
        store.add_redirect(alias, e.article.title)
    if w.rng.random() < talk_prob:
        store.add_other(1, f"Talk:{e.article.title}", "talk", talk_text(w, e))


def create_initial_pages(w: World, store: PageStore) -> None:
    """All pages of the first month; ids are assigned afterwards in shuffled order."""
    with_articles = [e for e in w.entities.values() if e.article is not None]
    for e in with_articles:
        add_entity_pages(w, store, e)
    categories: list[str] = []
    for e in with_articles:
        if e.kind in PERSON_KINDS:
            noun = {"footballer": "footballers", "coach": "football managers", "politician": "politicians",
                    "business": "business executives", "actor": "actors"}[e.kind]
            categories.append(f"{w.get(e.attrs['country']).attrs['demonym']} {noun}")
        elif e.kind == "city":
            categories.append(f"Cities in {w.label(e.attrs['country'])}")
    for name in dict.fromkeys(categories):
        parent = name.split(" ", 1)[1].capitalize() + " by nationality" if " in " not in name else "Cities by country"
        store.add_other(14, f"Category:{name}", "category",
                        f"{{{{Commons category|{name}}}}}\nThis category lists {name.lower()}.\n\n[[Category:{parent}]]")
    for name in TEMPLATES:
        store.add_other(10, f"Template:{name}", "template", template_text(name))
    for c in w.of_kind("country"):
        store.add_other(10, f"Template:{c.label} Premier League", "template", navbox_text(w, c))
    store.assign_initial_ids()
