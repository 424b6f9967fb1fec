"""Alignment with Wikipedia (TemporalWiki §3.3): keep a fact only where the text supports it.

UPDATED and NEW need the subject's article in the month's DiffSet with the object in its DiffSet
text (the model can only learn what the update showed it); UNCHANGED needs the object in the
subject's full new article; DELETED needs the object in the old article and nowhere in the new
one. Without the old Wikipedia dump, DELETED falls back to "not in the new article" alone (the
subject must still have one), and ``stats.json`` says so.
"""

from __future__ import annotations

from typing import NamedTuple

from tw_jax.preprocess.probes.categorise import DELETED, UNCHANGED
from tw_jax.preprocess.probes.rules import mentions


class SubjectTexts(NamedTuple):
    """The texts one subject's facts are checked against (None: no such article or text)."""

    new_article: int | None  # page id of the subject's article in the new snapshot
    diff: str | None  # its DiffSet text (None when the article is not in the DiffSet)
    full: str | None  # its whole cleaned text in the new snapshot
    old_article: int | None
    old: str | None  # its whole cleaned text in the old snapshot
    have_old_dump: bool


def alignment_reason(category: str, obj: str, texts: SubjectTexts) -> str | None:
    """Why a fact fails alignment, or None when it is aligned."""
    if category == UNCHANGED:
        if texts.new_article is None:
            return "subject_without_article"
        return None if mentions(texts.full, obj) else "object_not_in_article"
    if category == DELETED:
        if texts.have_old_dump:
            if texts.old_article is None:
                return "subject_without_old_article"
            if not mentions(texts.old, obj):
                return "object_not_in_old_article"
        elif texts.new_article is None:
            return "subject_without_article"
        return "object_still_in_new_article" if mentions(texts.full, obj) else None
    if texts.new_article is None:
        return "subject_without_article"
    if texts.diff is None:
        return "article_not_in_diffset"
    return None if mentions(texts.diff, obj) else "object_not_in_diffset_text"
