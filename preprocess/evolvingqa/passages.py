"""Passages and revisions: the text that EvolvingQA's questions are written from.

Three kinds of QA-generation input come out of an article (paper §2.2):

- **Unchanged**: an article that did not change over the window; its passages are chunks of
  whole sentences (:func:`passages`, the SSM stage's chunker), so what a question is asked about
  is what the model was pretrained on.
- **New**: the Changed-set text of a month pair (the DiffSet stage's ``diffset.jsonl``), minus the
  new side of every revision below (that text is an *update* of old knowledge, not new knowledge).
- **Edited**: a revised passage, the old and the new version of it (Figure 2). Revisions are found
  as difflib finds them, twice: paragraphs of the old and new article are aligned
  (``SequenceMatcher`` over the paragraph lists); inside each replaced block every new paragraph
  is paired with its most similar old paragraph of the block, if they are similar enough to be
  two versions of one paragraph; the two versions are then aligned sentence by sentence, and
  each replaced run of sentences is a revision whose new side holds at least one sentence absent
  from the whole old article (the DiffSet's criterion, so every revision's new text is in the
  Changed set). Inserted paragraphs and sentences are additions (New), deleted ones are dropped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from tw_jax.preprocess.plaintext.sentences import split_sentences
from tw_jax.preprocess.ssm.chunks import chunk_spans

# Below this similarity (difflib ratio of the two paragraphs' words) a new paragraph in a
# replaced block is a new paragraph, not a version of an old one.
MIN_PARAGRAPH_SIMILARITY = 0.5


@dataclass(frozen=True, slots=True)
class Revision:
    """One revised run of sentences: ``old_text`` became ``new_text`` (paragraph ``paragraph`` of
    the new article; ``block`` numbers the revisions inside that paragraph)."""

    paragraph: int
    block: int
    old_text: str
    new_text: str
    old_paragraph: str
    new_paragraph: str

    @property
    def new_sentences(self) -> list[str]:
        return split_sentences(self.new_text)


def passages(text: str, max_words: int) -> list[str]:
    """``text`` cut into chunks of whole sentences of at most ``max_words`` words."""
    return [text[start:end] for start, end in chunk_spans(text, max_words)]


def _similarity(old: str, new: str) -> float:
    return SequenceMatcher(a=old.split(), b=new.split(), autojunk=False).ratio()


def _paired_paragraphs(
    old: Sequence[str], new: Sequence[str]
) -> Iterator[tuple[int, int]]:
    """(old index, new index) of the paragraphs that are two versions of one paragraph."""
    matcher = SequenceMatcher(a=list(old), b=list(new), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "replace":
            continue
        for j in range(j1, j2):
            scored = [(_similarity(old[i], new[j]), -i) for i in range(i1, i2)]
            similarity, negative = max(scored)
            if similarity >= MIN_PARAGRAPH_SIMILARITY:
                yield -negative, j


def revisions(old_paragraphs: Sequence[str], new_paragraphs: Sequence[str]) -> list[Revision]:
    """The revisions that turn the old article into the new one (see the module docstring)."""
    old_sentences = {s for p in old_paragraphs for s in split_sentences(p)}
    found: list[Revision] = []
    for i, j in _paired_paragraphs(old_paragraphs, new_paragraphs):
        before, after = split_sentences(old_paragraphs[i]), split_sentences(new_paragraphs[j])
        matcher = SequenceMatcher(a=before, b=after, autojunk=False)
        block = 0
        for tag, a1, a2, b1, b2 in matcher.get_opcodes():
            if tag != "replace" or all(s in old_sentences for s in after[b1:b2]):
                continue
            found.append(
                Revision(
                    paragraph=j,
                    block=block,
                    old_text=" ".join(before[a1:a2]),
                    new_text=" ".join(after[b1:b2]),
                    old_paragraph=old_paragraphs[i],
                    new_paragraph=new_paragraphs[j],
                )
            )
            block += 1
    return found


def without_sentences(text: str, drop: set[str]) -> str:
    """``text`` (paragraphs separated by newlines) without the sentences in ``drop``; paragraphs
    left empty disappear."""
    kept = []
    for paragraph in text.split("\n"):
        sentences = [s for s in split_sentences(paragraph) if s not in drop]
        if sentences:
            kept.append(" ".join(sentences))
    return "\n".join(kept)
