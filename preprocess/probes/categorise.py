"""TemporalWiki Algorithm 2, extended with DELETED: each subject's facts, old against new.

For a fact (s, r, o) of the recent snapshot: NEW when s was not in the previous snapshot or had
no r there; UNCHANGED when the previous snapshot had the same (r, o); otherwise UPDATED, with the
previous objects of r kept (the answer the model should unlearn). DELETED: (s, r, o) of the
previous snapshot whose subject still exists and whose (r, o) is gone. Objects are compared by
identity (``object_key``), not by label.

The function sees one subject at a time, so it runs unchanged after a local SQLite lookup or a
Beam CoGroupByKey on the subject id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from tw_jax.preprocess.probes.facts import Fact, Value

UNCHANGED = "unchanged"
UPDATED = "updated"
NEW = "new"
DELETED = "deleted"
CATEGORIES = (UNCHANGED, UPDATED, NEW, DELETED)


class Candidate(NamedTuple):
    """One categorised fact, before labels and quality control."""

    category: str
    subject_id: str
    relation_id: str
    key: str
    value: Value
    previous: tuple[Value, ...]  # UPDATED: the previous snapshot's objects of this relation


def categorise(
    subject_id: str, new_facts: tuple[Fact, ...] | None, old_facts: tuple[Fact, ...] | None
) -> Iterator[Candidate]:
    """The candidates of one subject.

    ``new_facts`` is None when the subject is absent from the recent snapshot (it then has
    nothing to categorise: its old facts are not DELETED, the subject is); ``old_facts`` is None
    when it is absent from the previous one (every recent fact is NEW).
    """
    if new_facts is None:
        return
    old = old_facts or ()
    old_keys = {(relation, key) for relation, key, _ in old}
    old_by_relation: dict[str, list[Value]] = {}
    for relation, _, value in old:
        old_by_relation.setdefault(relation, []).append(value)
    for relation, key, value in new_facts:
        previous = old_by_relation.get(relation)
        if not previous:
            yield Candidate(NEW, subject_id, relation, key, value, ())
        elif (relation, key) in old_keys:
            yield Candidate(UNCHANGED, subject_id, relation, key, value, ())
        else:
            yield Candidate(UPDATED, subject_id, relation, key, value, tuple(previous))
    if not old:
        return
    new_keys = {(relation, key) for relation, key, _ in new_facts}
    for relation, key, value in old:
        if (relation, key) not in new_keys:
            yield Candidate(DELETED, subject_id, relation, key, value, ())


class Categorised(NamedTuple):
    """Subject-level facts for quality control: its candidates and where its articles are."""

    subject_id: str
    label: str | None
    enwiki_new: str | None
    enwiki_old: str | None
    candidates: tuple[Candidate, ...]
