"""Span selection (ECBD §2.2): noun-phrase and random spans after the entity mention.

Every masked span must (a) not overlap the mention -- nor any other occurrence of the entity's
names, which would make the cloze ask for the entity itself --, (b) start after the mention, and
(c) start at most ``max_distance`` (10) words after the mention's end. Words are spaCy tokens.
The reference code meant to enforce (b) and (c) for random spans but drew start positions from
ten tokens *before* the mention onwards and never checked the filter it describes, so its random
spans could precede the mention; here both rules hold for both span types, always.

- **NP spans** (``NP-COMMON`` / ``NP-PROPER``): spaCy's noun chunks and each chunk's whole subtree
  (``root.left_edge`` … ``root.right_edge``), at most ``max_tokens`` (5) tokens, not only
  punctuation or symbols, not only pronouns, without an unmatched bracket or quote at one end.
  Where a span and the same span without its leading determiner are both kept, the one with the
  determiner wins. A phrase is proper when all its words are proper nouns, its last word is, or
  it is a determiner followed by a proper noun.
- **Random spans** (``RANDOM``): a length drawn uniformly from 1…``max_tokens``, then a start drawn
  uniformly among the positions where a span of that length satisfies the rules, neither starting
  nor ending with punctuation; up to ``random_per_sentence`` (5) distinct spans, from a generator
  seeded by (seed, entity, paragraph, sentence), so the output does not depend on the order in
  which entities are processed.

The parser comes from :func:`load_parser` (noun chunks need the tagger and the dependency parser;
NER and the lemmatizer are left out), found by name as the SSM stage finds its pipeline.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tw_jax.preprocess.ecbd.sentences import Candidate
from tw_jax.text.spacy_pipeline import SpacyModelError, resolve_model

SENTINEL_0, SENTINEL_1 = "<extra_id_0>", "<extra_id_1>"
NP_COMMON, NP_PROPER, RANDOM = "NP-COMMON", "NP-PROPER", "RANDOM"
MAX_TOKENS = 5
MAX_DISTANCE = 10
RANDOM_PER_SENTENCE = 5
_RANDOM_TRIALS = 100
_SYMBOLS = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_PARSER_COMPONENTS = frozenset({"tok2vec", "tagger", "parser", "attribute_ruler", "morphologizer"})


def load_parser(name: str = "en_core_web_sm") -> tuple[Any, str]:
    """The spaCy pipeline ``name`` with what noun chunks need, and what was loaded."""
    import spacy
    from spacy.util import load_config

    source, folder = resolve_model(name)
    config = load_config(folder / "config.cfg", interpolate=False)
    pipeline = list(config["nlp"]["pipeline"])
    nlp = spacy.load(folder, exclude=[c for c in pipeline if c not in _PARSER_COMPONENTS])
    if "parser" not in nlp.pipe_names:
        raise SpacyModelError(f"spaCy pipeline {name!r} has no parser: no noun chunks")
    return nlp, source


@dataclass(frozen=True, slots=True)
class MaskedSpan:
    """One span to mask: token range, characters, text and type."""

    start: int  # first token
    end: int  # one past the last token
    chars: tuple[int, int]
    text: str
    span_type: str


def mention_tokens(doc: Any, mention: tuple[int, int]) -> tuple[int, int]:
    """The tokens covering the mention's characters."""
    span = doc.char_span(mention[0], mention[1], alignment_mode="expand")
    return span.start, span.end


def _blocked_tokens(doc: Any, spans: Sequence[tuple[int, int]]) -> set[int]:
    """Tokens overlapping any occurrence of the entity's names."""
    blocked: set[int] = set()
    for start, end in spans:
        span = doc.char_span(start, end, alignment_mode="expand")
        if span is not None:
            blocked.update(range(span.start, span.end))
    return blocked


def _allowed(start: int, end: int, mention_end: int, blocked: set[int], max_distance: int) -> bool:
    """Rules (a)-(c) of the module docstring for tokens ``[start, end)``."""
    if start < mention_end or start - mention_end > max_distance:
        return False
    return not any(i in blocked for i in range(start, end))


def _acceptable_np(span: Any, max_tokens: int) -> bool:
    if len(span) > max_tokens or len(span) == 0:
        return False
    pos = [t.pos_ for t in span]
    first_punct, last_punct = pos[0] == "PUNCT", pos[-1] == "PUNCT"
    if first_punct != last_punct and pos.count("PUNCT") == 1:
        return False  # an unmatched bracket or quote at one end
    if all(all(c in _SYMBOLS or c.isspace() for c in t.text) for t in span):
        return False
    return not all(p == "PRON" for p in pos)


def _is_proper(span: Any) -> bool:
    pos = [t.pos_ for t in span]
    if pos[-1] == "PROPN" or all(p == "PROPN" for p in pos):
        return True
    return len(pos) > 1 and pos[0] == "DET" and pos[1] == "PROPN"


def _masked(doc: Any, start: int, end: int, span_type: str) -> MaskedSpan:
    span = doc[start:end]
    return MaskedSpan(start, end, (span.start_char, span.end_char), span.text, span_type)


def noun_phrase_spans(
    doc: Any, candidate: Candidate, *, max_tokens: int = MAX_TOKENS,
    max_distance: int = MAX_DISTANCE,
) -> list[MaskedSpan]:
    """The NP spans of a parsed candidate sentence, in sentence order."""
    _, mention_end = mention_tokens(doc, candidate.mention)
    blocked = _blocked_tokens(doc, candidate.occurrences)
    chosen: dict[tuple[int, int], Any] = {}
    for chunk in doc.noun_chunks:
        subtree = doc[chunk.root.left_edge.i : chunk.root.right_edge.i + 1]
        for span in (chunk, subtree):
            key = (span.start, span.end)
            if key in chosen or not _allowed(span.start, span.end, mention_end, blocked,
                                             max_distance):
                continue
            if _acceptable_np(span, max_tokens):
                chosen[key] = span
    # Keep "the Vell River" rather than also "Vell River".
    for start, end in list(chosen):
        if doc[start].pos_ == "DET" and (start + 1, end) in chosen and end - start > 1:
            del chosen[(start + 1, end)]
    return [
        _masked(doc, start, end, NP_PROPER if _is_proper(span) else NP_COMMON)
        for (start, end), span in sorted(chosen.items())
    ]


def random_spans(
    doc: Any, candidate: Candidate, rng: random.Random, *, max_tokens: int = MAX_TOKENS,
    max_distance: int = MAX_DISTANCE, count: int = RANDOM_PER_SENTENCE,
) -> list[MaskedSpan]:
    """Up to ``count`` distinct random spans, in sentence order."""
    _, mention_end = mention_tokens(doc, candidate.mention)
    blocked = _blocked_tokens(doc, candidate.occurrences)
    punct = [t.is_punct or t.is_space for t in doc]
    chosen: set[tuple[int, int]] = set()
    for _ in range(_RANDOM_TRIALS):
        if len(chosen) >= count:
            break
        length = rng.randint(1, max_tokens)
        starts = [
            s for s in range(mention_end, min(len(doc) - length, mention_end + max_distance) + 1)
            if not punct[s] and not punct[s + length - 1]
            and _allowed(s, s + length, mention_end, blocked, max_distance)
        ]
        if starts:
            start = rng.choice(starts)
            chosen.add((start, start + length))
    return [_masked(doc, s, e, RANDOM) for s, e in sorted(chosen)]


def mask(sentence: str, span: MaskedSpan) -> tuple[str, str]:
    """``(masked_sentence, answer_str)`` in T5's sentinel format."""
    start, end = span.chars
    return (
        sentence[:start] + SENTINEL_0 + sentence[end:],
        f"{SENTINEL_0} {span.text} {SENTINEL_1}",
    )
