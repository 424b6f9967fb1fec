"""The ground truth agrees with the dumps, read back independently of the generator."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from sw_helpers import MONTHS, PAIRS, json_entities, month_files, read_jsonl, xml_pages
from sw_plain import to_paragraphs

from tw_jax.sample_world.check import split_sentences

MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]


@pytest.fixture(scope="module")
def truth(sample_world):
    root, _ = sample_world
    out = {"articles": {}, "entities": {}, "pages": {}}
    for m in MONTHS:
        out["articles"][m] = {a["id"]: a for a in read_jsonl(month_files(root, m)["articles"])}
        out["entities"][m] = {e["id"]: e for e in json_entities(month_files(root, m)["wikidata_gz"])}
        out["pages"][m] = xml_pages(month_files(root, m)["wikipedia"])
    for pair, _, _ in PAIRS:
        for name in ("diffset", "facts", "changes"):
            out[(name, pair)] = read_jsonl(root / "truth" / f"{name}-{pair}.jsonl")
    return out


@pytest.mark.parametrize("month", MONTHS)
def test_plain_text_is_what_the_wikitext_says(truth, month):
    """An independent converter (tests/sample_world/sw_plain.py) reads the same paragraphs."""
    articles = truth["articles"][month]
    for p in truth["pages"][month]:
        if p["ns"] != 0 or p["redirect"] is not None:
            continue
        expected = articles[p["id"]]["paragraphs"]
        assert to_paragraphs(p["text"]) == [" ".join(s) for s in expected], p["title"]
        assert [split_sentences(" ".join(s)) for s in expected] == expected


@pytest.mark.parametrize("month", MONTHS)
def test_sentences_follow_the_rules(truth, month):
    for a in truth["articles"][month].values():
        sentences = [s for p in a["paragraphs"] for s in p]
        assert len(sentences) == len(set(sentences)), a["title"]
        for s in sentences:
            assert s[0].isupper() or s[0].isdigit(), s
            assert s[-1] in ".!?", s
    text = " ".join(s for a in truth["articles"][month].values() for p in a["paragraphs"] for s in p)
    for needle in ("Dr. ", "St. ", "No. ", " Inc. ", "1,", ".5 million", "–", " & "):
        assert needle in text, needle
    assert re.search(r"\b[A-Z]\. [A-Z]\. [A-Z]", text), "initials"


def test_matches_the_preprocess_converter_when_present(truth):
    """The pipeline's own converter, where it exists, reads the sample exactly (oracle check)."""
    wikitext = pytest.importorskip("tw_jax.preprocess.plaintext.wikitext")
    sentences = pytest.importorskip("tw_jax.preprocess.plaintext.sentences")
    month = "2021-11"
    articles = truth["articles"][month]
    for p in truth["pages"][month]:
        if p["ns"] == 0 and p["redirect"] is None:
            got = [sentences.split_sentences(x) for x in wikitext.to_paragraphs(p["text"])]
            assert got == articles[p["id"]]["paragraphs"], p["title"]


@pytest.mark.parametrize("pair,old,new", PAIRS)
def test_diffset_is_the_text_level_difference(truth, pair, old, new):
    before, after = truth["articles"][old], truth["articles"][new]
    expected = []
    for pid in sorted(after):
        sentences = [s for p in after[pid]["paragraphs"] for s in p]
        if pid not in before:
            expected.append({"id": pid, "title": after[pid]["title"], "kind": "new", "sentences": sentences})
            continue
        seen = {s for p in before[pid]["paragraphs"] for s in p}
        added = [s for s in sentences if s not in seen]
        if added:
            expected.append({"id": pid, "title": after[pid]["title"], "kind": "changed", "sentences": added})
    assert truth[("diffset", pair)] == expected


@pytest.mark.parametrize("pair,old,new", PAIRS)
def test_prose_edits_land_where_intended(truth, pair, old, new):
    before, after = truth["articles"][old], truth["articles"][new]
    changes = truth[("changes", pair)]
    for c in changes:
        if c["type"] == "prose_start":
            assert after[c["page_id"]]["paragraphs"][0] == c["sentences"]
        elif c["type"] == "prose_end":
            assert after[c["page_id"]]["paragraphs"][-1] == c["sentences"]
        elif c["type"] == "prose_middle":
            (s,) = c["sentences"]
            para = next(p for p in after[c["page_id"]]["paragraphs"] if s in p)
            assert 0 < para.index(s) < len(para) - 1
            old_sentences = {x for p in before[c["page_id"]]["paragraphs"] for x in p}
            assert para[para.index(s) - 1] in old_sentences and para[para.index(s) + 1] in old_sentences
        elif c["type"] == "prose_delete":
            flat = {x for p in after[c["page_id"]]["paragraphs"] for x in p}
            assert not set(c["deleted"]) & flat
        elif c["type"] == "prose_number":
            assert re.search(r"\d{3}", c["sentences"][0])
        elif c["type"] == "renamed_article":
            a, b = before[c["page_id"]], after[c["page_id"]]
            assert a["title"] == c["old_title"] and b["title"] == c["new_title"] and a["paragraphs"] == b["paragraphs"]
            redirects = {p["title"]: p["redirect"] for p in truth["pages"][new] if p["redirect"]}
            assert redirects[c["old_title"]] == c["new_title"]
        elif c["type"] == "deleted_article":
            assert c["page_id"] in before and c["page_id"] not in after
            assert c["subject"] in truth["entities"][old] and c["subject"] not in truth["entities"][new]


def render(value: dict, labels: dict[str, str]) -> str:
    t, v = value["type"], value["value"]
    if t == "wikibase-entityid":
        return labels[v["id"]]
    if t == "time":
        y, m, d = int(v["time"][1:5]), int(v["time"][6:8]), int(v["time"][9:11])
        return {11: f"{d} {MONTH_NAMES[m - 1]} {y}", 10: f"{MONTH_NAMES[m - 1]} {y}"}.get(v["precision"], str(y))
    if t == "quantity":
        amount = Decimal(v["amount"])
        text = str(int(amount)) if amount == int(amount) else str(amount.normalize())
        unit = v["unit"].rsplit("/", 1)[-1]
        return text if v["unit"] == "1" else f"{text} {labels[unit]}"
    if t == "monolingualtext":
        return v["text"]
    return v


def facts_of(entities: dict) -> tuple[dict, dict]:
    labels = {q: e["labels"]["en"]["value"] for q, e in entities.items() if e["type"] == "item"}
    facts = {}
    for q, e in entities.items():
        if e["type"] != "item":
            continue
        out = []
        for prop, statements in e["claims"].items():
            for s in statements:
                snak = s["mainsnak"]
                if snak["snaktype"] != "value" or s["rank"] == "deprecated":
                    continue
                key = (prop, repr(sorted(snak["datavalue"]["value"].items())) if isinstance(
                    snak["datavalue"]["value"], dict) else snak["datavalue"]["value"])
                if key not in [k for k, _, _ in out]:
                    obj = snak["datavalue"]["value"].get("id") if snak["datavalue"]["type"] == "wikibase-entityid" else None
                    out.append((key, render(snak["datavalue"], labels), obj))
        facts[q] = out
    return facts, labels


@pytest.mark.parametrize("pair,old,new", PAIRS)
def test_fact_categories_follow_the_rules(truth, pair, old, new):
    """Algorithm 2 re-run on the JSON dumps gives the facts file, record for record."""
    before, _ = facts_of(truth["entities"][old])
    after, labels = facts_of(truth["entities"][new])
    got = {(f["subject_id"], f["relation_id"], f["object"], f["category"]): f for f in truth[("facts", pair)]}
    expected = {}
    for s, facts in after.items():
        old_facts = before.get(s)
        for (prop, val), rendered, obj in facts:
            previous = [r for (p, _), r, _ in (old_facts or []) if p == prop]
            if old_facts is None or not previous:
                cat, previous = "new", []
            elif (prop, val) in [k for k, _, _ in old_facts]:
                cat, previous = "unchanged", []
            else:
                cat = "updated"
            expected[(s, prop, rendered, cat)] = (obj, previous)
        for (prop, val), rendered, obj in old_facts or []:
            if (prop, val) not in [k for k, _, _ in facts]:
                expected[(s, prop, rendered, "deleted")] = (obj, [])
    assert set(got) == set(expected)
    for key, (obj, previous) in expected.items():
        assert got[key]["object_id"] == obj and got[key]["previous_objects"] == previous, key
        assert got[key]["subject"] == labels[key[0]]


def test_hand_checked_changes(truth):
    for pair, _, new in PAIRS:
        facts = truth[("facts", pair)]
        labels = {q: e["labels"]["en"]["value"] for q, e in truth["entities"][new].items() if e["type"] == "item"}
        for c in truth[("changes", pair)]:
            mine = [f for f in facts if f["subject_id"] == c["subject"]] if "subject" in c else []
            if c["type"] == "transfer":
                (f,) = [f for f in mine if f["relation_id"] == "P54" and f["object_id"] == c["new_club"]]
                assert f["category"] == "updated" and labels[c["old_club"]] in f["previous_objects"]
                assert f["mentioned"]
                old_club = [f for f in mine if f["relation_id"] == "P54" and f["object_id"] == c["old_club"]]
                assert [f["category"] for f in old_club] == (["deleted"] if c["removed_old"] else ["unchanged"])
            elif c["type"] == "ceo_change":
                cats = {f["object_id"]: f for f in mine if f["relation_id"] == "P169"}
                assert cats[c["new"]]["category"] == "updated" and cats[c["old"]]["category"] == "deleted"
                assert cats[c["new"]]["previous_objects"] == [labels[c["old"]]]
            elif c["type"] == "population_update":
                (f,) = [f for f in mine if f["relation_id"] == "P1082" and f["object"] == str(c["new"])]
                assert f["category"] == "updated" and str(c["old"]) in f["previous_objects"]
            elif c["type"] == "new_award":
                (f,) = [f for f in mine if f["relation_id"] == "P166"]
                assert f["category"] == "new" and f["mentioned"]
            elif c["type"] == "new_entity":
                assert mine and all(f["category"] == "new" for f in mine)
            elif c["type"] == "deprecated_statement":
                gone = [f for f in mine if f["relation_id"] == c["relation"] and f["category"] == "deleted"]
                assert gone


def test_deprecated_statements_are_no_facts(truth):
    for pair, _, new in PAIRS:
        live = {(f["subject_id"], f["relation_id"], f["object"]) for f in truth[("facts", pair)]
                if f["category"] != "deleted"}
        _, labels = facts_of(truth["entities"][new])
        n = 0
        for q, e in truth["entities"][new].items():
            for prop, statements in e.get("claims", {}).items():
                kept = {render(s["mainsnak"]["datavalue"], labels) for s in statements
                        if s["rank"] != "deprecated" and s["mainsnak"]["snaktype"] == "value"}
                for s in statements:
                    if s["rank"] == "deprecated":
                        value = render(s["mainsnak"]["datavalue"], labels)
                        assert value in kept or (q, prop, value) not in live
                        n += 1
        assert n > 0


def test_mentioned_means_the_object_is_in_the_article(truth):
    for pair, old, new in PAIRS[:1]:
        by_title = {}
        for m in (old, new):
            by_title[m] = {a["title"]: "\n".join(s for p in a["paragraphs"] for s in p)
                           for a in truth["articles"][m].values()}
        sitelink = {m: {q: e["sitelinks"]["enwiki"]["title"] for q, e in truth["entities"][m].items()
                        if e.get("sitelinks", {}).get("enwiki")} for m in (old, new)}
        for f in truth[("facts", pair)]:
            m = old if f["category"] == "deleted" else new
            title = sitelink[m].get(f["subject_id"])
            text = by_title[m].get(title, "") if title else ""
            found = re.search(r"(?<!\w)" + re.escape(f["object"]) + r"(?!\w)", text, re.IGNORECASE) is not None
            assert f["mentioned"] == found
