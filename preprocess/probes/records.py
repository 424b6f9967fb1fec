"""The probe record: one row of ``{category}.csv`` and one ``tf.train.Example``.

The first three columns are the published TWiki_Probes CSVs' ``subject,relation,object``, so
tools written for those files read ours; the rest carry ids, the UPDATED fact's previous
object(s), the paper's probe text and a natural cloze sentence where the relation has one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from typing import IO, NamedTuple

from tw_jax.preprocess.probes.categorise import Candidate
from tw_jax.preprocess.probes.facts import object_id

COLUMNS = (
    "subject",
    "relation",
    "object",
    "subject_id",
    "relation_id",
    "object_id",
    "previous_object",
    "text",
    "cloze",
)
PREVIOUS_SEPARATOR = " | "


class Probe(NamedTuple):
    subject: str
    relation: str
    object: str
    subject_id: str
    relation_id: str
    object_id: str
    previous_object: str
    text: str
    cloze: str
    category: str
    key: str  # object identity: orders and deduplicates, never written

    def row(self) -> tuple[str, ...]:
        return tuple(self[: len(COLUMNS)])

    def sort_key(self) -> tuple[str, str, str, str]:
        return (self.subject_id, self.relation_id, self.key, self.object)

    def as_features(self) -> dict[str, str]:
        return dict(zip(COLUMNS, self.row(), strict=True))


Render = Callable[[tuple], "str | None"]


def make_probe(
    candidate: Candidate,
    subject: str,
    relation: str,
    obj: str,
    previous: Iterable[str],
    text_of: Callable[[str, str, str], str],
    cloze_of: Callable[[str, str, str], str | None],
) -> Probe:
    """A probe from a candidate and its rendered labels (``text_of``/``cloze_of`` are the
    template table's ``probe_text`` and ``cloze``)."""
    return Probe(
        subject=subject,
        relation=relation,
        object=obj,
        subject_id=candidate.subject_id,
        relation_id=candidate.relation_id,
        object_id=object_id(candidate.value),
        previous_object=PREVIOUS_SEPARATOR.join(previous),
        text=text_of(subject, relation, obj),
        cloze=cloze_of(candidate.relation_id, subject, obj) or "",
        category=candidate.category,
        key=candidate.key,
    )


def write_csv(handle: IO[str], probes: Iterable[Probe]) -> int:
    """The CSV file, row by row onto ``handle`` (opened with ``newline=""``): header, then one
    row per probe (RFC 4180 quoting, ``\\n`` lines). Returns the number of probes."""
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(COLUMNS)
    count = 0
    for probe in probes:
        writer.writerow(probe.row())
        count += 1
    return count


def csv_text(probes: Iterable[Probe]) -> str:
    """The whole CSV file as one string (:func:`write_csv`), for small sets."""
    buffer = io.StringIO()
    write_csv(buffer, probes)
    return buffer.getvalue()
