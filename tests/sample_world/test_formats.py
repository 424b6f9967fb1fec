"""The dumps are well-formed and shaped like the real ones."""

from __future__ import annotations

import bz2
import gzip
import re

import pytest
from sw_helpers import MONTHS, NS, PAIRS, json_entities, month_files, read_jsonl, xml_pages

from tw_jax.sample_world.schema import PROPERTIES


@pytest.fixture(scope="module")
def pages(sample_world):
    root, _ = sample_world
    return {m: xml_pages(month_files(root, m)["wikipedia"]) for m in MONTHS}


@pytest.fixture(scope="module")
def entities(sample_world):
    root, _ = sample_world
    return {m: json_entities(month_files(root, m)["wikidata_bz2"]) for m in MONTHS}


def test_xml_is_export_0_10(sample_world):
    root, _ = sample_world
    import xml.etree.ElementTree as ET

    with bz2.open(month_files(root, "2021-08")["wikipedia"]) as f:
        tree = ET.parse(f)
    assert tree.getroot().tag == f"{NS}mediawiki"
    assert tree.getroot().get("version") == "0.10"
    namespaces = {int(n.get("key")) for n in tree.getroot().iter(f"{NS}namespace")}
    assert {0, 1, 10, 14} <= namespaces


@pytest.mark.parametrize("month", MONTHS)
def test_pages_ascend_and_carry_consistent_metadata(pages, month):
    ps = pages[month]
    ids = [p["id"] for p in ps]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert {0, 1, 10, 14} <= {p["ns"] for p in ps}
    for p in ps:
        assert p["bytes"] == len(p["text"].encode("utf-8"))
        assert re.fullmatch(r"[0-9a-z]{31}", p["sha1"])
        if p["redirect"] is not None:
            assert p["text"].lower().startswith("#redirect [[" + p["redirect"].lower())
    text = "".join(p["text"] for p in ps if p["ns"] == 0)
    for marker in ("{{Short description|", "{{Use dmy dates|", "{{birth date and age|", "{{flagicon|",
                   "<ref name=", "/>", "== References ==", "{{Reflist}}", "[[Category:", "{| class=\"wikitable\"",
                   "[[File:", "&nbsp;", "<small>", "<br />", "<!--", "* [http", "]]s "):
        assert marker in text, marker


def test_page_ids_are_stable_and_new_pages_get_larger_ids(pages):
    for _, old, new in PAIRS:
        before = {p["id"]: p for p in pages[old]}
        after = {p["id"]: p for p in pages[new]}
        top = max(before)
        for pid, p in after.items():
            if pid in before:
                assert before[pid]["ns"] == p["ns"]
                if before[pid]["title"] != p["title"]:  # a move keeps the id and the text
                    assert p["text"] == before[pid]["text"] and p["ns"] in (0, 1)
            else:
                assert pid > top
        unchanged = sum(1 for pid, p in after.items() if pid in before and before[pid]["text"] == p["text"])
        assert unchanged > 0.7 * len(after)


def test_truth_articles_and_redirects_match_the_dump(sample_world, pages):
    root, _ = sample_world
    for month in MONTHS:
        ps = pages[month]
        articles = read_jsonl(month_files(root, month)["articles"])
        redirects = read_jsonl(month_files(root, month)["redirects"])
        assert [(a["id"], a["title"]) for a in articles] == [
            (p["id"], p["title"]) for p in ps if p["ns"] == 0 and p["redirect"] is None]
        assert redirects == [{"id": p["id"], "title": p["title"], "target": p["redirect"]}
                             for p in ps if p["ns"] == 0 and p["redirect"] is not None]
        titles = {a["title"] for a in articles}
        assert all(r["target"] in titles for r in redirects)


@pytest.mark.parametrize("month", MONTHS)
def test_json_dumps_parse_and_bz2_equals_gz(sample_world, month):
    root, _ = sample_world
    files = month_files(root, month)
    raw_bz2 = bz2.decompress(files["wikidata_bz2"].read_bytes())
    raw_gz = gzip.decompress(files["wikidata_gz"].read_bytes())
    assert raw_bz2 == raw_gz
    assert files["wikidata_gz"].read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime 0
    assert json_entities(files["wikidata_gz"]) == json_entities(files["wikidata_bz2"])


def test_entities_look_like_wikidata(entities, sample_world):
    root, _ = sample_world
    for month in MONTHS:
        ents = entities[month]
        items = [e for e in ents if e["type"] == "item"]
        props = {e["id"]: e for e in ents if e["type"] == "property"}
        used = set()
        snaktypes, ranks, value_types = set(), set(), set()
        for e in items:
            assert e["labels"]["en"]["value"] and e["id"].startswith("Q")
            assert isinstance(e["aliases"], dict) and isinstance(e["sitelinks"], dict)
            for prop, statements in e["claims"].items():
                used.add(prop)
                for s in statements:
                    assert s["type"] == "statement" and s["id"].startswith(e["id"] + "$")
                    assert s["mainsnak"]["property"] == prop
                    snaktypes.add(s["mainsnak"]["snaktype"])
                    ranks.add(s["rank"])
                    if "datavalue" in s["mainsnak"]:
                        value_types.add(s["mainsnak"]["datavalue"]["type"])
                    for q in s.get("qualifiers", {}):
                        used.add(q)
                    for ref in s.get("references", []):
                        used.update(ref["snaks"])
        assert used <= set(props)
        for pid, p in props.items():
            assert p["labels"]["en"]["value"] == PROPERTIES[pid][0] and p["datatype"] == PROPERTIES[pid][1]
        assert snaktypes == {"value", "somevalue", "novalue"}
        assert ranks == {"normal", "preferred", "deprecated"}
        assert value_types == {"wikibase-entityid", "time", "quantity", "string", "monolingualtext"}
        titles = {a["title"] for a in read_jsonl(month_files(root, month)["articles"])}
        sitelinks = {e["sitelinks"]["enwiki"]["title"] for e in items if "enwiki" in e["sitelinks"]}
        assert sitelinks == titles


def test_time_and_quantity_values_are_in_wikidata_form(entities):
    for e in entities["2021-08"]:
        for statements in e.get("claims", {}).values():
            for s in statements:
                dv = s["mainsnak"].get("datavalue")
                if dv and dv["type"] == "time":
                    v = dv["value"]
                    assert re.fullmatch(r"\+\d{4}-\d\d-\d\dT00:00:00Z", v["time"])
                    assert v["precision"] in (9, 10, 11)
                    assert v["calendarmodel"] == "http://www.wikidata.org/entity/Q1985727"
                if dv and dv["type"] == "quantity":
                    v = dv["value"]
                    assert re.fullmatch(r"\+\d+(\.\d+)?", v["amount"])
                    assert v["unit"] == "1" or v["unit"].startswith("http://www.wikidata.org/entity/Q")
