"""Helpers shared by the article builders: making sentences from templates, fresh slot values.

``make`` picks a wording at random and fills its slots from a context; slots the context lacks
(``y3``, ``n5``, ``painter`` ...) get fresh values here, which is what lets the same spare
templates serve every article while staying unique within each.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .model import Para, Value, time_value
from .names import SAINTS
from .schema import MONTH_NAMES
from .text import NDASH, Frag, Sent, concat, link, slots, words
from .world import World

LANGUAGES = ("French", "Spanish", "Italian", "Dutch", "Portuguese", "Swedish", "Polish")
NICKNAMES = ("Iron Fox", "Quiet Storm", "Lighthouse", "Silver Hawk", "Old Oak", "North Wind")
ORDINALS = ("tenth", "twentieth", "twenty-fifth", "fiftieth", "hundredth", "seventy-fifth")
_SPECIAL = {"_nbsp", "_ndash", "_amp"}


@lru_cache(maxsize=256)
def _base(name: str) -> str:
    return re.sub(r"\d.*$", "", name)


def fresh_value(w: World, name: str, ctx: dict) -> str | int | Frag:
    """A value for a slot the context does not define (spare sentences)."""
    r = w.rng
    if name == "season":  # the season before the world's start: 2020-21
        return concat(str(w.year(2020)), NDASH, f"{w.year(2021) % 100:02d}")
    if name == "lastyear":  # the last full year before the world's start
        return str(w.year(2020))
    base = _base(name)
    lo = max(int(ctx.get("ymin", w.year(1990))), w.year(1900))
    if base == "y":
        return r.randint(lo, max(lo, w.year(2020)))
    if name == "n2":
        return r.randint(11, 95)
    if name == "n3":
        return r.randint(120, 980)
    if name == "n5":
        return r.randint(12, 95) * 1000 + r.randint(1, 9) * 100
    if name == "painter":
        return w.names.first_name(r.choice(["male", "female"])) + " " + w.names.surname()
    if name == "lang":
        return r.choice(LANGUAGES)
    if name == "nick":
        return r.choice(NICKNAMES)
    if name == "nth":
        return r.choice(ORDINALS)
    if name == "ucity":
        cities = w.of_kind("city")
        return words(r.choice(cities).label) if cities else "Varnholt"
    if name == "saint":
        return r.choice(SAINTS)
    raise KeyError(f"no value for slot {name!r}")


@lru_cache(maxsize=2048)
def _slot_names(variants: tuple[str, ...]) -> tuple[str, ...]:
    names: list[str] = []
    for v in variants:
        for n in slots(v):
            if n not in names and n not in _SPECIAL:
                names.append(n)
    return tuple(names)


def make(w: World, key: str, variants: tuple[str, ...], ctx: dict, *,
         month: int | None = None, variant: int | None = None, **extra) -> Sent:
    """A sentence of the family ``variants`` with slots filled from ``extra``, then ``ctx``."""
    params: dict = {}
    for n in _slot_names(variants):
        if n in extra:
            params[n] = extra[n]
        elif n in ctx:
            params[n] = ctx[n]
        else:
            params[n] = fresh_value(w, n, ctx)
    if variant is None:
        variant = int(w.rng.random() * len(variants))
    return Sent(key, variants, params, variant, born=w.month if month is None else month)


def para(w: World, ctx: dict, table: dict, keys: list[str], **kw) -> Para:
    """A paragraph of the named sentences of ``table``, in order."""
    return Para([make(w, k, table[k], ctx) for k in keys], lines=w.rng.random() < 0.15, **kw)


def pick(w: World, keys: list[str], k_min: int) -> list[str]:
    """A random subset of ``keys`` in their order, at least ``k_min`` long."""
    chosen = [k for k in keys if w.rng.random() < 0.7]
    while len(chosen) < min(k_min, len(keys)):
        extra = w.rng.choice([k for k in keys if k not in chosen])
        chosen = [k for k in keys if k in chosen or k == extra]
    return chosen


def date_text(value: Value, nbsp: bool = False) -> str | Frag:
    """``12 March 1990`` for a day-precision time value (with ``&nbsp;`` after the day if asked)."""
    t = value[1]
    y, m, d = int(t[1:5]), int(t[6:8]), int(t[9:11])
    if value[2] < 11:
        return f"{MONTH_NAMES[m - 1]} {y}" if value[2] == 10 else str(y)
    if nbsp:
        return concat(str(d), Frag("&nbsp;", " "), f"{MONTH_NAMES[m - 1]} {y}")
    return f"{d} {MONTH_NAMES[m - 1]} {y}"


def elink(w: World, qid: str, trail: str = "") -> Frag:
    """A link to the entity's article (its current title), labelled with its name."""
    e = w.get(qid)
    title = e.article.title if e.article else e.label
    return link(title, e.label, trail)


def pronouns(gender: str) -> dict[str, str]:
    if gender == "female":
        return {"he": "she", "He": "She", "his": "her", "His": "Her", "him": "her"}
    return {"he": "he", "He": "He", "his": "his", "His": "His", "him": "him"}


def change_date(w: World) -> tuple[Value, str]:
    """A random day within the month being evolved (2021-08 for the first pair ...)."""
    month = w.changing().date
    day = w.rng.randint(2, 28)
    return (time_value(month.year, month.month, day),
            f"{day} {MONTH_NAMES[month.month - 1]} {month.year}")


def month_year(w: World) -> str:
    """``August 2021``: the month being evolved, as a sentence names it (the ``when`` slot)."""
    return w.changing().long_name


def cite(w: World, name: str, title: str, year: int) -> str:
    """A ``<ref name=..>{{cite web ...}}</ref>`` for a sentence tail."""
    r = w.rng
    outlet = r.choice(["varnholt-herald", "corvania-post", "selden-times", "kessel-daily", "telmoria-news"])
    slug = "-".join(title.lower().split()[:4])
    day, month = r.randint(1, 28), r.choice(MONTH_NAMES)
    return (
        f'<ref name="{name}">{{{{cite web |url=https://www.{outlet}.example/{year}/{slug} '
        f"|title={title} |publisher={outlet.replace('-', ' ').title()} |date={day} {month} {year} "
        f"|access-date={r.randint(1, 28)} {r.choice(MONTH_NAMES)} {w.year(2020)}}}}}</ref>"
    )


def add_refs(w: World, sents: list[Sent], title: str, year: int) -> None:
    """Attach references (named, some reused), and now and then a comment or ``<br />``."""
    r = w.rng
    if not sents:
        return
    chosen = r.sample(range(len(sents)), min(len(sents), r.randint(2, 4)))
    names = []
    for i, idx in enumerate(sorted(chosen)):
        name = f"{title.split()[-1].lower()}{i + 1}"
        sents[idx].tail += cite(w, name, f"{title} profile part {i + 1}", min(year + i, w.year(2021)))
        names.append((idx, name))
    for idx, name in names[:1]:
        later = [j for j in range(idx + 1, len(sents)) if j not in chosen]
        if later:
            sents[r.choice(later)].tail += f'<ref name="{name}" />'
    roll = r.random()
    j = r.randrange(len(sents))
    if roll < 0.15:
        sents[j].tail += f"{{{{citation needed|date=March {w.year(2020)}}}}}"
    elif roll < 0.3:
        sents[j].tail += "<!-- source in the talk page archive -->"
    elif roll < 0.4:
        sents[j].tail += "<br />"
