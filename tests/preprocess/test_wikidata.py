"""iter_entities: the dump's two line forms, every datatype, ranks and snak types, bad input,
and agreement with the sample world's ground truth on every fact of every month."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.wikidata import Claim, Entity, iter_entities
from tw_jax.preprocess.facts.labels import LabelIndex
from tw_jax.preprocess.facts.values import render
from tw_jax.preprocess.runners.accounting import Skips

E = "http://www.wikidata.org/entity/"


def snak(prop: str, datatype: str, datavalue: dict | None, snaktype: str = "value") -> dict:
    out = {"snaktype": snaktype, "property": prop, "hash": "x" * 40}
    if datavalue is not None:
        out["datavalue"] = datavalue
    out["datatype"] = datatype
    return out


def statement(mainsnak: dict, rank: str = "normal") -> dict:
    return {"mainsnak": mainsnak, "type": "statement", "id": "Q1$abc", "rank": rank,
            "qualifiers": {"P580": [snak("P580", "time", time_dv("+2001-00-00T00:00:00Z", 9))]}}


def item_dv(qid: str) -> dict:
    return {"value": {"entity-type": "item", "numeric-id": int(qid[1:]), "id": qid},
            "type": "wikibase-entityid"}


def time_dv(t: str, precision: int) -> dict:
    return {"value": {"time": t, "timezone": 0, "before": 0, "after": 0, "precision": precision,
                      "calendarmodel": E + "Q1985727"}, "type": "time"}


def claims(*statements: dict) -> dict:
    out: dict = {}
    for st in statements:
        out.setdefault(st["mainsnak"]["property"], []).append(st)
    return out


ITEM = {
    "type": "item", "id": "Q42",
    "labels": {"en": {"language": "en", "value": "Douglas Adams"},
               "de": {"language": "de", "value": "Douglas Adams (de)"}},
    "descriptions": {},
    "aliases": {"en": [{"language": "en", "value": "DNA"}, {"language": "en", "value": "D. Adams"}],
                "fr": [{"language": "fr", "value": "DA"}]},
    "claims": claims(
        statement(snak("P31", "wikibase-item", item_dv("Q5"))),
        statement(snak("P569", "time", time_dv("+1952-03-11T00:00:00Z", 11)), rank="preferred"),
        statement(snak("P569", "time", time_dv("+1953-03-11T00:00:00Z", 11)), rank="deprecated"),
        statement(snak("P1082", "quantity", {"value": {"amount": "+1234", "unit": "1"},
                                             "type": "quantity"})),
        statement(snak("P2046", "quantity", {"value": {"amount": "+48631.90", "unit": E + "Q712226",
                                                       "upperBound": "+48632", "lowerBound": "+48631"},
                                             "type": "quantity"})),
        statement(snak("P1448", "monolingualtext", {"value": {"text": "Doug", "language": "en"},
                                                    "type": "monolingualtext"})),
        statement(snak("P856", "url", {"value": "https://example.org/", "type": "string"})),
        statement(snak("P214", "external-id", {"value": "113230702", "type": "string"})),
        statement(snak("P18", "commonsMedia", {"value": "Douglas adams.jpg", "type": "string"})),
        statement(snak("P1687", "wikibase-property", {"value": {"entity-type": "property",
                                                                "numeric-id": 31},
                                                      "type": "wikibase-entityid"})),
        statement(snak("P625", "globe-coordinate", {"value": {"latitude": 1.0, "longitude": 2.0},
                                                    "type": "globecoordinate"})),
        statement(snak("P9999", "future-type", {"value": {"x": 1}, "type": "hologram"})),
        statement(snak("P26", "wikibase-item", None, snaktype="somevalue")),
        statement(snak("P40", "wikibase-item", None, snaktype="novalue")),
    ),
    "sitelinks": {"enwiki": {"site": "enwiki", "title": "Douglas Adams", "badges": []},
                  "dewiki": {"site": "dewiki", "title": "Douglas Adams", "badges": []}},
    "pageid": 138, "ns": 0, "title": "Q42", "lastrevid": 1, "modified": "2021-08-01T00:00:00Z",
}
UNLABELLED = {"type": "item", "id": "Q7", "labels": {"de": {"language": "de", "value": "Sieben"}},
              "descriptions": [], "aliases": [], "claims": [], "sitelinks": []}
PROPERTY = {"type": "property", "datatype": "wikibase-item", "id": "P31",
            "labels": {"en": {"language": "en", "value": "instance of"}}, "aliases": {}, "claims": {}}
RECORDS = [ITEM, UNLABELLED, PROPERTY]

EXPECTED_CLAIMS = (
    Claim("P31", "wikibase-item", ("item", "Q5")),
    Claim("P569", "time", ("time", "+1952-03-11T00:00:00Z", 11)),
    Claim("P1082", "quantity", ("quantity", "+1234", None)),
    Claim("P2046", "quantity", ("quantity", "+48631.90", "Q712226")),
    Claim("P1448", "monolingualtext", ("monolingualtext", "Doug", "en")),
    Claim("P856", "url", ("string", "https://example.org/")),
    Claim("P214", "external-id", ("string", "113230702")),
    Claim("P18", "commonsMedia", ("string", "Douglas adams.jpg")),
    Claim("P1687", "wikibase-property", ("item", "P31")),
)


def dump_text(records: list[dict], bracketed: bool = True) -> bytes:
    lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
    if bracketed:
        return ("[\n" + ",\n".join(lines) + "\n]\n").encode()
    return ("\n".join(lines) + "\n").encode()


def write(path: Path, data: bytes) -> Path:
    if path.suffix == ".bz2":
        data = bz2.compress(data)
    elif path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("bracketed", [True, False])
@pytest.mark.parametrize("name", ["dump.json", "dump.json.bz2", "dump.json.gz"])
def test_reads_every_form(tmp_path, name, bracketed):
    path = write(tmp_path / name, dump_text(RECORDS, bracketed))
    skips = Skips()
    got = list(iter_entities(path, skips))
    assert [e.id for e in got] == ["Q42", "Q7", "P31"]
    q42, q7, p31 = got
    assert q42 == Entity("Q42", "item", "Douglas Adams", ("DNA", "D. Adams"), "Douglas Adams", None,
                         EXPECTED_CLAIMS)
    assert q7 == Entity("Q7", "item", None, (), None, None, ())
    assert p31 == Entity("P31", "property", "instance of", (), None, "wikibase-item", ())
    assert dict(skips.counts) == {"deprecated_statement": 1, "unsupported_value": 2, "no_value": 2}
    q42_line = 2 if bracketed else 1  # after the "[" line, or first
    assert skips.examples["deprecated_statement"] == [f"{path}:{q42_line} Q42 P569"]


def test_bom_crlf_and_no_final_newline(tmp_path):
    lines = [json.dumps(r) for r in RECORDS]
    path = write(tmp_path / "dos.json", ("\ufeff" + "\r\n".join(lines)).encode())
    skips = Skips()
    assert [e.id for e in iter_entities(path, skips)] == ["Q42", "Q7", "P31"]
    assert "bad_json" not in skips.counts


def test_claims_are_hashable_and_comparable():
    assert len({*EXPECTED_CLAIMS, *EXPECTED_CLAIMS}) == len(EXPECTED_CLAIMS)


def test_old_style_entity_ids_and_missing_datatype(tmp_path):
    old = {"type": "item", "id": "Q1", "labels": {}, "claims": {"P31": [{
        "mainsnak": {"snaktype": "value", "property": "P31",
                     "datavalue": {"value": {"entity-type": "item", "numeric-id": 5},
                                   "type": "wikibase-entityid"}},
        "rank": "normal"}]}}
    path = write(tmp_path / "old.json", dump_text([old]))
    (entity,) = iter_entities(path, Skips())
    assert entity.claims == (Claim("P31", "wikibase-item", ("item", "Q5")),)


def test_bad_lines_are_counted_with_file_and_line(tmp_path):
    text = dump_text(RECORDS).decode().splitlines()
    text.insert(2, '{"type": "item", "id": "Q8", "labels": ')  # line 3: cut short
    text.insert(3, '{"type": "item", "labels": {}},')  # line 4: no id
    text.insert(4, '[1, 2],')  # line 5: not an object
    text.insert(5, '{"type": "lexeme", "id": "L1", "lemmas": {}},')  # line 6: not item/property
    text.insert(6, '{"type": "item", "id": "Q9", "claims": {"P31": [{"rank": "normal"}]}},')
    path = write(tmp_path / "bad.json.bz2", ("\n".join(text) + "\n").encode())
    skips = Skips()
    got = [e.id for e in iter_entities(path, skips)]
    assert got == ["Q42", "Q7", "P31"]
    assert skips.counts["bad_json"] == 1
    assert skips.examples["bad_json"] == [f"{path}:3"]
    assert skips.counts["bad_entity"] == 3  # no id, not an object, statement without mainsnak
    assert skips.examples["bad_entity"] == [f"{path}:4", f"{path}:5", f"{path}:7"]
    assert skips.counts["unsupported_entity_type"] == 1


@pytest.mark.parametrize("name", ["cut.json.bz2", "cut.json.gz"])
def test_truncated_archive_is_a_dump_error_naming_the_file(tmp_path, name):
    full = tmp_path / ("full" + Path(name).suffix)
    write(full, dump_text(RECORDS * 50))
    data = full.read_bytes()
    path = tmp_path / name
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DumpError) as info:
        list(iter_entities(path, Skips()))
    assert str(path) in str(info.value)
    assert "truncated" in str(info.value)
    assert "after line" in (info.value.record or "")


def test_missing_file_is_a_dump_error(tmp_path):
    with pytest.raises(DumpError, match="cannot open"):
        list(iter_entities(tmp_path / "absent.json.bz2", Skips()))


# -- agreement with the sample world ------------------------------------------------------------

def _facts(path: Path, labels: dict[str, str] | LabelIndex) -> dict[str, set[tuple[str, str, str]]]:
    """(subject, relation, rendered object) of every kept claim, by subject; labels from the dump."""
    entities = list(iter_entities(path, Skips()))
    label_of = labels.label if isinstance(labels, LabelIndex) else labels.get
    if isinstance(labels, dict):
        labels.update({e.id: e.label for e in entities if e.label is not None})
    out: dict[str, set[tuple[str, str, str]]] = {}
    for e in entities:
        for c in e.claims:
            rendered = render(c.value, label_of)
            assert rendered is not None, (e.id, c)
            out.setdefault(e.id, set()).add((e.id, c.property, rendered))
    return out


def _flatten(by_subject: dict[str, set], subjects: set[str] | None = None) -> set:
    return {f for s, facts in by_subject.items() if subjects is None or s in subjects for f in facts}


def test_sample_world_facts_match_the_truth(sample_world, tmp_path):
    from tw_jax.sample_world.build import truth_file, wikidata_dump

    root, world = sample_world
    months = world["months"]
    index = LabelIndex.build(wikidata_dump(root, months[0]), tmp_path / "labels.sqlite")
    by_month = {months[0]: _facts(wikidata_dump(root, months[0]), index)}
    index.close()
    for month in months[1:]:
        by_month[month] = _facts(wikidata_dump(root, month, "gz"), {})
    for i, pair in enumerate(world["pairs"]):
        old, new = by_month[months[i]], by_month[months[i + 1]]
        records = [json.loads(line) for line in
                   truth_file(root, "facts", pair).read_text(encoding="utf-8").splitlines()]
        now = {(r["subject_id"], r["relation_id"], r["object"]) for r in records
               if r["category"] in ("unchanged", "updated", "new")}
        assert _flatten(new) == now, pair
        before = {(r["subject_id"], r["relation_id"], r["object"]) for r in records
                  if r["category"] in ("unchanged", "deleted")}
        before |= {(r["subject_id"], r["relation_id"], prev) for r in records
                   if r["category"] == "updated" for prev in r["previous_objects"]}
        # The truth speaks only of subjects that still exist in the new month.
        assert _flatten(old, {r["subject_id"] for r in records}) == before, pair
