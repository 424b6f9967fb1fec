"""Cutting an article into the passages that become SSM examples.

CKL trains T5 with inputs and targets of 350 tokens; a whole Wikipedia article is far longer, so
each article is cut into chunks of at most ``max_words`` whitespace-separated words (the stage's
default, 200, is about 260-300 T5 SentencePiece tokens at the usual 1.3-1.5 tokens per English
word: within 350 with room for the sentinels). Chunks are filled greedily with whole sentences
(the project's sentence splitter, one paragraph at a time, so that chunks can span paragraph
breaks but never cut a sentence); only a sentence longer than ``max_words`` is cut between
words. A chunk is always a slice ``text[start:end]`` of the article, beginning and ending on a
word, so the original text of every example can be found again.
"""

from __future__ import annotations

import re

from tw_jax.preprocess.plaintext.sentences import split_sentences

_WORD = re.compile(r"\S+")


def _sentence_units(text: str) -> list[tuple[int, int, int]]:
    """(start, end, words) of each sentence, in text order.

    ``split_sentences`` returns sentences with whitespace collapsed; their words are the
    paragraph's words in order, so each sentence is mapped back by counting words.
    """
    units: list[tuple[int, int, int]] = []
    offset = 0
    for paragraph in text.split("\n"):
        words = [(m.start() + offset, m.end() + offset) for m in _WORD.finditer(paragraph)]
        k = 0
        for sentence in split_sentences(paragraph) if words else ():
            n = len(sentence.split())
            units.append((words[k][0], words[k + n - 1][1], n))
            k += n
        offset += len(paragraph) + 1
    return units


def chunk_spans(text: str, max_words: int) -> list[tuple[int, int]]:
    """The (start, end) character offsets of the chunks of ``text``."""
    if max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    chunks: list[tuple[int, int]] = []
    start = end = words = 0
    for unit_start, unit_end, n in _sentence_units(text):
        if words and words + n > max_words:
            chunks.append((start, end))
            words = 0
        if n > max_words:  # a run-on "sentence" (a list, a table row): cut between words
            spans = [m.span() for m in _WORD.finditer(text, unit_start, unit_end)]
            for i in range(0, len(spans), max_words):
                window = spans[i : i + max_words]
                chunks.append((window[0][0], window[-1][1]))
            continue
        if not words:
            start = unit_start
        end = unit_end
        words += n
    if words:
        chunks.append((start, end))
    return chunks
