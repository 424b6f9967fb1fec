"""Self-checks the generator runs on its own output (cheap enough to run on every build).

The sentence rules of docs/plaintext.md are restated here as a small reference splitter, so a
template that would make an ambiguous boundary (a sentence ending in ``Inc.``, an inner
``. The``) fails the build instead of silently disagreeing with the pipeline's splitter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ABBREVIATIONS = frozenset(
    ["Dr", "Mr", "Mrs", "Ms", "Prof", "St", "Mt", "Jr", "Sr", "Gen", "Col", "Lt", "Sgt", "Capt", "Gov", "Sen", "Rep", "Rev", "Hon", "Inc", "Ltd", "Co", "Corp", "Bros", "No", "vs", "etc", "e.g", "i.e", "c", "ca", "approx", "est", "fl", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "U.S", "U.K", "a.m", "p.m"]
)

_BOUNDARY = re.compile(r"[.!?][\"')\]\u201d\u2019]*(?=\s+[A-Z0-9\"'(\[\u201c\u2018])")
_TOKEN_BEFORE = re.compile(r"(\S+)$")


def _no_split_after(text_before_dot: str) -> bool:
    """True when the period that follows ``text_before_dot`` belongs to an abbreviation or initial."""
    m = _TOKEN_BEFORE.search(text_before_dot)
    if not m:
        return False
    token = m.group(1).lstrip("(\"'[")
    if token in ABBREVIATIONS:
        return True
    return len(token) == 1 and token.isupper()


def split_sentences(paragraph: str) -> list[str]:
    """Split one plain paragraph by the rules of docs/plaintext.md (reference version)."""
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(paragraph):
        if paragraph[m.start()] == "." and _no_split_after(paragraph[start : m.start()]):
            continue
        out.append(paragraph[start : m.end()].strip())
        start = m.end()
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return out


def sentence_problems(sentence: str) -> list[str]:
    """What is wrong with a sentence the generator wants to emit (empty list: nothing)."""
    problems = []
    if not sentence or sentence != sentence.strip() or "  " in sentence:
        problems.append("whitespace")
        return problems
    if not (sentence[0].isupper() or sentence[0].isdigit()):
        problems.append("does not start with an uppercase letter or digit")
    if sentence[-1] not in ".!?":
        problems.append("does not end with . ! or ?")
    elif sentence[-1] == "." and _no_split_after(sentence[:-1]):
        problems.append("ends with an abbreviation or initial")
    if split_sentences(sentence) != [sentence]:
        problems.append("splits into several sentences")
    return problems


def check_paragraphs(title: str, paragraphs: Iterable[list[str]]) -> None:
    """Raise if a paragraph would not split back into exactly its sentences, or one repeats."""
    seen: set[str] = set()
    for sentences in paragraphs:
        for s in sentences:
            problems = sentence_problems(s)
            if problems:
                raise AssertionError(f"{title}: bad sentence {s!r}: {', '.join(problems)}")
            if s in seen:
                raise AssertionError(f"{title}: sentence repeated: {s!r}")
            seen.add(s)
        joined = " ".join(sentences)
        if split_sentences(joined) != sentences:
            raise AssertionError(f"{title}: paragraph does not split back: {sentences!r}")
