"""Entities as Wikidata JSON, in the shape of the ``wikidata-*-all.json`` dumps.

Keys come in the dumps' order; snak hashes are content hashes, so an unchanged statement keeps
its hash from month to month. ``lastrevid``/``modified`` move only when an entity changes.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json

from .model import Entity, Statement, Value
from .schema import CALENDAR, ENTITY_URI, PROPERTIES, PROPERTY_DESCRIPTIONS
from .world import World


def datavalue(value: Value) -> dict:
    kind = value[0]
    if kind == "item":
        q = value[1]
        return {"value": {"entity-type": "item", "numeric-id": int(q[1:]), "id": q}, "type": "wikibase-entityid"}
    if kind == "time":
        return {"value": {"time": value[1], "timezone": 0, "before": 0, "after": 0, "precision": value[2],
                          "calendarmodel": CALENDAR}, "type": "time"}
    if kind == "quantity":
        unit = "1" if value[2] is None else ENTITY_URI + value[2]
        return {"value": {"amount": value[1], "unit": unit}, "type": "quantity"}
    if kind == "mono":
        return {"value": {"text": value[1], "language": "en"}, "type": "monolingualtext"}
    return {"value": value[1], "type": "string"}


def snak(prop: str, value: Value | None, snaktype: str = "value") -> dict:
    body = json.dumps([prop, snaktype, value], sort_keys=True)
    out: dict = {"snaktype": snaktype, "property": prop, "hash": hashlib.sha1(body.encode()).hexdigest()}
    if snaktype == "value":
        out["datavalue"] = datavalue(value)
    out["datatype"] = PROPERTIES[prop][1]
    return out


def statement_json(st: Statement) -> dict:
    out: dict = {"mainsnak": snak(st.prop, st.value, st.snaktype), "type": "statement"}
    if st.qualifiers:
        quals: dict[str, list] = {}
        for prop, value in st.qualifiers:
            quals.setdefault(prop, []).append(snak(prop, value))
        out["qualifiers"] = quals
        out["qualifiers-order"] = list(quals)
    out["id"] = st.sid
    out["rank"] = st.rank
    if st.reference_url:
        ref_snak = snak("P854", ("string", st.reference_url))
        out["references"] = [{"hash": hashlib.sha1(st.reference_url.encode()).hexdigest(),
                              "snaks": {"P854": [ref_snak]}, "snaks-order": ["P854"]}]
    return out


def _lang(value: str) -> dict:
    return {"language": "en", "value": value}


def entity_json(w: World, e: Entity) -> dict:
    """The entity without ``lastrevid``/``modified`` (the build adds those)."""
    labels = {"en": _lang(e.label)}
    for lang, text in e.other_labels.items():
        labels[lang] = {"language": lang, "value": text}
    out: dict = {
        "type": "item", "id": e.qid, "labels": labels,
        "descriptions": {"en": _lang(e.description)} if e.description else {},
        "aliases": {"en": [_lang(a) for a in e.aliases]} if e.aliases else {},
        "claims": {prop: [statement_json(st) for st in sts] for prop, sts in e.claims.items()},
        "sitelinks": ({"enwiki": {"site": "enwiki", "title": e.article.title, "badges": []}} if e.article else {}),
    }
    num = e.num
    out["pageid"] = num + 100 if num < 100_000_000 else 2_000_000 + num % 100_000_000
    out["ns"] = 0
    out["title"] = e.qid
    return out


def property_json(pid: str) -> dict:
    label, datatype = PROPERTIES[pid]
    out: dict = {"type": "property", "datatype": datatype, "id": pid, "labels": {"en": _lang(label)}}
    desc = PROPERTY_DESCRIPTIONS.get(pid)
    out["descriptions"] = {"en": _lang(desc)} if desc else {}
    out["aliases"] = {}
    out["claims"] = {}
    out["pageid"] = 3_000_000 + int(pid[1:])
    out["ns"] = 120
    out["title"] = f"Property:{pid}"
    return out


def used_properties(w: World) -> list[str]:
    used: dict[str, None] = {}
    for e in w.entities.values():
        for prop, sts in e.claims.items():
            used[prop] = None
            for st in sts:
                for q, _ in st.qualifiers:
                    used[q] = None
                if st.reference_url:
                    used["P854"] = None
    return sorted(used, key=lambda p: int(p[1:]))


class RevisionClock:
    """Keeps ``lastrevid``/``modified`` per entity, moving them only when the entity changes."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.seen: dict[str, tuple[str, int, str]] = {}
        self.next_rev = 1_480_000_000

    def stamp(self, key: str, body: dict, month: int) -> dict:
        r = self.w.rng
        text = json.dumps(body, sort_keys=True)
        prev = self.seen.get(key)
        if prev and prev[0] == text:
            rev, modified = prev[1], prev[2]
        elif month == 0:
            rev = r.randint(1_300_000_000, 1_470_000_000)
            # Last edited 1 to 31 months before the start: in the default world, January to
            # July of 2019, 2020 or 2021.
            years_back = 2 - r.randint(0, 2)
            months_back = years_back * 12 + 8 - r.randint(1, 7)
            modified = self._time(self.w.span.snapshot(-months_back).date)
        else:
            self.next_rev += r.randint(50, 5000)
            rev = self.next_rev
            modified = self._time(self.w.span.snapshot(month - 1).date)  # the month it changed in
        self.seen[key] = (text, rev, modified)
        return {**body, "lastrevid": rev, "modified": modified}

    def _time(self, month: _dt.date) -> str:
        """A random moment of ``month`` (its 1st to 28th), as Wikidata's ``modified``."""
        r = self.w.rng
        return (f"{month.year:04d}-{month.month:02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:"
                f"{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z")


def dump_lines(w: World, clock: RevisionClock, month: int) -> list[str]:
    """One JSON text per entity: items by ascending id, then the properties in use."""
    lines = []
    for e in sorted(w.entities.values(), key=lambda x: x.num):
        lines.append(json.dumps(clock.stamp(e.qid, entity_json(w, e), month), ensure_ascii=False, separators=(",", ":")))
    for pid in used_properties(w):
        lines.append(json.dumps(clock.stamp(pid, property_json(pid), month), ensure_ascii=False, separators=(",", ":")))
    return lines
