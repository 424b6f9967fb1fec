"""Split a plain-text paragraph into sentences, by the Sentences section of docs/plaintext.md.

DiffSets compare articles sentence by sentence and ECBD/EvolvingQA cut contexts at sentence
boundaries, so the splitter must be predictable rather than clever: a sentence ends at ``.``,
``!`` or ``?`` (plus any closing quotes or brackets) followed by whitespace and an uppercase
letter, a digit, or an opening quote or bracket -- except after a known abbreviation or a
capital initial. One precompiled regex finds the candidates; two set/regex checks veto some.

The sentences are stripped and, joined with single spaces, give back the paragraph with its
whitespace normalised, so a caller can always map sentences back onto the paragraph.

Decisions the spec leaves open:

* ``ABBREVIATIONS`` holds the spec's list, ``Sept.``, more military and clerical ranks (``Maj.``,
  ``Brig.``, ``Bvt.``, ``Adm.`` …) and the abbreviations of citations in prose (``Vol.``, ``pp.``,
  ``cf.``, ``Ch.``, ``Fig.``, ``ed.``, ``lit.`` …), which real articles write before a capital
  ("Maj. Gen. Leonidas Polk", "cf. Lewis 2004", "(Ch. IX)"); matching is case-sensitive
  (``No.`` is an abbreviation; ``no.`` ends a sentence unless a number follows, below). It is
  a frozenset, so extend it by rebinding (``sentences.ABBREVIATIONS |= {"Tab."}``) or pass
  ``abbreviations=`` per call.
* :data:`BEFORE_NUMBERS` holds the abbreviations that also end sentences ("the answer was no.",
  "as found by Smith et al."): they end none before a digit or an opening bracket ("no. 5",
  "Chaubey et al. (2010)"), as an abbreviation is followed there and a sentence rarely starts.
* The word before the period is compared with leading opening quotes/brackets removed:
  ``(c. 1500)`` and ``"Dr. Who"`` keep their abbreviation.
* A run of capital initials (``J.``, ``R.R.``, ``U.S.A.``) counts as initials, not just a
  single one, so ``George R.R. Martin`` stays one sentence.
* ``"inside a number"`` needs no rule of its own: a period inside ``3.5`` or ``2.0`` is not
  followed by whitespace, so it is never a candidate.
* ``...``, ``?!`` and similar runs end a sentence like a single mark.
"""

from __future__ import annotations

import re

__all__ = ["ABBREVIATIONS", "BEFORE_NUMBERS", "collapse_whitespace", "split_sentences"]

ABBREVIATIONS: frozenset[str] = frozenset(
    str.split(
        """
    Dr. Mr. Mrs. Ms. Prof. St. Mt. Jr. Sr. Gen. Col. Lt. Sgt. Capt. Gov. Sen. Rep. Rev. Hon.
    Inc. Ltd. Co. Corp. Bros.
    No. vs. etc. e.g. i.e. c. ca. approx. est. fl.
    Jan. Feb. Mar. Apr. Jun. Jul. Aug. Sep. Sept. Oct. Nov. Dec.
    U.S. U.K. a.m. p.m.
    Maj. Brig. Bvt. Adm. Cmdr. Cdr. Cpl. Pvt. Msgr.
    Vol. vol. Vols. vols. p. pp. cf. Cf. Ch. ch. Chap. chap. Fig. fig. Figs. figs. ed. eds. lit. v.
    """
    )
)
# Abbreviations that also end sentences: they end none before a digit or an opening bracket.
# "et al." is looked up as two words.
BEFORE_NUMBERS: frozenset[str] = frozenset({"no.", "et al."})

_OPENERS = "\"'“‘«([{"
_CLOSERS = "\"'”’»)]}"
# Terminator run (group 1) and closing marks before a space and the next character (group 2).
# The paragraph has been whitespace-normalised, so the separator is exactly one space, never at
# the end; the next character is checked in Python (``re`` has no class for "uppercase letter").
# "[.!?][.!?]*" rather than "[.!?]+": the same matches, but a pattern that starts with one
# character class is searched for that character first, in C (a fifth of the splitting time).
_CANDIDATE = re.compile(r"([.!?][.!?]*)[" + re.escape(_CLOSERS) + r"]*(?= (.))", re.DOTALL)
_INITIALS = re.compile(r"(?:[^\W\d_]\.)+")


def _vetoed(text: str, end: int, abbreviations: frozenset[str], following: str) -> bool:
    """Whether the period at ``text[end - 1]`` belongs to an abbreviation or initials;
    ``following`` is the first character of the next word."""
    start = text.rfind(" ", 0, end) + 1
    word = text[start:end].lstrip(_OPENERS)
    if word in abbreviations:
        return True
    if following.isdigit() or following in _OPENERS:
        if word == "al." and text[max(start - 3, 0) : start] in {"et ", "Et "}:
            word = "et al."
        if word in BEFORE_NUMBERS:
            return True
    return word.isupper() and _INITIALS.fullmatch(word) is not None


def collapse_whitespace(text: str) -> str:
    """``text`` with whitespace runs collapsed to one space and its ends stripped
    (``" ".join(text.split())``), without splitting when it is so already but for its ends.

    Paragraphs nearly always are (their whitespace collapsed, or at most a space at either end
    left by removed markup). Every character that ``str.split()`` splits on but the space is
    unprintable, so a printable text with no ``"  "`` is collapsed by stripping its ends.
    (isprintable, which looks at every character, last.)
    """
    if "  " not in text and text.isprintable():
        return text.strip(" ") if text[:1] == " " or text[-1:] == " " else text
    return " ".join(text.split())


def split_sentences(paragraph: str, abbreviations: frozenset[str] | None = None) -> list[str]:
    """The sentences of ``paragraph``, stripped; ``" ".join`` of them is the paragraph with
    whitespace runs collapsed to one space and ends stripped. An empty paragraph gives []."""
    text = collapse_whitespace(paragraph)
    if not text:
        return []
    known = ABBREVIATIONS if abbreviations is None else abbreviations
    sentences: list[str] = []
    start = 0
    for m in _CANDIDATE.finditer(text):
        following = m[2]
        if not (following.isupper() or following.isdigit() or following in _OPENERS):
            continue
        if m[1][-1] == "." and _vetoed(text, m.end(1), known, following):
            continue
        end = m.end()
        sentences.append(text[start:end])
        start = end + 1
    sentences.append(text[start:])
    return sentences
