"""A probes CSV read back: ours (``{category}.csv``) or the published TWiki_Probes files.

Probe CSVs are small (thousands of rows) and are read whole, row by row, so a bad row fails
with its file and line before anything downstream sees it. Files are read through
:mod:`tw_jax.io.paths` (a local file or a ``gs://`` object, on any GCS endpoint). The tasks,
the evaluators and the EvolvingQA and CKL builders all read probes through this module.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import IO

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.csv_reader import csv_rows

# T5's first sentinel: what a cloze's object becomes in the T5 formats.
SENTINEL = "<extra_id_0>"

PROBE_FIELDS = ("subject", "relation", "object", "previous_object", "text", "cloze")
# The published TWiki_Probes CSVs name the object column "object"; the reference evaluation
# files used "objective".
_OBJECT_ALIASES = ("object", "objective")


def read_probe_rows(handle: IO[str], name: str) -> list[dict[str, str]]:
    """Rows of a probes CSV (ours or the published ``subject,relation,object``), validated.

    Missing optional columns read as empty; columns beyond :data:`PROBE_FIELDS` (``subject_id``,
    a retrieved ``context`` …) are kept after them, in the header's order; a row with the wrong
    number of fields or an empty subject, relation or object raises :class:`DumpError` naming
    ``name`` and the line.
    """
    reader = csv_rows(handle, name)
    try:
        header = next(reader)[1]
    except StopIteration:
        raise DumpError(name, "line 1", "empty file: expected a CSV header") from None
    columns = {column.strip(): i for i, column in enumerate(header)}
    object_column = next((c for c in _OBJECT_ALIASES if c in columns), None)
    missing = [c for c in ("subject", "relation") if c not in columns]
    if missing or object_column is None:
        raise DumpError(
            name,
            "line 1",
            f"header {header} lacks {missing + ([] if object_column else ['object'])}",
        )
    rows = []
    for line, fields in reader:
        if not fields:
            continue  # a blank line
        if len(fields) != len(header):
            raise DumpError(name, f"line {line}", f"{len(fields)} fields, header has {len(header)}")
        row = {f: fields[columns[f]] if f in columns else "" for f in PROBE_FIELDS}
        row["object"] = fields[columns[object_column]]
        row.update((c, fields[i]) for c, i in columns.items()
                   if c and c not in row and c not in _OBJECT_ALIASES)
        empty = [f for f in ("subject", "relation", "object") if not row[f].strip()]
        if empty:
            raise DumpError(name, f"line {line}", f"empty {', '.join(empty)}")
        rows.append(row)
    return rows


def read_probe_csv(path: str) -> list[dict[str, str]]:
    """Rows of a probes CSV, local or in a bucket (see :func:`read_probe_rows`)."""
    path = os.fspath(path)
    data = paths.read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DumpError(path, f"byte {error.start}", "not UTF-8") from None
    return read_probe_rows(io.StringIO(text, newline=""), path)


def read_stage_probes(path: str) -> list[dict[str, str]]:
    """The rows of a probes CSV that ``tw-jax probes`` wrote (``DATA/<period>/probes/<c>.csv``),
    checked against its folder's ``stats.json`` (:mod:`tw_jax.preprocess.runners.whole`): a
    folder whose stage did not finish, or a CSV cut or replaced since, is one line naming it."""
    from tw_jax.preprocess.runners.whole import check_count, recorded_counts

    counts = recorded_counts(paths.parent(path))
    rows = read_probe_csv(path)
    check_count(path, len(rows), counts)
    return rows


def masked_cloze(row: Mapping[str, str]) -> str | None:
    """The cloze sentence with the last occurrence of the object replaced by the sentinel."""
    cloze, obj = row.get("cloze", ""), row["object"]
    at = cloze.rfind(obj) if cloze else -1
    if at < 0:
        return None
    return cloze[:at] + SENTINEL + cloze[at + len(obj) :]
