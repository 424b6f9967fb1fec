"""An article as wikitext: header templates, infobox, body, references, links, categories.

The body comes from the article's blocks; the rest is rendered from the entity's current
statements. Everything outside the body (and the tables inside it) has no plain text, which is
the point: a pipeline must remove it all and keep exactly the body's sentences.
"""

from __future__ import annotations

from .infobox import generated_table, person_box, stable_int, thing_box
from .model import Entity, Items, Para, Raw, Section
from .schema import PERSON_KINDS
from .world import World

SHORT_DESCRIPTIONS = {
    "footballer": "{dem} footballer (born {y})", "coach": "{dem} football manager (born {y})",
    "politician": "{dem} politician (born {y})", "business": "{dem} business executive",
    "actor": "{dem} actor (born {y})", "club": "Association football club in {country}",
    "company": "{dem} company", "city": "City in {country}", "country": "Country on the Selden Sea",
    "film": "{y} film", "event": "Football tournament",
}


def render_body(w: World, e: Entity, sections: list[Section]) -> str:
    """The body wikitext of ``sections`` (sections are joined by a blank line)."""
    chunks: list[str] = []
    for section in sections:
        lines: list[str] = []
        if section.title:
            bar = "=" * section.level
            lines.append(f"{bar} {section.title} {bar}")
        blocks: list[str] = []
        for block in section.blocks:
            if isinstance(block, Para):
                text = ("\n" if block.lines else " ").join(s.wiki for s in block.sents)
                blocks.append(f"{block.above}\n{text}" if block.above else text)
            elif isinstance(block, Items):
                blocks.append("\n".join(f"* {s.wiki}" for s in block.sents))
            elif isinstance(block, Raw):
                blocks.append(generated_table(w, e, block.wiki) if block.wiki.startswith("@") else block.wiki)
        if lines and blocks:
            chunks.append(lines[0] + "\n" + "\n\n".join(blocks))
        elif lines:
            chunks.append(lines[0])
        else:
            chunks.append("\n\n".join(blocks))
    return "\n\n".join(chunks)


def categories(w: World, e: Entity) -> list[str]:
    a = e.attrs
    if e.kind in PERSON_KINDS:
        dem = w.get(a["country"]).attrs["demonym"]
        noun = {"footballer": "footballers", "coach": "football managers", "politician": "politicians",
                "business": "business executives", "actor": "actors"}[e.kind]
        cats = [f"{a['birth'][0]} births", "Living people", f"{dem} {noun}"]
        cats += [f"{w.label(q)} players" for q in e.items("P54") if q in w.entities]
        return cats
    if e.kind == "club":
        return [f"Football clubs in {w.label(a['country'])}", f"Association football clubs established in {a['founded']}"]
    if e.kind == "company":
        return [f"Companies based in {w.label(a['city'])}", f"{a['industry'].capitalize()} companies"]
    if e.kind == "city":
        return [f"Cities in {w.label(a['country'])}"]
    if e.kind == "country":
        return ["Countries on the Selden Sea"]
    if e.kind == "film":
        y = e.values("P577")[0][1][1:5]
        return [f"{y} films", f"{w.get(a['country']).attrs['demonym']} films"]
    return [f"{a['series']} seasons"]


def short_description(w: World, e: Entity) -> str:
    a = e.attrs
    country = a.get("country")
    dem = w.get(country).attrs["demonym"] if country and country in w.entities else ""
    if e.kind == "country":
        dem = a["demonym"]
    y = a["birth"][0] if "birth" in a else e.values("P577")[0][1][1:5] if e.kind == "film" else ""
    return SHORT_DESCRIPTIONS[e.kind].format(dem=dem, y=y, country=w.label(country) if country else "")


def render_article(w: World, e: Entity) -> str:
    """The full wikitext of ``e``'s article as of the world's current state."""
    head, body, tail = render_parts(w, e)
    return head + body + tail


def render_parts(w: World, e: Entity) -> tuple[str, str, str]:
    """(header with infobox, body, references/links/categories) of ``e``'s article."""
    article = e.article
    assert article is not None
    head = [f"{{{{Short description|{short_description(w, e)}}}}}", f"{{{{Use dmy dates|date={article.dmy}}}}}"]
    if article.notoc:
        head.append("__NOTOC__")
    head.append(person_box(w, e) if e.kind in PERSON_KINDS else thing_box(w, e))
    tail = ["== References ==", "{{Reflist}}", "", "== External links =="]
    sites = [v[1] for v in e.values("P856")]
    if sites:
        tail.append(f"* [{sites[0]} Official website]")
    if e.kind == "footballer":
        slug = e.label.lower().replace(" ", "-").replace(".", "")
        tail.append(f"* {{{{Soccerway|{slug}/{stable_int(e.qid, 100000, 999999)}}}}}")
    tail.append("* {{Commons category-inline}}")
    if article.see_also:
        tail[0:0] = ["== See also =="] + [f"* [[{t}]]" for t in article.see_also] + [""]
    tail.append("")
    if e.kind in ("footballer", "club") and e.attrs.get("country") in w.entities:
        tail.append(f"{{{{{w.label(e.attrs['country'])} Premier League}}}}")
    tail.append("{{Authority control}}")
    if e.kind in PERSON_KINDS:
        tail.append("")
        tail.append(f"{{{{DEFAULTSORT:{e.attrs['last']}, {e.attrs['first']}}}}}")
    tail.append("")
    tail += [f"[[Category:{c}]]" for c in categories(w, e)]
    if article.interwiki:
        tail.append("")
        tail += [f"[[{lang}:{e.label}]]" for lang in article.interwiki]
    return "\n".join(head) + "\n", render_body(w, e, article.sections), "\n\n" + "\n".join(tail) + "\n"
