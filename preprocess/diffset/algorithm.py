"""TemporalWiki Algorithm 1, done right: the text of a new snapshot that the old one lacked.

An article whose id is new goes in whole. For an article present in both snapshots, each paragraph
of the new version contributes the sentences that occur nowhere in the old version: all of them
(the whole paragraph) when none matches, only the new or changed ones otherwise. Unlike the
reference code there are no anchor paragraphs, so text added before the first or after the last
unchanged paragraph is found like any other; numbers are kept; nothing is truncated; deleted
articles and deleted sentences cannot enter the DiffSet because only new-side text is ever kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tw_jax.preprocess.dumps.mediawiki import Page
from tw_jax.preprocess.dumps.wikipedia import paragraphs_of
from tw_jax.preprocess.plaintext.sentences import split_sentences

NEW = "new"
CHANGED = "changed"
UNCHANGED = "unchanged"
# In both snapshots with new text, but less than --min-changed-chars of it (EvolvingQA's filter).
BELOW_MIN_CHANGED = "below_min_changed_chars"
# Nothing left after removing markup (a page of templates only): in no output, counted as a skip.
EMPTY = "empty_after_cleaning"

IN_DIFFSET = (NEW, CHANGED)


@dataclass(frozen=True, slots=True)
class ArticleDiff:
    """What one article of the new snapshot contributes to each output."""

    id: int
    title: str
    kind: str
    # Paragraphs are never empty, their whitespace collapsed (stats.py counts tokens by spaces).
    paragraphs: tuple[str, ...]  # the whole new article, cleaned (full.jsonl)
    diff_paragraphs: tuple[str, ...]  # the part that enters the DiffSet
    diff_sentences: int
    in_old: bool
    # The paragraphs joined by newlines, joined once: the outputs encode it and the stats count
    # its characters and spaces.
    text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", "\n".join(self.paragraphs))

    def __reduce__(self) -> tuple[type[ArticleDiff], tuple[object, ...]]:
        # Pickled (between Beam stages) without the text, which is joined again on loading.
        return type(self), (
            self.id,
            self.title,
            self.kind,
            self.paragraphs,
            self.diff_paragraphs,
            self.diff_sentences,
            self.in_old,
        )

    @property
    def diff_text(self) -> str:
        return "\n".join(self.diff_paragraphs)


def new_sentences(new_paragraphs: list[str], old_paragraphs: list[str]) -> tuple[list[str], int]:
    """The new paragraphs reduced to their sentences absent from the old text.

    Returns the kept paragraphs (a paragraph with no matching sentence verbatim, otherwise its new
    sentences joined by spaces) and the number of kept sentences.
    """
    # A paragraph found verbatim in the old version has all its sentences there: not split.
    unchanged = set(old_paragraphs)
    edited = [paragraph for paragraph in new_paragraphs if paragraph not in unchanged]
    if not edited:
        return [], 0
    old = {sentence for paragraph in old_paragraphs for sentence in split_sentences(paragraph)}
    kept: list[str] = []
    count = 0
    for paragraph in edited:
        sentences = split_sentences(paragraph)
        added = [s for s in sentences if s not in old]
        if not added:
            continue
        count += len(added)
        kept.append(paragraph if len(added) == len(sentences) else " ".join(added))
    return kept, count


def compare(new: Page, old: Page | None, min_changed_chars: int = 0) -> ArticleDiff:
    """Classifies one article of the new snapshot against its old version (None if its id is new)."""
    paragraphs = paragraphs_of(new)
    if not paragraphs:
        return ArticleDiff(new.id, new.title, EMPTY, (), (), 0, old is not None)
    if old is None:
        count = sum(len(split_sentences(p)) for p in paragraphs)
        kept, kind = paragraphs, NEW
    elif old.text == new.text and old.markup == new.markup:
        count, kept, kind = 0, [], UNCHANGED  # byte-identical: the common case, no parsing needed
    else:
        kept, count = new_sentences(paragraphs, paragraphs_of(old))
        kind = CHANGED if kept else UNCHANGED
    if kind in IN_DIFFSET and sum(map(len, kept)) + len(kept) - 1 < min_changed_chars:
        kind = BELOW_MIN_CHANGED
    if kind not in IN_DIFFSET:
        kept, count = [], 0
    return ArticleDiff(
        new.id, new.title, kind, tuple(paragraphs), tuple(kept), count, old is not None
    )
