"""Incomplete or wrong Wikidata dumps fail with one line naming the file; a malformed entity is
skipped with its reason, never read as an entity without facts
(tw_jax.preprocess.dumps.wikidata)."""

import json

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.wikidata import iter_entities, iter_lines
from tw_jax.preprocess.runners.accounting import Skips

ENTITY = {"type": "item", "id": "Q{}", "labels": {"en": {"language": "en", "value": "E{}"}},
          "claims": {"P31": [{"mainsnak": {
              "snaktype": "value", "property": "P31", "datatype": "wikibase-item",
              "datavalue": {"type": "wikibase-entityid", "value": {"id": "Q5"}}},
              "rank": "normal"}]}}


def _entity_line(i: int) -> str:
    return json.dumps(ENTITY).replace("Q{}", f"Q{i}").replace("E{}", f"E{i}")


def _dump(tmp_path, lines, name="wikidata.json"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_plain_dump_cut_in_the_middle_is_an_error(tmp_path):
    whole = ["[", *(_entity_line(i) + "," for i in range(1, 370)), _entity_line(370), "]"]
    assert len(list(iter_entities(_dump(tmp_path, whole), Skips()))) == 370
    cut = _dump(tmp_path, whole[:200], "cut.json")
    with pytest.raises(DumpError, match=r"cut\.json, after line 200 \(entity Q199\): the dump's "
                                        r"JSON array has no closing '\]': the file is cut"):
        list(iter_entities(cut, Skips()))
    with pytest.raises(DumpError, match="no closing"):  # the parallel readers' path too
        list(iter_lines(cut))


def test_a_file_that_is_not_a_wikidata_dump_is_refused_at_its_first_record(tmp_path):
    xml = _dump(tmp_path, ['<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/">',
                           *(f"<page><title>P{i}</title></page>" for i in range(10_000))],
                "enwiki.xml")
    skips = Skips()
    with pytest.raises(DumpError, match=r"enwiki\.xml, line 1: not a Wikidata JSON dump: its "
                                        r"first record is not an entity \('<mediawiki"):
        list(iter_entities(xml, skips))
    assert skips.counts == {}  # refused at once, not after 10,000 bad_json lines
    other_json = _dump(tmp_path, ["[", '{"title": "Ada"},', "]"], "articles.json")
    with pytest.raises(DumpError, match="first record is not an entity"):
        list(iter_entities(other_json, Skips()))


def test_bare_json_lines_without_brackets_are_a_whole_dump(tmp_path):
    path = _dump(tmp_path, [_entity_line(1), _entity_line(2)], "lines.json")
    assert [e.id for e in iter_entities(path, Skips())] == ["Q1", "Q2"]


def test_claims_as_a_list_is_a_malformed_entity_not_one_without_facts(tmp_path):
    broken = json.loads(_entity_line(2))
    broken["claims"] = list(broken["claims"].values())
    empty = json.loads(_entity_line(3))
    empty["claims"] = []  # how the dumps write an entity without statements
    path = _dump(tmp_path, ["[", _entity_line(1) + ",", json.dumps(broken) + ",",
                            json.dumps(empty), "]"])
    skips = Skips()
    entities = {e.id: e for e in iter_entities(path, skips)}
    assert sorted(entities) == ["Q1", "Q3"] and entities["Q3"].claims == ()
    assert skips.counts == {"bad_entity": 1}
    assert skips.examples["bad_entity"] == [f"{path}:3"]
