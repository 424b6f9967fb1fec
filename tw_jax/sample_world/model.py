"""The data the generator keeps between months: entities with statements, articles as blocks.

An article is stored as sections of blocks of :class:`~.text.Sent` objects, not as text: the
wikitext and the plain paragraphs are both rendered from it, and the month-to-month edits
operate on it (insert a sentence, reword one), so each edit knows its effect on plain text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .schema import MONTH_NAMES
from .text import Sent

# A Wikidata value: ("item", qid) | ("time", "+1990-03-12T00:00:00Z", precision)
# | ("quantity", "+1234", unit_qid or None) | ("string", text) | ("mono", text)
Value = tuple


def item(qid: str) -> Value:
    return ("item", qid)


def time_value(year: int, month: int = 0, day: int = 0) -> Value:
    """Day, month or year precision (11, 10, 9) depending on which parts are given."""
    precision = 11 if day else 10 if month else 9
    return ("time", f"+{year:04d}-{month:02d}-{day:02d}T00:00:00Z", precision)


def quantity(amount: int | str, unit: str | None = None) -> Value:
    return ("quantity", f"+{amount}", unit)


def string(text: str) -> Value:
    return ("string", text)


def mono(text: str) -> Value:
    return ("mono", text)


def render_time(value: Value) -> str:
    """``12 March 1990`` / ``March 1990`` / ``1990`` by precision, as the probes print them."""
    _, t, precision = value
    year, month, day = int(t[1:5]), int(t[6:8]), int(t[9:11])
    if precision >= 11:
        return f"{day} {MONTH_NAMES[month - 1]} {year}"
    if precision == 10:
        return f"{MONTH_NAMES[month - 1]} {year}"
    return str(year)


@dataclass
class Statement:
    """One Wikidata statement; ``snaktype`` other than "value" has no value."""

    sid: str
    prop: str
    value: Value | None
    rank: str = "normal"
    snaktype: str = "value"
    qualifiers: list[tuple[str, Value]] = field(default_factory=list)
    reference_url: str | None = None

    def counts(self) -> bool:
        """Whether the statement is a fact: a value snak that is not deprecated."""
        return self.snaktype == "value" and self.rank != "deprecated"


@dataclass
class Para:
    """A prose paragraph; ``lines`` writes one sentence per source line (same plain text)."""

    sents: list[Sent]
    lines: bool = False
    above: str = ""  # raw wikitext line(s) right above the paragraph: a file link, a hatnote


@dataclass
class Items:
    """A bulleted list; each item is one sentence and its own plain paragraph."""

    sents: list[Sent]


@dataclass
class Raw:
    """Wikitext with no plain text: a table, a gallery, a comment on its own."""

    wiki: str


Block = Para | Items | Raw


@dataclass
class Section:
    title: str | None
    level: int
    blocks: list[Block]


@dataclass
class Article:
    """A main-namespace article: page id, title, and its body as sections of blocks."""

    page_id: int
    title: str
    sections: list[Section]
    dmy: str  # the {{Use dmy dates}} date, fixed when the article was written
    notoc: bool = False
    interwiki: tuple[str, ...] = ()
    see_also: tuple[str, ...] = ()  # link targets, fixed when written (red links if deleted later)

    def sentences(self) -> list[Sent]:
        out: list[Sent] = []
        for section in self.sections:
            for block in section.blocks:
                if isinstance(block, Para | Items):
                    out.extend(block.sents)
        return out

    def keys(self) -> set[str]:
        return {s.key for s in self.sentences()}

    def section(self, title: str | None) -> Section | None:
        for s in self.sections:
            if s.title == title:
                return s
        return None

    def plain(self) -> list[list[str]]:
        """The article as plain paragraphs of sentences (docs/plaintext.md)."""
        out: list[list[str]] = []
        for section in self.sections:
            for block in section.blocks:
                if isinstance(block, Para):
                    out.append([s.plain for s in block.sents])
                elif isinstance(block, Items):
                    out.extend([s.plain] for s in block.sents)
        return [p for p in out if p]


@dataclass
class Entity:
    """A Wikidata item, with its article (if it has one) and prose-only attributes."""

    qid: str
    kind: str
    label: str
    description: str
    aliases: list[str] = field(default_factory=list)
    claims: dict[str, list[Statement]] = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    article: Article | None = None
    other_labels: dict[str, str] = field(default_factory=dict)
    created: int = 0

    @property
    def num(self) -> int:
        return int(self.qid[1:])

    def values(self, prop: str) -> list[Value]:
        """Values of the statements that count as facts for ``prop``."""
        return [s.value for s in self.claims.get(prop, []) if s.counts()]

    def items(self, prop: str) -> list[str]:
        return [v[1] for v in self.values(prop) if v[0] == "item"]

    def first(self, prop: str) -> str | None:
        found = self.items(prop)
        return found[0] if found else None
