"""Stream the articles of WikiExtractor ``--json`` output (``{"id","url","title","text"}`` a line).

The TemporalWiki reference pipeline read Wikipedia this way, and published monthly extractions
come in this form, so tw_jax reads it next to raw XML. WikiExtractor has already removed the
markup and put one paragraph on each line of ``text``; pages come out as ``markup="plain"``.

One bad line must not cost the rest of a multi-gigabyte file, so a line that is not JSON, not
UTF-8, lacks a field or has a non-integer id is skipped and counted by reason, with
``path:line`` as the example (and, for a line that is not UTF-8, the page id and title when they
can still be read). A broken archive still raises :class:`DumpError`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

from tw_jax.preprocess.dumps.compressed import open_binary
from tw_jax.preprocess.dumps.mediawiki import Page, describe_page, parse_int
from tw_jax.preprocess.runners.accounting import Skips

REQUIRED_FIELDS = ("id", "url", "title", "text")
# A JSON escape of a UTF-16 surrogate: json.loads accepts a lone one, which no UTF-8 writer can
# encode later, so lines that have one are checked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(*values: str) -> bool:
    try:
        for value in values:
            value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _named(raw: bytes) -> str:
    """`` page id=12 'Title'`` of a line that is not UTF-8, read leniently, or ``""``."""
    try:
        record = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return ""
    if isinstance(record, dict) and "id" in record and isinstance(record.get("title"), str):
        return " " + describe_page(record["id"], record["title"])
    return ""


def _page_id(value: object) -> int | None:
    # WikiExtractor writes ids as strings ("12"); accept real JSON integers too, not floats/bools.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str):
        return parse_int(value)
    return None


def iter_pages(path: str | os.PathLike[str], skips: Skips) -> Iterator[Page]:
    """Yield one ``Page(ns=0, redirect=None, markup="plain")`` per good line, in file order.

    Skip reasons: ``bad_utf8`` (also a lone UTF-16 surrogate escape), ``bad_json`` (also a JSON value that is not an object),
    ``missing_field`` (one of id/url/title/text absent), ``bad_field`` (title or text not a
    string) and ``bad_id`` (id not a non-negative integer). Blank lines are not records and are
    passed over silently.
    """
    path_s = os.fspath(path)
    lineno = 0

    def context() -> str:
        return f"after line {lineno}"

    with open_binary(path_s) as stream:
        stream.context = context
        for raw in stream:
            lineno += 1
            if not raw.strip():
                continue
            where = f"{path_s}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                skips.add("bad_utf8", where + _named(raw))
                continue
            try:
                record = json.loads(line)
            except ValueError:
                skips.add("bad_json", where)
                continue
            if not isinstance(record, dict):
                skips.add("bad_json", where)
                continue
            if any(field not in record for field in REQUIRED_FIELDS):
                skips.add("missing_field", where)
                continue
            page_id = _page_id(record["id"])
            if page_id is None:
                skips.add("bad_id", where)
                continue
            title, text = record["title"], record["text"]
            if not isinstance(title, str) or not isinstance(text, str):
                skips.add("bad_field", where)
                continue
            if _SURROGATE_ESCAPE.search(line) and _has_lone_surrogate(title, text):
                skips.add("bad_utf8", f"{where} {describe_page(page_id, title)}")
                continue
            yield Page(page_id, 0, title, text, None, "plain")
