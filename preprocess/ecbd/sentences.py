"""Entity sentence collection (ECBD §2.2): the definition and the sentences that mention the entity.

- The article must have at least ``min_words`` words (whitespace-separated, all paragraphs): the
  paper drops stubs under 500 words.
- Its first paragraph, split into sentences, is the entity's *definition*; its sentences are never
  cloze sentences.
- Every sentence of a later paragraph with at least ``min_sentence_words`` words (5) that mentions
  the entity is a candidate. A mention is an occurrence of one of the entity's names (English
  label, article title without a trailing "(disambiguation)", Wikidata aliases), case-sensitive,
  not inside a longer word, and not inside double quotes ("…" or “…”), where names are often
  part of a title of their own. The earliest such occurrence is the mention (the longest name
  when several start there); every occurrence of any name is remembered so that masked spans can
  avoid them all.

Paragraph and sentence indices are those of the article (paragraph 0 is the definition), as the
released ``ex_id`` (``{title}_{pageid}_{paragraph}_{sentence}``) numbers them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from tw_jax.preprocess.plaintext.sentences import split_sentences
from tw_jax.preprocess.runners.accounting import Skips

MIN_SENTENCE_WORDS = 5
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”')
_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)$")

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A sentence that mentions the entity, with where the mention is."""

    paragraph: int
    sentence: int
    text: str
    mention: Span  # characters of the chosen mention
    occurrences: tuple[Span, ...]  # every unquoted or quoted occurrence of any name

    @property
    def mention_text(self) -> str:
        return self.text[self.mention[0] : self.mention[1]]


def entity_names(label: str, titles: Iterable[str | None], aliases: Iterable[str]) -> list[str]:
    """The names to look for: label, titles (without a trailing parenthetical), aliases; each
    once, in that order."""
    names: list[str] = []
    for name in [label, *(_DISAMBIGUATION.sub("", t) for t in titles if t), *aliases]:
        name = " ".join(name.split())
        if name and name not in names:
            names.append(name)
    return names


@lru_cache(maxsize=4096)
def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)")


def occurrences(text: str, names: Sequence[str]) -> list[Span]:
    """Character spans of every occurrence of every name, on word boundaries, sorted."""
    found = {(m.start(), m.end()) for name in names for m in _name_pattern(name).finditer(text)}
    return sorted(found)


def quoted_regions(text: str) -> list[Span]:
    """Characters inside (and including) double-quote pairs."""
    return [(m.start(), m.end()) for m in _QUOTED.finditer(text)]


def _overlaps(span: Span, regions: Sequence[Span]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in regions)


def find_mention(text: str, names: Sequence[str]) -> tuple[Span | None, list[Span], str | None]:
    """``(mention, all occurrences, reason)``: the earliest unquoted occurrence (longest at a
    tie), or None and why (``no_mention`` / ``mention_in_quotes``)."""
    found = occurrences(text, names)
    if not found:
        return None, found, "no_mention"
    quoted = quoted_regions(text)
    free = [span for span in found if not _overlaps(span, quoted)]
    if not free:
        return None, found, "mention_in_quotes"
    start = free[0][0]
    mention = max((s for s in free if s[0] == start), key=lambda s: s[1])
    return mention, found, None


def word_count(paragraphs: Sequence[str]) -> int:
    return sum(len(p.split()) for p in paragraphs)


def definition_of(paragraphs: Sequence[str]) -> list[str]:
    """The definition: the sentences of the first paragraph."""
    return split_sentences(paragraphs[0]) if paragraphs else []


def candidate_sentences(
    paragraphs: Sequence[str],
    names: Sequence[str],
    skips: Skips,
    where: str,
    *,
    min_sentence_words: int = MIN_SENTENCE_WORDS,
) -> list[Candidate]:
    """The sentences of paragraphs 1… that mention the entity (see the module docstring).

    Sentences without a mention are not counted (most of an article); short sentences and
    mentions only inside quotes are, under ``short_sentence`` / ``mention_in_quotes``.
    """
    out = []
    for p_index, paragraph in enumerate(paragraphs[1:], start=1):
        for s_index, sentence in enumerate(split_sentences(paragraph)):
            mention, found, reason = find_mention(sentence, names)
            if reason == "no_mention":
                continue
            if len(sentence.split()) < min_sentence_words:
                skips.add("short_sentence", f"{where} {p_index}_{s_index}")
                continue
            if mention is None:
                skips.add(str(reason), f"{where} {p_index}_{s_index}")
                continue
            out.append(Candidate(p_index, s_index, sentence, mention, tuple(found)))
    return out
