"""Readers of CKL's released files, validated row by row.

The formats (CKL's public data; see ``papers/NOTES.md``):

===========================  ===================================  ================================
file                         columns                              answers
===========================  ===================================  ================================
``invariantLAMA.csv``        ``id,input,output``                  ``output`` (or an answer JSON)
``updatedLAMA.csv``          ``unique_id,statement,new_answer``   JSON ``id → {"old": […],
                                                                  "new": […]}`` (the release
                                                                  wraps it in a one-item list)
``newLAMA*.csv``             ``unique_id,statement,answer``       JSON ``id → [answers]``
``recent_news_*.csv``,       ``input,output,original``            — (T5 SSM pairs: ``input`` holds
``wikipedia_pretrain*.csv``                                       sentinels, ``output`` the spans)
===========================  ===================================  ================================

Statements hold ``<extra_id_0>`` where the answer goes (T5 fills it zero-shot). Without an answer
JSON the CSV's own answer column is the only answer. The reference evaluation accepted a
prediction matching any of an id's answers (and, for UpdatedLAMA, reported the old answers
separately); :class:`LamaRow` carries both lists.

Everything here reads text handles, so files on disk and members of a zip read alike; a
malformed row, header or JSON entry raises :class:`DumpError` naming the file and the line (or,
in a JSON file, the id).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

from tw_jax.errors import DumpError
from tw_jax.io.csv_reader import BoundedReader

SENTINEL = "<extra_id_0>"

INVARIANT, UPDATED, NEW = "invariant", "updated", "new"
# kind -> (id column, statement column, answer column)
LAMA_COLUMNS: dict[str, tuple[str, str, str]] = {
    INVARIANT: ("id", "input", "output"),
    UPDATED: ("unique_id", "statement", "new_answer"),
    NEW: ("unique_id", "statement", "answer"),
}
SSM_COLUMNS = ("input", "output")


@dataclass(frozen=True)
class LamaRow:
    """One cloze probe: the T5 input, the answers that count, UpdatedLAMA's outdated ones."""

    id: str
    statement: str
    answers: tuple[str, ...]
    previous: tuple[str, ...] = ()

    def filled(self) -> str:
        """The statement with its first answer in place of the sentinel."""
        return self.statement.replace(SENTINEL, self.answers[0], 1)


def _header(reader: BoundedReader, name: str, wanted: tuple[str, ...]) -> dict[str, int]:
    try:
        header = next(reader)
    except StopIteration:
        raise DumpError(name, "line 1", "empty file: expected a CSV header") from None
    columns = {column.strip().lstrip("\ufeff"): i for i, column in enumerate(header)}
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise DumpError(name, "line 1", f"header {header} lacks {', '.join(missing)}")
    columns["_width"] = len(header)
    return columns


def _rows(reader: BoundedReader, name: str, width: int) -> Iterator[tuple[int, list[str]]]:
    """(line, fields) of every non-blank row, each with the header's number of fields."""
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if len(fields) != width:
            raise DumpError(name, f"line {reader.line_num}",
                            f"{len(fields)} fields, header has {width}")
        yield reader.line_num, fields


def read_lama_csv(handle: IO[str], name: str, kind: str) -> list[tuple[int, str, str, str]]:
    """``(line, id, statement, answer)`` of every row of a LAMA CSV of ``kind``
    (:data:`INVARIANT`, :data:`UPDATED` or :data:`NEW`).

    Empty fields and repeated ids are errors: answers are looked up by id.
    """
    if kind not in LAMA_COLUMNS:
        raise ValueError(f"unknown LAMA kind {kind!r}; expected one of {sorted(LAMA_COLUMNS)}")
    wanted = LAMA_COLUMNS[kind]
    reader = BoundedReader(handle, name)
    columns = _header(reader, name, wanted)
    out: list[tuple[int, str, str, str]] = []
    seen: dict[str, int] = {}
    for line, fields in _rows(reader, name, columns["_width"]):
        values = [fields[columns[c]] for c in wanted]
        empty = [c for c, v in zip(wanted, values, strict=True) if not v.strip()]
        if empty:
            raise DumpError(name, f"line {line}", f"empty {', '.join(empty)}")
        row_id = values[0].strip()
        if row_id in seen:
            raise DumpError(name, f"line {line}", f"id {row_id!r} repeats line {seen[row_id]}")
        seen[row_id] = line
        out.append((line, row_id, values[1], values[2]))
    return out


def _strings(value: Any, name: str, where: str, what: str) -> tuple[str, ...]:
    """A JSON string or list of strings as a tuple (a bare string is one answer)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise DumpError(name, where, f"{what} must be a non-empty list of strings, got {value!r}")
    return tuple(value)


def read_answers_json(
    handle: IO[str], name: str, *, updated: bool = False
) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """``id → (answers, previous answers)`` of an answer JSON file.

    NewLAMA files map an id to a list of answers (or one string); UpdatedLAMA files map it to
    ``{"old": […], "new": […]}``, bare or as the one item of a list (the release's layout).
    """
    try:
        data = json.load(handle)
    except json.JSONDecodeError as error:
        raise DumpError(name, f"line {error.lineno}", f"not JSON ({error.msg})") from None
    except UnicodeDecodeError as error:
        raise DumpError(name, f"byte {error.start}", "not UTF-8") from None
    if not isinstance(data, Mapping):
        raise DumpError(name, None, "expected a JSON object mapping ids to answers")
    out: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for key, value in data.items():
        where = f"id {key!r}"
        entry = value
        if isinstance(entry, list) and len(entry) == 1 and isinstance(entry[0], Mapping):
            entry = entry[0]
        if isinstance(entry, Mapping):
            if "new" not in entry:
                raise DumpError(name, where, f"expected keys 'old' and 'new', got {sorted(entry)}")
            old = _strings(entry["old"], name, where, "'old'") if entry.get("old") else ()
            out[str(key)] = (_strings(entry["new"], name, where, "'new'"), old)
        elif updated:
            raise DumpError(name, where, "an UpdatedLAMA entry needs {'old': [...], 'new': [...]}")
        else:
            out[str(key)] = (_strings(entry, name, where, "the answers"), ())
    return out


def join_answers(
    rows: list[tuple[int, str, str, str]],
    csv_name: str,
    answers: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    json_name: str | None = None,
) -> list[LamaRow]:
    """Rows with their answers: the JSON's entry for the id (which must exist when a JSON is
    given), else the CSV's answer column. The CSV's answer leads the list when the JSON
    repeats it, so ``answers[0]`` is the answer the file shows."""
    out = []
    for line, row_id, statement, answer in rows:
        if answers is None:
            out.append(LamaRow(row_id, statement, (answer,)))
            continue
        if row_id not in answers:
            raise DumpError(csv_name, f"line {line}",
                            f"id {row_id!r} has no entry in {json_name or 'the answer file'}")
        current, previous = answers[row_id]
        ordered = (answer, *(a for a in current if a != answer)) if answer in current else current
        out.append(LamaRow(row_id, statement, tuple(ordered), previous))
    return out


def iter_ssm_pairs(handle: IO[str], name: str, skipped: list[int] | None = None
                   ) -> Iterator[tuple[str, str]]:
    """``(input, output)`` of a recent-news / Wikipedia SSM CSV, streamed.

    A row with an empty input or output teaches nothing and is skipped (its line appended to
    ``skipped`` when given); a malformed row is a :class:`DumpError`.
    """
    reader = BoundedReader(handle, name)
    columns = _header(reader, name, SSM_COLUMNS)
    i, o = columns["input"], columns["output"]
    for line, fields in _rows(reader, name, columns["_width"]):
        if fields[i].strip() and fields[o].strip():
            yield fields[i], fields[o]
        elif skipped is not None:
            skipped.append(line)


# --- writing the released formats back (a phase's own copy of its sets) ---------------------


def lama_csv_text(rows: list[LamaRow], kind: str) -> str:
    """A LAMA CSV of ``kind`` in the released columns (the first answer in the answer column)."""
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(LAMA_COLUMNS[kind])
    writer.writerows((row.id, row.statement, row.answers[0]) for row in rows)
    return buffer.getvalue()


def answers_json_text(rows: list[LamaRow], kind: str) -> str:
    """The answer JSON of ``rows``: ``id → [answers]``, UpdatedLAMA ``id → [{"old", "new"}]``
    as the release writes it; one id per line."""
    def entry(row: LamaRow) -> Any:
        if kind == UPDATED:
            return [{"old": list(row.previous), "new": list(row.answers)}]
        return list(row.answers)

    lines = [f"{json.dumps(r.id)}: {json.dumps(entry(r), ensure_ascii=False)}" for r in rows]
    return "{\n" + ",\n".join(lines) + "\n}\n"
