"""Stream the entities of a Wikidata JSON dump (``wikidata-*-all.json``, plain, .bz2 or .gz).

The dump is one JSON array written one entity per line (``[``, then ``{...},`` lines, then
``]``), so it is read line by line with orjson and never held in memory; files of
bare JSON lines (no brackets, no trailing commas) read the same way. Each entity keeps only
what the probes need: English label and aliases, the enwiki sitelink, a property's datatype,
and the main snaks of its statements as hashable, normalised values (see :class:`Claim`).

Every line and every statement is accounted for in the caller's :class:`Skips`:

- ``bad_json``: a line that is not JSON (``path:line`` as the example);
- ``bad_entity``: JSON that is not an object with a string ``id`` and ``type``;
- ``unsupported_entity_type``: a well-formed entity that is neither item nor property
  (lexemes, mediainfo), which the probes never use;
- ``deprecated_statement``: a statement of deprecated rank (not a fact, as on Wikidata);
- ``no_value``: a ``somevalue`` / ``novalue`` snak (it has no object to probe);
- ``unsupported_value``: a value we cannot normalise (globe coordinates, unknown types,
  missing or malformed datavalue).

A broken archive raises :class:`~tw_jax.errors.DumpError` naming the file, the
decompressed byte offset and the last entity read completely; so do a file whose first record is
not an entity (an XML dump given as Wikidata) and a JSON array without its closing ``]`` (a cut
plain dump). An entity whose ``claims`` is neither an object nor empty is ``bad_entity``.

Malformed lines (``bad_json``, ``bad_entity``) are skipped one at a time, but a dump with many of
them is damaged, not noisy: :func:`check_skipped_share` fails a run whose malformed lines exceed a
share of the records read (default :data:`DEFAULT_MAX_SKIPPED_SHARE`, 1%; ``tw-jax probes
--max-skipped-share``, the one place to change it), with one line naming the file, the share,
the threshold, the counts by reason and the first bad line. Callers that compare two dumps pass
``bad_ids`` to collect the entity id of each malformed line that still names one (the parsed
``id``, or an ``"id"`` among the line's first keys when it is not JSON), so that an entity
malformed in one dump is not taken for one that is absent there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.compressed import iter_chunks, open_binary
from tw_jax.preprocess.runners.accounting import Skips

__all__ = [
    "DEFAULT_MAX_SKIPPED_SHARE",
    "MALFORMED_REASONS",
    "Claim",
    "Entity",
    "check_skipped_share",
    "entities_from_lines",
    "iter_entities",
    "iter_lines",
    "iter_records",
    "normalise_value",
]

ENTITY_URI = "http://www.wikidata.org/entity/"
_CHUNK = 1 << 20
# Decompress this many chunks ahead on another thread (bz2/zlib release the GIL), so a spare
# core takes the decompression off the parsing thread.
_PREFETCH = 4
# What a datavalue type becomes when the snak carries no ``datatype`` (old dumps, qualifiers).
_DEFAULT_DATATYPE = {
    "wikibase-entityid": "wikibase-item",
    "time": "time",
    "quantity": "quantity",
    "string": "string",
    "monolingualtext": "monolingualtext",
}
_ENTITY_PREFIX = {"item": "Q", "property": "P", "lexeme": "L"}
# Skip reasons of a whole line that should have been an entity: what the skipped share counts.
MALFORMED_REASONS = ("bad_json", "bad_entity")
# Every line holding a record ends as an entity or as one of these skips.
_LINE_REASONS = (*MALFORMED_REASONS, "unsupported_entity_type")
DEFAULT_MAX_SKIPPED_SHARE = 0.01
# The entity id of a line that is not JSON, as the dumps write it: first key, or after "type".
_LINE_ID = re.compile(rb'^\{\s*(?:"type"\s*:\s*"[a-z]+"\s*,\s*)?"id"\s*:\s*"([A-Z][0-9]+)"')


@dataclass(frozen=True, slots=True)
class Claim:
    """The main snak of one statement, with a value that can be compared across months.

    ``value`` is one of ``("item", "Q5")``, ``("time", "+1990-03-12T00:00:00Z", precision)``,
    ``("quantity", "+1234", unit_qid_or_None)``, ``("string", text)`` (also url, external-id,
    commonsMedia and the other string-valued datatypes) or ``("monolingualtext", text, lang)``.
    Tuples, not the JSON dicts, so that a set of claims diffs two snapshots directly.
    """

    property: str
    datatype: str
    value: tuple


@dataclass(frozen=True, slots=True)
class Entity:
    """One item or property, reduced to what the probes use."""

    id: str
    kind: str
    label: str | None
    aliases: tuple[str, ...]
    enwiki: str | None
    datatype: str | None
    claims: tuple[Claim, ...]


def normalise_value(datavalue: Any) -> tuple | None:
    """The hashable form of a snak's ``datavalue``, or None when it cannot be normalised."""
    if not isinstance(datavalue, dict):
        return None
    kind = datavalue.get("type")
    v = datavalue.get("value")
    try:
        if kind == "wikibase-entityid":
            eid = v.get("id")
            if eid is None:  # old dumps give only entity-type and numeric-id
                eid = _ENTITY_PREFIX[v["entity-type"]] + str(int(v["numeric-id"]))
            return ("item", str(eid))
        if kind == "time":
            return ("time", str(v["time"]), int(v["precision"]))
        if kind == "quantity":
            unit = v.get("unit", "1")
            if unit == "1":
                unit_id = None
            elif isinstance(unit, str) and unit.startswith(ENTITY_URI):
                unit_id = unit[len(ENTITY_URI):]
            else:
                return None
            return ("quantity", str(v["amount"]), unit_id)
        if kind == "string":
            return ("string", v) if isinstance(v, str) else None
        if kind == "monolingualtext":
            return ("monolingualtext", str(v["text"]), str(v["language"]))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return None  # globecoordinate and anything newer


def _english(block: Any) -> str | None:
    # Empty maps were serialised as [] by older dumpers, hence the isinstance check.
    if isinstance(block, dict):
        en = block.get("en")
        if en is not None:
            return en.get("value")
    return None


def _claims(raw: Any, skips: Skips, where: tuple[str, int, str]) -> tuple[Claim, ...]:
    """The kept main snaks, in dump order. The common value types are decoded inline (this
    loop is most of the reader's time); the rest go through :func:`normalise_value`."""
    if not raw:  # {} or, as the dumps write an entity without statements, []
        return ()
    if not isinstance(raw, dict):
        # A non-empty list is no claims object: the entity is malformed (counted as
        # bad_entity by the caller), not an entity without facts.
        raise TypeError("claims is not an object")
    out: list[Claim] = []
    append = out.append
    for prop, statements in raw.items():
        for st in statements:
            snak = st["mainsnak"]
            if st.get("rank") == "deprecated":
                _skip(skips, "deprecated_statement", where, prop)
                continue
            if snak.get("snaktype", "value") != "value":
                _skip(skips, "no_value", where, prop)
                continue
            datavalue = snak.get("datavalue")
            kind = datavalue.get("type") if isinstance(datavalue, dict) else None
            v = datavalue.get("value") if kind else None
            value: tuple | None
            if kind == "wikibase-entityid" and isinstance(v, dict) and isinstance(v.get("id"), str):
                value = ("item", v["id"])
            elif kind == "string" and isinstance(v, str):
                value = ("string", v)
            else:
                value = normalise_value(datavalue)
                if value is None:
                    _skip(skips, "unsupported_value", where, prop)
                    continue
            datatype = snak.get("datatype") or _DEFAULT_DATATYPE.get(kind, "")  # type: ignore[arg-type]
            append(Claim(snak.get("property", prop), datatype, value))
    return tuple(out)


def _skip(skips: Skips, reason: str, where: tuple[str, int, str], prop: str) -> None:
    path, lineno, eid = where
    skips.add(reason, f"{path}:{lineno} {eid} {prop}")


class _DumpShape:
    """What makes a file a whole Wikidata dump, checked while it streams: its first record is an
    entity (an XML file or any other JSON is refused at its first record, not after millions of
    ``bad_json`` lines), and a dump that opens its JSON array with ``[`` closes it with ``]``
    (a plain dump cut in the middle has no ``]``; a cut compressed stream fails in
    decompression). Files of bare JSON lines, without brackets, are whole dumps too."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.opened = self.closed = False
        self.checked = False

    def bracket(self, line: bytes, lineno: int) -> None:
        if line == b"[":
            if self.checked or self.opened:
                raise DumpError(self.path, f"line {lineno}", "a '[' inside the dump's array")
            self.opened = True
        elif not self.opened or self.closed:
            raise DumpError(self.path, f"line {lineno}", "a ']' that closes no array")
        else:
            self.closed = True

    def record(self, line: bytes, lineno: int) -> None:
        if self.closed:
            raise DumpError(self.path, f"line {lineno}", "a record after the array's closing ']'")
        if self.checked:
            return
        self.checked = True
        try:
            first = orjson.loads(line)
        except ValueError:
            first = None
        if not (isinstance(first, dict) and isinstance(first.get("id"), str)
                and isinstance(first.get("type"), str)):
            shown = line[:60].decode("utf-8", "replace")
            raise DumpError(self.path, f"line {lineno}",
                            f"not a Wikidata JSON dump: its first record is not an entity "
                            f"({shown!r})")

    def end(self, lineno: int, last: str | None) -> None:
        if self.opened and not self.closed:
            where = f"after line {lineno}" + (f" ({last})" if last else "")
            raise DumpError(self.path, where,
                            "the dump's JSON array has no closing ']': the file is cut")


def _iter_lines(path_s: str, last: list[str] | None) -> Iterator[tuple[int, bytes]]:
    """``(line number, stripped line)`` of every line that may hold an entity: brackets, blank
    lines, trailing commas and a byte-order mark are dropped. ``last[0]`` (kept up to date by
    the caller, when given) names the last entity read, for a broken archive's error."""
    lineno = 0
    shape = _DumpShape(path_s)
    with open_binary(path_s) as stream:
        if last is None:
            stream.context = lambda: f"after line {lineno}"
        else:
            stream.context = lambda: f"after line {lineno} ({last[0]})"
        rest = b""
        chunks = iter_chunks(stream, _CHUNK, prefetch=_PREFETCH)
        try:
            while True:
                chunk = next(chunks, None)
                if chunk is None:
                    lines = [rest] if rest else []
                    rest = b""
                else:
                    lines = (rest + chunk).split(b"\n")
                    rest = lines.pop()
                for line in lines:
                    lineno += 1
                    line = line.strip()
                    if lineno == 1:
                        line = line.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark
                    if line.endswith(b","):
                        line = line[:-1]
                    if not line:
                        continue
                    if line == b"[" or line == b"]":
                        shape.bracket(line, lineno)
                        continue
                    shape.record(line, lineno)
                    yield lineno, line
                if chunk is None:
                    shape.end(lineno, last[0] if last else None)
                    return
        finally:
            chunks.close()


def iter_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw entity line)`` of the dump, unparsed: what a reader hands to parsing
    workers, which turn each chunk into entities with :func:`entities_from_lines`."""
    return _iter_lines(os.fspath(path), None)


def _malformed_id(obj: Any, line: bytes) -> str | None:
    """The entity id a malformed line still names, or None when none can be read."""
    if isinstance(obj, dict):
        eid = obj.get("id")
        return eid if isinstance(eid, str) and eid else None
    match = _LINE_ID.match(line)
    return match.group(1).decode("ascii") if match else None


def _record(
    path_s: str, lineno: int, line: bytes, skips: Skips, bad_ids: list[str] | None = None
) -> dict | None:
    """The entity JSON of one line, or None (counted as ``bad_json`` / ``bad_entity``; the id
    it names, if any, appended to ``bad_ids``)."""
    try:
        obj = orjson.loads(line)
    except ValueError:  # orjson.JSONDecodeError (a ValueError): bad JSON and bad UTF-8 alike
        skips.add("bad_json", f"{path_s}:{lineno}")
        if bad_ids is not None and (eid := _malformed_id(None, line)) is not None:
            bad_ids.append(eid)
        return None
    if (not isinstance(obj, dict) or not isinstance(obj.get("id"), str)
            or not isinstance(obj.get("type"), str)):
        skips.add("bad_entity", f"{path_s}:{lineno}")
        if bad_ids is not None and (eid := _malformed_id(obj, line)) is not None:
            bad_ids.append(eid)
        return None
    return obj


def iter_records(
    path: str | os.PathLike[str], skips: Skips, bad_ids: list[str] | None = None
) -> Iterator[tuple[int, dict]]:
    """``(line number, entity JSON)`` for every well-formed entity line of the dump.

    Lines that are not JSON objects with a string ``id`` and ``type`` are counted
    (``bad_json`` / ``bad_entity``) and skipped. Shared by :func:`iter_entities` and the label
    index, which needs the labels only and skips building claims.
    """
    path_s = os.fspath(path)
    last = ["before the first entity"]
    for lineno, line in _iter_lines(path_s, last):
        obj = _record(path_s, lineno, line, skips, bad_ids)
        if obj is not None:
            last[0] = f"entity {obj['id']}"
            yield lineno, obj


def _entity_of(
    path_s: str, lineno: int, obj: dict, skips: Skips, bad_ids: list[str] | None = None
) -> Entity | None:
    """The :class:`Entity` of a well-formed record, or None (counted) for other kinds/shapes."""
    kind = obj["type"]
    eid = obj["id"]
    if kind != "item" and kind != "property":
        skips.add("unsupported_entity_type", f"{path_s}:{lineno} {eid} ({kind})")
        return None
    try:
        return _entity(obj, eid, kind, skips, (path_s, lineno, eid))
    except (AttributeError, KeyError, TypeError):  # a part of the wrong JSON shape
        skips.add("bad_entity", f"{path_s}:{lineno}")
        if bad_ids is not None:
            bad_ids.append(eid)
        return None


def iter_entities(
    path: str | os.PathLike[str], skips: Skips, bad_ids: list[str] | None = None
) -> Iterator[Entity]:
    """Every item and property of the dump, in dump order, as :class:`Entity`.

    ``bad_ids``, when given, gets the id of every entity skipped as malformed that names one,
    no later than the next entity is yielded (or the end of the dump).
    """
    path_s = os.fspath(path)
    for lineno, obj in iter_records(path_s, skips, bad_ids):
        entity = _entity_of(path_s, lineno, obj, skips, bad_ids)
        if entity is not None:
            yield entity


def entities_from_lines(
    path: str | os.PathLike[str],
    lines: Iterable[tuple[int, bytes]],
    skips: Skips,
    bad_ids: list[str] | None = None,
) -> Iterator[Entity]:
    """The entities of a chunk of :func:`iter_lines`, every skip (and bad id) counted exactly
    as :func:`iter_entities` counts it, so chunks parsed apart add up to one pass."""
    path_s = os.fspath(path)
    for lineno, line in lines:
        obj = _record(path_s, lineno, line, skips, bad_ids)
        if obj is not None:
            entity = _entity_of(path_s, lineno, obj, skips, bad_ids)
            if entity is not None:
                yield entity


def _first_line(skips: Skips) -> int | None:
    """The smallest line number among the malformed lines' examples (``path:line``); the
    examples of each reason are kept in dump order, so the first of each is enough."""
    lines = []
    for reason in MALFORMED_REASONS:
        examples = skips.examples.get(reason)
        if examples:
            number = examples[0].rpartition(":")[2].split(" ", 1)[0]
            if number.isdigit():
                lines.append(int(number))
    return min(lines) if lines else None


def check_skipped_share(
    path: str | os.PathLike[str], skips: Skips, entities: int, max_share: float
) -> None:
    """Raises :class:`DumpError` when the dump's malformed lines exceed ``max_share`` of its
    records (``entities`` read plus every skipped line), naming file, share, threshold, counts
    by reason and the first bad line. Called once the whole dump has been read."""
    malformed = {r: skips.counts[r] for r in MALFORMED_REASONS if skips.counts[r]}
    bad = sum(malformed.values())
    records = entities + sum(skips.counts[r] for r in _LINE_REASONS)
    if not bad or bad <= max_share * records:
        return
    first = _first_line(skips)
    counts = ", ".join(f"{reason} {n}" for reason, n in sorted(malformed.items()))
    raise DumpError(
        os.fspath(path),
        f"first bad line {first}" if first is not None else None,
        f"{bad} of {records} records are malformed ({bad / records:.2%}: {counts}), more than "
        f"the {max_share:.2%} allowed by --max-skipped-share; the dump is damaged: fetch it "
        "again, or raise the threshold",
    )


def _entity(obj: dict, eid: str, kind: str, skips: Skips, where: tuple[str, int, str]) -> Entity:
    aliases = obj.get("aliases")
    en_aliases = aliases.get("en") if isinstance(aliases, dict) else None
    sitelinks = obj.get("sitelinks")
    enwiki = sitelinks.get("enwiki") if isinstance(sitelinks, dict) else None
    return Entity(
        id=eid,
        kind=kind,
        label=_english(obj.get("labels")),
        aliases=tuple(a["value"] for a in en_aliases) if en_aliases else (),
        enwiki=enwiki.get("title") if enwiki else None,
        datatype=obj.get("datatype") if kind == "property" else None,
        claims=_claims(obj.get("claims"), skips, where),
    )
