"""Sentence pairs: every prose sentence is built once, as wikitext and as plain text together.

The generator never derives plain text by parsing its own wikitext; it assembles both sides
from fragments (a link is ``[[Target|label]]`` on one side and ``label`` on the other), so the
ground truth is independent of any wikitext parser and can check one.

A sentence is a template with named slots (``"{He} joined {club} in {year}."``) plus the values
that fill them. Keeping the template and the values, rather than only the finished string, is
what lets the month-to-month edits reword a sentence (switch to another variant) or change a
number in it and still know the exact new plain text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple


class Frag(NamedTuple):
    """A piece of text as it appears in wikitext and as it reads after conversion."""

    wiki: str
    plain: str


# Literal text may not carry wiki meaning; everything with markup goes through a Frag.
_BAD_LITERAL = re.compile(r"[\[\]{}<>|&=\n]|''|https?:|__|~~~")

NBSP = Frag("&nbsp;", " ")
NDASH = Frag("&ndash;", "\u2013")
AMP = Frag("&amp;", "&")
_SPECIAL = {"_nbsp": NBSP, "_ndash": NDASH, "_amp": AMP}


def check_literal(text: str) -> str:
    """Refuse literal text that a wikitext parser would not pass through unchanged."""
    if _BAD_LITERAL.search(text):
        raise ValueError(f"literal text with wiki markup: {text!r}")
    return text


def link(target: str, label: str | None = None, trail: str = "") -> Frag:
    """An internal link; ``trail`` (lowercase letters) is glued to the label as MediaWiki does."""
    if trail and not trail.isalpha():
        raise ValueError(f"link trail must be letters: {trail!r}")
    if label is None or label == target:
        return Frag(f"[[{target}]]{trail}", target + trail)
    return Frag(f"[[{target}|{label}]]{trail}", label + trail)


def words(text: str) -> Frag:
    """Plain words that may hold ``&`` (as in company names), written ``&amp;`` in wikitext."""
    check_literal(text.replace("&", ""))
    return Frag(text.replace("&", "&amp;"), text)


def _as_frag(x: str | Frag) -> Frag:
    return x if isinstance(x, Frag) else words(x)


def bold(x: str | Frag) -> Frag:
    f = _as_frag(x)
    return Frag(f"'''{f.wiki}'''", f.plain)


def italic(x: str | Frag) -> Frag:
    f = _as_frag(x)
    return Frag(f"''{f.wiki}''", f.plain)


def small(x: str | Frag) -> Frag:
    f = _as_frag(x)
    return Frag(f"<small>{f.wiki}</small>", f.plain)


def ext(url: str, label: str) -> Frag:
    """An external link with a label; the URL vanishes from plain text."""
    return Frag(f"[{url} {check_literal(label)}]", label)


def concat(*parts: str | Frag) -> Frag:
    frags = [_as_frag(p) for p in parts]
    return Frag("".join(f.wiki for f in frags), "".join(f.plain for f in frags))


def fmt_int(n: int) -> str:
    """Numbers of five digits and more get thousands separators, as English Wikipedia writes them."""
    return f"{n:,}" if n >= 10000 else str(n)


@lru_cache(maxsize=4096)
def _parse(template: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    pieces = re.split(r"\{(\w+)\}", template)
    literals = tuple(check_literal(p) for p in pieces[0::2])
    return literals, tuple(pieces[1::2])


def slots(template: str) -> tuple[str, ...]:
    """The slot names of a template, in order."""
    return _parse(template)[1]


ParamValue = str | int | Frag


@dataclass
class Sent:
    """One prose sentence: a template family, its current variant and its slot values.

    ``tail`` is wikitext that follows the sentence and has no plain text (a reference, a
    comment, ``<br />``). ``born`` is the month index at which the current wording appeared:
    the generator's own record of what is new, checked against the text-level diff.
    """

    key: str
    variants: tuple[str, ...]
    params: dict[str, ParamValue]
    variant: int = 0
    tail: str = ""
    born: int = 0
    _cache: Frag | None = field(default=None, repr=False, compare=False)

    def render(self) -> Frag:
        if self._cache is None:
            literals, names = _parse(self.variants[self.variant])
            wiki: list[str] = [literals[0]]
            plain: list[str] = [literals[0]]
            for name, lit in zip(names, literals[1:], strict=True):
                value = _SPECIAL.get(name) or self.params[name]
                if isinstance(value, Frag):
                    wiki.append(value.wiki)
                    plain.append(value.plain)
                elif isinstance(value, int):
                    wiki.append(fmt_int(value))
                    plain.append(fmt_int(value))
                else:
                    wiki.append(check_literal(value))
                    plain.append(value)
                wiki.append(lit)
                plain.append(lit)
            self._cache = Frag("".join(wiki), " ".join("".join(plain).split()))
        return self._cache

    @property
    def wiki(self) -> str:
        return self.render().wiki + self.tail

    @property
    def plain(self) -> str:
        return self.render().plain

    def reword(self, month: int) -> None:
        """Switch to the next variant (same facts, different words)."""
        if len(self.variants) < 2:
            raise ValueError(f"sentence {self.key!r} has one wording only")
        self.variant = (self.variant + 1) % len(self.variants)
        self._cache = None
        self.born = month

    def update(self, month: int, **params: ParamValue) -> None:
        """Change slot values (a new club, a new number); the sentence counts as new text."""
        self.params.update(params)
        self._cache = None
        self.born = month

    def numbers(self) -> list[str]:
        """Slots of the current variant holding integers of three digits or more."""
        names = slots(self.variants[self.variant])
        return [n for n in names if isinstance(self.params.get(n), int) and self.params[n] >= 100]
