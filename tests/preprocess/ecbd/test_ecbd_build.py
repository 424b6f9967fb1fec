"""The ECBD builder end to end: on the sample world (exact entities, definitions, NP spans), on
small hand-made dumps (redirected sitelinks, skips), through the CLI, and on bad input."""

from __future__ import annotations

import bz2
import contextlib
import io
import json
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import pytest

from tw_jax.cli_parser import OneLineErrorParser
from tw_jax.errors import DumpError
from tw_jax.preprocess.ecbd.build import BuildOptions, build_ecbd

NOV = "2021-11"
# The sample world's items with an origination date whose November article has at least 100
# words and a later sentence naming them with a span after the name (min_words=100; the world's
# articles are 30-150 words long, far below the paper's 500): (qid, title, year, page id).
EXPECTED = [
    ("Q100000015", "Rostport", 1171, 20007), ("Q100000041", "Trurmouth", 1224, 17823),
    ("Q100000038", "Dranbridge", 1235, 13032), ("Q100000021", "Staunsport", 1292, 14091),
    ("Q100000023", "Hirwick", 1362, 11557), ("Q100000033", "Krandale", 1401, 12723),
    ("Q100000017", "Firndale", 1582, 12249), ("Q100000045", "Dravminster", 1594, 18129),
    ("Q100000040", "Veistdale", 1619, 11312), ("Q100000039", "Mustminster", 1631, 14578),
    ("Q100000019", "Taulhollow", 1708, 21314), ("Q100000042", "Forwick", 1824, 14817),
    ("Q100000252", "Grol Textiles", 1994, 12947),
]
KRANDALE_NP = [
    ("Krandale_12723_3_0", "The football club Real Krandale is based in <extra_id_0>.",
     "the city", "NP-COMMON"),
    ("Krandale_12723_3_1", "The University of Krandale was founded in <extra_id_0> in 1680.",
     "the city", "NP-COMMON"),
    ("Krandale_12723_4_1", "In 1979, Krandale received <extra_id_0> from the city of Veistdale.",
     "a civic award", "NP-COMMON"),
    ("Krandale_12723_4_1", "In 1979, Krandale received a civic award from <extra_id_0> of "
     "Veistdale.", "the city", "NP-COMMON"),
    ("Krandale_12723_4_1", "In 1979, Krandale received a civic award from <extra_id_0>.",
     "the city of Veistdale", "NP-PROPER"),
    ("Krandale_12723_4_1", "In 1979, Krandale received a civic award from the city of "
     "<extra_id_0>.", "Veistdale", "NP-PROPER"),
]


@pytest.fixture(scope="module")
def nlp():
    from tw_jax.preprocess.ecbd.spans import load_parser

    return load_parser()[0]


def _cli(argv: list[str]) -> int:
    from tw_jax.benchmarks import ecbd_cli

    parser = OneLineErrorParser(prog="tw-jax")
    ecbd_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def world_build(sample_world, nlp, tmp_path_factory) -> dict:
    """``tw-jax ecbd build`` on the November dumps, every year, articles of 100+ words."""
    import tw_jax.preprocess.ecbd.spans as spans
    from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

    root, _ = sample_world
    out = tmp_path_factory.mktemp("ecbd_world")
    argv = ["ecbd", "build", "--wikidata", str(wikidata_dump(root, NOV)), "--wikipedia",
            str(wikipedia_dump(root, NOV)), "--out", str(out), "--years", "all",
            "--min-words", "100"]
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setattr(spans, "load_parser", lambda name: (nlp, "fixture"))
        assert _cli(argv) == 0
    truth = {r["id"]: r for r in _lines(root / f"truth/articles-{NOV}.jsonl")}
    return {"out": out, "stats": json.loads((out / "stats.json").read_text()), "truth": truth,
            "printed": printed.getvalue()}


def test_sample_world_entities_and_definitions(world_build):
    out, truth = world_build["out"], world_build["truth"]
    entities = _lines(out / "entities.jsonl")
    assert [(e["entity_id"], e["title"], e["year"], e["pageid"]) for e in entities] == EXPECTED
    assert {e["split"] for e in entities} == {"dev"}  # one entity per year: dev gets it
    stats = world_build["stats"]
    assert stats["entities"] == {"dated_in_years_with_sitelink": 79, "with_article": 79,
                                 "with_examples": 13}
    assert stats["skipped"]["entities"]["by_reason"] == {
        "no_examples": 1, "no_sentences": 18, "no_spans": 11, "short_article": 47}
    assert stats["examples"] == {"NP-COMMON": 28, "NP-PROPER": 8, "RANDOM": 173}
    assert sorted(stats["subsets"]) == sorted(str(e[2]) for e in EXPECTED)
    for qid, title, year, page_id in EXPECTED:
        paragraphs = truth[page_id]["paragraphs"]
        rows = _lines(out / str(year) / "np_spans_dev.json") + _lines(
            out / str(year) / "random_spans_dev.json")
        assert rows and all(r["entity_id"] == qid and r["year"] == str(year) for r in rows)
        assert not (out / str(year) / "np_spans_test.json").read_text()
        for row in rows:
            assert row["definition"] == paragraphs[0]  # the first paragraph's sentences
            t, pid, p, s = row["ex_id"].rsplit("_", 3)
            assert (t, int(pid)) == (title, page_id) and int(p) >= 1
            assert row["original_sentence"] == paragraphs[int(p)][int(s)]
            span = row["answer_d"]["<extra_id_0>"]
            assert row["masked_sentence"].replace("<extra_id_0>", span) == row["original_sentence"]
            assert row["answer_str"] == f"<extra_id_0> {span} <extra_id_1>"
            start, end = row["entity_span_char"]
            assert row["masked_sentence"][start:end] == row["entity_span_str"]
            assert row["masked_sentence"].index("<extra_id_0>") > end  # after the mention
    printed = json.loads(world_build["printed"])
    assert printed["entities"] == stats["entities"] and printed["examples"] == stats["examples"]


def test_sample_world_noun_phrases(world_build):
    rows = _lines(world_build["out"] / "1401" / "np_spans_dev.json")
    assert [(r["ex_id"], r["masked_sentence"], r["answer_d"]["<extra_id_0>"], r["span_type"])
            for r in rows] == KRANDALE_NP


def test_sample_world_paper_years(sample_world, nlp, tmp_path):
    """2017-2021 holds eight dated items; none has a later sentence that names it: the build
    says so (six without such a sentence, two articles under 50 words) and writes nothing."""
    from tw_jax.preprocess.ecbd.build import EmptyBuildError
    from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

    root, _ = sample_world
    with pytest.raises(EmptyBuildError) as error:
        build_ecbd(wikidata_dump(root, NOV), wikipedia_dump(root, NOV), tmp_path,
                   BuildOptions(min_words=50), nlp=nlp)
    assert str(error.value) == (
        "no examples: none of the 8 entities dated 2017-2021 gave one: 6 articles without a "
        "sentence of --min-sentence-words 5+ words naming the entity, 2 articles shorter than "
        "--min-words 50")
    assert list(tmp_path.iterdir()) == []


# --- hand-made dumps --------------------------------------------------------------------


def _item(qid: str, label: str, enwiki: str | None, prop: str | None, time: str | None,
          aliases: tuple[str, ...] = ()) -> str:
    claims = {}
    if prop:
        value = {"time": time, "timezone": 0, "before": 0, "after": 0, "precision": 11,
                 "calendarmodel": "http://www.wikidata.org/entity/Q1985727"}
        claims[prop] = [{"mainsnak": {"snaktype": "value", "property": prop, "datatype": "time",
                                      "datavalue": {"type": "time", "value": value}},
                         "type": "statement", "rank": "normal"}]
    record = {"type": "item", "id": qid, "labels": {"en": {"language": "en", "value": label}},
              "aliases": {"en": [{"language": "en", "value": a} for a in aliases]},
              "sitelinks": {"enwiki": {"site": "enwiki", "title": enwiki}} if enwiki else {},
              "claims": claims}
    return json.dumps(record)


def _page(page_id: int, title: str, text: str, redirect: str | None = None) -> str:
    red = f"<redirect title={quoteattr(redirect)} />" if redirect else ""
    return (f"<page><title>{escape(title)}</title><ns>0</ns><id>{page_id}</id>{red}<revision>"
            f"<id>1</id><text xml:space=\"preserve\">{escape(text)}</text></revision></page>\n")


STORM = ("'''Storm Alpha''' was a strong storm in the year 2020 over the sea.\n\n"
         "Storm Alpha moved north across the islands in two days.\n\n"
         "Locals called it \"Storm Alpha\" for weeks. Later Alpha weakened over the cold water.")
BETA = ("'''Beta Corp''' is a company making bicycles since 2019.\n\n"
        "Beta Corp sells bicycles in many countries around the world.")


def _dumps(folder: Path) -> tuple[Path, Path]:
    items = [
        _item("Q1", "Storm Alpha", "Storm Alpha (2020)", "P580", "+2020-09-01T00:00:00Z",
              ("Alpha",)),
        _item("Q2", "Beta Corp", "Beta Corp", "P571", "+2019-04-01T00:00:00Z"),
        _item("Q3", "Gamma", "Gamma", "P571", "+2005-01-01T00:00:00Z"),
        _item("Q4", "Delta", None, "P580", "+2018-01-01T00:00:00Z"),
        _item("Q5", "Epsilon", "Epsilon", "P571", "+2019-01-01T00:00:00Z"),
        _item("Q6", "Alpha Storm", "Storm Alpha (2020)", "P585", "+2020-10-01T00:00:00Z"),
        _item("Q7", "Zeta", "Zeta", None, None),
    ]
    wikidata = folder / "wikidata.json.bz2"
    wikidata.write_bytes(bz2.compress(("[\n" + ",\n".join(items) + "\n]\n").encode()))
    pages = [_page(10, "Storm Alpha (2020)", "#REDIRECT [[Storm Alpha]]", "Storm Alpha"),
             _page(11, "Beta Corp", BETA), _page(12, "Gamma", BETA), _page(13, "Storm Alpha", STORM)]
    wikipedia = folder / "enwiki.xml"
    wikipedia.write_text('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">\n'
                         + "".join(pages) + "</mediawiki>\n", encoding="utf-8")
    return wikidata, wikipedia


def test_hand_made_dumps(nlp, tmp_path):
    wikidata, wikipedia = _dumps(tmp_path)
    stats = build_ecbd(wikidata, wikipedia, tmp_path / "a", BuildOptions(min_words=10), nlp=nlp)
    assert stats["wikipedia_passes"] == 2  # the redirect's target was not a sitelink itself
    assert stats["entities"] == {"dated_in_years_with_sitelink": 4, "with_article": 2,
                                 "with_examples": 2}
    assert stats["skipped"]["wikidata"]["by_reason"] == {"no_enwiki": 1, "year_out_of_range": 1}
    assert stats["skipped"]["entities"]["by_reason"] == {
        "article_taken": 1, "mention_in_quotes": 1, "no_article": 1}
    rows = _lines(tmp_path / "a" / "2020" / "np_spans_dev.json")
    rows += _lines(tmp_path / "a" / "2020" / "random_spans_dev.json")
    assert {r["ex_id"].rsplit("_", 2)[0] for r in rows} == {"Storm Alpha_13"}
    assert {(r["ex_id"][-3:], r["entity_span_str"]) for r in rows} == {("1_0", "Storm Alpha"),
                                                                     ("2_1", "Alpha")}
    assert rows[0]["definition"] == ["Storm Alpha was a strong storm in the year 2020 over the sea."]
    assert _lines(tmp_path / "a" / "2019" / "np_spans_dev.json")[0]["title"] == "Beta Corp"
    again = build_ecbd(wikidata, wikipedia, tmp_path / "b", BuildOptions(min_words=10), nlp=nlp)
    for name in stats["files"]:  # the output depends on the dumps and options alone
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert again["examples"] == stats["examples"]


def test_bad_input_names_the_file(tmp_path, nlp):
    wikidata, _ = _dumps(tmp_path)
    broken = tmp_path / "broken.xml"
    broken.write_text("this is not a dump\n", encoding="utf-8")
    with pytest.raises(DumpError, match="broken.xml.*neither MediaWiki XML nor JSON lines"):
        build_ecbd(wikidata, broken, tmp_path / "out", BuildOptions(min_words=10), nlp=nlp)
    assert not (tmp_path / "out" / "stats.json").exists()
    with pytest.raises(SystemExit) as stopped:  # the path type's one-line argparse error
        _cli(["ecbd", "build", "--wikidata", str(tmp_path / "nope.json"), "--wikipedia",
              str(broken), "--out", str(tmp_path / "o")])
    assert stopped.value.code == 2
    assert _cli(["ecbd", "build", "--wikidata", str(wikidata), "--wikipedia", str(broken),
                 "--out", str(tmp_path / "o"), "--years", "soon"]) == 2


def test_a_build_without_examples_names_the_filter_and_writes_nothing(sample_world, nlp,
                                                                       tmp_path, capsys):
    """The README's defaults on the sample world: 8 entities dated 2017-2021, every article
    under 500 words; exit status 2 and one line, not an empty folder with status 0."""
    import tw_jax.preprocess.ecbd.spans as spans
    from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

    root, _ = sample_world
    dumps = ["--wikidata", str(wikidata_dump(root, NOV)), "--wikipedia",
             str(wikipedia_dump(root, NOV))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spans, "load_parser", lambda name: (nlp, "fixture"))
        assert _cli(["ecbd", "build", *dumps, "--out", str(tmp_path / "a"),
                     "--years", "2017-2021"]) == 2
        assert capsys.readouterr().err == (
            "tw-jax ecbd: error: no examples: none of the 8 entities dated 2017-2021 gave one: "
            "8 articles shorter than --min-words 500\n")
        assert _cli(["ecbd", "build", *dumps, "--out", str(tmp_path / "b"),
                     "--years", "1-2"]) == 2
        assert capsys.readouterr().err == (
            "tw-jax ecbd: error: no examples: --years 1-2 keeps none of the dump's 79 items "
            "with an origination date (theirs are 1100-2021); try --years all\n")
    assert not (tmp_path / "a" / "stats.json").exists()
    assert not (tmp_path / "b" / "stats.json").exists()


def test_why_empty_names_the_missing_dates_and_labels():
    from tw_jax.preprocess.ecbd.empty import why_empty

    assert why_empty((2017, 2021), [], 0, {}, {}) == (
        "no examples: the Wikidata dump has no item with an origination date")
    assert why_empty((2019, 2019), [2019, 1990], 0, {}, {}) == (
        "no examples: none of the 1 items dated 2019 has an English label and an enwiki "
        "sitelink")
    assert why_empty(None, [2019], 1, {"no_sentences": 1, "no_article": 1},
                     {"--min-sentence-words": 5}) == (
        "no examples: none of the 1 entities dated in any year gave one: no_article 1, 1 "
        "articles without a sentence of --min-sentence-words 5+ words naming the entity")
