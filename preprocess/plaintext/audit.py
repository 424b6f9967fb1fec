"""Quality figures of rendered plain text: markup left over, sentences split after abbreviations.

Both are counted per 1,000 words so that dumps of any size compare. tests/preprocess/
test_real_dump.py holds the renderer to zero on a real English Wikipedia dump, and
tools/bench_diffset.py prints them next to its throughput.

What counts as leftover markup: ``[[``, ``]]``, ``{{``, ``}}``, ``|``, ``''`` (a bold/italic
quote run), a heading's ``==``, an HTML tag (``<ref>``, ``</span>``, ``<br/>``), a comment
delimiter and a named or numeric character entity (``&nbsp;``). A lone ``<`` or ``>`` is not
counted: "n > 3" is prose, and MediaWiki prints it as such.

What counts as an abbreviation split: a sentence that ends with one of :data:`ABBREVIATION_TESTS`
(the abbreviations that never end a sentence in running prose), a single capital initial
("J."), or a month abbreviation before a number ("Jan. | 5").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

__all__ = [
    "ABBREVIATION_TESTS",
    "abbreviation_splits",
    "leftover_markup",
    "per_thousand_words",
]

_MARKUP = re.compile(
    r"\[\[|\]\]|\{\{|\}\}|\||''|==|<!--|-->|</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>"
    r"|&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"
)
# Titles and ranks, then the abbreviations of citations and Latin: a sentence boundary right
# after one of these is a split in the wrong place.
ABBREVIATION_TESTS = frozenset(
    str.split(
        """Gen. Brig. Maj. Col. Lt. Capt. Sgt. Bvt. Adm. Gov. Sen. Rep. Rev. St. Mr. Mrs. Ms. Dr.
    Prof. Jr. Sr. Vol. vol. No. p. pp. cf. Ch. ch. Fig. fig. ed. eds. c. ca. approx. e.g.
    i.e. vs. v. etc."""
    )
)
# no. is an abbreviation only before a number ("the answer was no." ends a sentence).
_BEFORE_NUMBER = frozenset(
    str.split("Jan. Feb. Mar. Apr. Jun. Jul. Aug. Sep. Sept. Oct. Nov. Dec. no.")
)
_OPENERS = "\"'“‘«([{"


def leftover_markup(texts: Iterable[str]) -> Counter[str]:
    """How often each kind of leftover markup occurs in ``texts`` (tags counted as ``<tag>``,
    entities as ``&entity;``)."""
    found: Counter[str] = Counter()
    for text in texts:
        for m in _MARKUP.finditer(text):
            token = m.group()
            if token.startswith("<") and token != "<!--":
                token = "<tag>"
            elif token.startswith("&"):
                token = "&entity;"
            found[token] += 1
    return found


def abbreviation_splits(sentences: list[str]) -> list[tuple[str, str]]:
    """``(sentence, next sentence)`` for each boundary right after an abbreviation or initial
    among the consecutive ``sentences`` of one paragraph."""
    splits = []
    for sentence, following in zip(sentences, sentences[1:], strict=False):
        words = sentence.split()
        word = words[-1].lstrip(_OPENERS) if words else ""
        two = " ".join(words[-2:])
        if (
            word in ABBREVIATION_TESTS
            or two == "et al."
            or (len(word) == 2 and word[0].isupper() and word[1] == ".")
            or (word in _BEFORE_NUMBER and following[:1].isdigit())
        ):
            splits.append((sentence, following))
    return splits


def per_thousand_words(count: int, words: int) -> float:
    """``count`` per 1,000 words (0.0 for no words)."""
    return 1000.0 * count / words if words else 0.0
