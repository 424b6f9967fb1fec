"""Malformed Wikidata lines in the probes stage: too many of them fail the run with one line; an
entity malformed in one dump only is left out of categorisation (its facts would otherwise be NEW
or lose their counterpart) and counted in stats.json, the same with workers and with Beam."""

import json

import pytest

from tw_jax.cli import main
from tw_jax.errors import DumpError
from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.probes.finish import ProbeOptions
from tw_jax.preprocess.probes.local import build_probes

EXPORT = '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10">\n{}' \
         "</mediawiki>\n"
PAGE = ("<page><title>{title}</title><ns>0</ns><id>{id}</id><revision><id>1</id>"
        '<text xml:space="preserve">{text}</text></revision></page>\n')
# Every fact kept: no down-sampling, no caps, malformed lines tolerated up to half the dump.
OPTIONS = ProbeOptions(unchanged_rate=1.0, max_subject_frac=1.0, max_object_frac=1.0,
                       max_relation_frac=1.0, lighttuning_size=0, max_skipped_share=0.5)


def entity(eid, label, *objects, kind="item"):
    claims = {"P1": [{"mainsnak": {"snaktype": "value", "property": "P1",
                                   "datatype": "wikibase-item",
                                   "datavalue": {"type": "wikibase-entityid",
                                                 "value": {"id": obj}}},
                      "rank": "normal"} for obj in objects]} if objects else {}
    record = {"type": kind, "id": eid, "labels": {"en": {"language": "en", "value": label}},
              "claims": claims, "sitelinks": {"enwiki": {"site": "enwiki", "title": label}}}
    if kind == "property":
        record["datatype"] = "wikibase-item"
    return json.dumps(record)


def malformed_claims(eid, label):
    """A whole entity whose claims are a list: bad_entity, its id readable."""
    record = json.loads(entity(eid, label, "Q5"))
    record["claims"] = list(record["claims"].values())
    return json.dumps(record)


def dump(path, lines):
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n", encoding="utf-8")
    return path


def wikipedia(tmp_path, titles):
    text = "".join(PAGE.format(title=t, id=i, text=f"{t} is linked with Thing and Other.")
                   for i, t in enumerate(titles, 1))
    path = tmp_path / "enwiki.xml"
    path.write_text(EXPORT.format(text), encoding="utf-8")
    diffset = tmp_path / "diffset"
    build_diffset(None, path, diffset)
    return path, diffset


COMMON = [entity("P1", "linked with", kind="property"), entity("Q5", "Thing"),
          entity("Q6", "Other")]


@pytest.fixture
def one_sided(tmp_path):
    """Q2 malformed (not JSON) in the old dump, Q3 malformed (claims a list) in the new one."""
    old = dump(tmp_path / "old.json", [
        *COMMON, entity("Q1", "Alpha", "Q5"),
        '{"type":"item","id":"Q2","labels":{"en":{"language":"en","value":"Beta"}},"claims":{',
        entity("Q3", "Gamma", "Q5"),
    ])
    new = dump(tmp_path / "new.json", [
        *COMMON, entity("Q1", "Alpha", "Q6"), entity("Q2", "Beta", "Q5", "Q6"),
        malformed_claims("Q3", "Gamma"), entity("Q4", "Delta", "Q5"),
    ])
    wiki, diffset = wikipedia(tmp_path, ["Alpha", "Beta", "Gamma", "Delta"])
    return old, new, wiki, diffset


CATEGORISED = {"unchanged": 0, "updated": 1, "new": 1, "deleted": 1}  # Q1 twice, Q4


def _check_one_sided(stats):
    assert {c: v["categorised"] for c, v in stats["categories"].items()} == CATEGORISED
    assert stats["skipped_one_side"] == {"old": 1, "new": 1,
                                         "examples": {"old": ["Q2"], "new": ["Q3"]}}
    assert stats["skipped"]["old_wikidata"]["by_reason"] == {"bad_json": 1}
    assert stats["skipped"]["new_wikidata"]["by_reason"] == {"bad_entity": 1}


@pytest.mark.parametrize("workers", [1, 2])
def test_an_entity_malformed_in_one_dump_is_in_no_category(one_sided, tmp_path, workers):
    old, new, wiki, diffset = one_sided
    out = tmp_path / f"probes{workers}"
    stats = build_probes(old, new, wiki, diffset, out, options=OPTIONS, workers=workers)
    _check_one_sided(stats)
    subjects = set()
    for category in CATEGORISED:
        text = (out / f"{category}.csv").read_text(encoding="utf-8")
        subjects |= {row.split(",")[3] for row in text.splitlines()[1:]}
    assert "Q2" not in subjects and "Q3" not in subjects
    assert "Q4" in subjects  # a subject absent from the old dump is still NEW


def test_beam_leaves_out_the_same_entities(one_sided, tmp_path):
    pytest.importorskip("apache_beam")
    from tw_jax.preprocess.probes.beam import build_probes_beam

    old, new, wiki, diffset = one_sided
    local = build_probes(old, new, wiki, diffset, tmp_path / "local", options=OPTIONS)
    beam = build_probes_beam(old, new, wiki, diffset, tmp_path / "beam", options=OPTIONS)
    _check_one_sided(beam)
    assert json.dumps(local, sort_keys=True) == json.dumps(beam, sort_keys=True)


@pytest.fixture
def three_bad(tmp_path):
    """A new dump of 100 records, 3 of them malformed (lines 12, 41, 77)."""
    lines = [*COMMON, *(entity(f"Q{i}", f"E{i}", "Q5") for i in range(10, 107))]
    lines[10] = "{not json"
    lines[39] = malformed_claims("Q49", "E49")
    lines[75] = '{"type":"item","id":"Q85","claims":['
    assert len(lines) == 100
    new = dump(tmp_path / "new.json", lines)
    old = dump(tmp_path / "old.json", COMMON)
    wiki, diffset = wikipedia(tmp_path, ["E10"])
    return old, new, wiki, diffset


def test_too_many_malformed_lines_fail_in_one_line(three_bad, tmp_path, capsys):
    old, new, wiki, diffset = three_bad
    argv = ["probes", "--old", str(old), "--new", str(new), "--wikipedia", str(wiki),
            "--diffset", str(diffset), "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tw-jax probes: error: {new}, first bad line 12: 3 of 100 records are malformed "
        "(3.00%: bad_entity 1, bad_json 2), more than the 1.00% allowed by --max-skipped-share; "
        "the dump is damaged: fetch it again, or raise the threshold"
    ]
    assert not (tmp_path / "out" / "stats.json").exists()

    assert main([*argv, "--max-skipped-share", "0.05"]) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["skipped"]["new_wikidata"]["by_reason"] == {"bad_entity": 1, "bad_json": 2}
    assert stats["skipped"]["new_wikidata"]["examples"] == {
        "bad_entity": [f"{new}:41"], "bad_json": [f"{new}:12", f"{new}:77"]}
    assert stats["options"]["max_skipped_share"] == 0.05
    assert stats["entities"]["new"] == 97
    # The two malformed entities that name an id were read whole in no old dump: not one-sided.
    assert stats["skipped_one_side"] == {"old": 0, "new": 0, "examples": {}}


def test_the_old_dump_is_checked_too_and_the_share_is_validated(three_bad, tmp_path, capsys):
    old, new, wiki, diffset = three_bad
    with pytest.raises(DumpError, match=r"old\.json, first bad line 5: 1 of 4 records are "
                                        r"malformed \(25\.00%: bad_json 1\)"):
        build_probes(dump(tmp_path / "old.json", [*COMMON, "{]"]), new, wiki, diffset,
                     tmp_path / "out")
    argv = ["probes", "--old", str(old), "--new", str(new), "--wikipedia", str(wiki),
            "--diffset", str(diffset), "--out", str(tmp_path / "out"),
            "--max-skipped-share", "1.5"]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        "tw-jax probes: error: max_skipped_share must be in [0, 1], got 1.5"]


def test_beam_fails_with_the_same_line(three_bad, tmp_path):
    pytest.importorskip("apache_beam")
    from tw_jax.preprocess.probes.beam import build_probes_beam

    old, new, wiki, diffset = three_bad
    with pytest.raises(DumpError) as caught:  # not the runner's RuntimeError around it
        build_probes_beam(old, new, wiki, diffset, tmp_path / "beam")
    assert str(caught.value).startswith(f"{new}, first bad line 12: 3 of 100 records are "
                                        "malformed (3.00%: bad_entity 1, bad_json 2)")
    assert not (tmp_path / "beam" / "stats.json").exists()
    options = ProbeOptions(max_skipped_share=0.05)
    stats = build_probes_beam(old, new, wiki, diffset, tmp_path / "beam", options=options)
    assert stats["skipped"]["new_wikidata"]["by_reason"] == {"bad_entity": 1, "bad_json": 2}
