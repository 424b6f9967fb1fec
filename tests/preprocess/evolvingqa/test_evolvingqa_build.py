"""``tw-jax evolvingqa build`` on the sample world: every expected output is computed from the
world's ground truth (its plain articles), never from the pipeline's own files."""

import json
from pathlib import Path

import pytest

from tw_jax.benchmarks import evolvingqa_cli
from tw_jax.cli_parser import OneLineErrorParser
from tw_jax.preprocess.evolvingqa.extract import build_evolvingqa
from tw_jax.preprocess.evolvingqa.passages import passages
from tw_jax.sample_world.build import truth_file, wikipedia_dump

PAIRS = ("0809", "0910", "1011")


def _cli(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="tw-jax")
    evolvingqa_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _articles(root: Path, month: str) -> dict[int, tuple[str, list[str]]]:
    """id → (title, paragraphs as the DiffSet stage writes them) from the ground truth."""
    return {r["id"]: (r["title"], [" ".join(p) for p in r["paragraphs"]])
            for r in _jsonl(truth_file(root, "articles", month))}


def _changed_set(old: dict, new: dict, min_chars: int) -> dict[int, str]:
    """Algorithm 1 with EvolvingQA's filter, on the truth: id → kind."""
    kinds = {}
    for pid, (_, paragraphs) in new.items():
        if pid not in old:
            kept, kind = paragraphs, "new"
        else:
            before = {s for p in old[pid][1] for s in _sentences(p)}
            kept = []
            for paragraph in paragraphs:
                added = [s for s in _sentences(paragraph) if s not in before]
                if added:
                    kept.append(paragraph if len(added) == len(_sentences(paragraph))
                                else " ".join(added))
            kind = "changed"
        if kept and sum(map(len, kept)) + len(kept) - 1 >= min_chars:
            kinds[pid] = kind
    return kinds


def _sentences(paragraph: str) -> list[str]:
    from tw_jax.preprocess.plaintext.sentences import split_sentences

    return split_sentences(paragraph)


@pytest.fixture(scope="module")
def built(sample_world, tmp_path_factory):
    root, world = sample_world
    out = tmp_path_factory.mktemp("evolvingqa")
    dumps = [wikipedia_dump(root, month) for month in world["months"]]
    return root, world, out, build_evolvingqa(dumps, out)


def test_changed_sets_match_the_truth_with_the_papers_500_characters(built):
    root, world, out, summary = built
    months = world["months"]
    assert summary["months"] == months and list(summary["pairs"]) == list(PAIRS)
    for pair, old_month, new_month in zip(PAIRS, months, months[1:], strict=False):
        expected = _changed_set(_articles(root, old_month), _articles(root, new_month), 500)
        got = {r["id"]: r["kind"] for r in _jsonl(out / pair / "diffset" / "diffset.jsonl")}
        assert got == expected
        stats = json.loads((out / pair / "diffset" / "stats.json").read_text())
        assert stats["options"]["min_changed_chars"] == 500
        figures = summary["pairs"][pair]
        assert figures["changed_set"] == {
            "new": sum(k == "new" for k in expected.values()),
            "changed": sum(k == "changed" for k in expected.values())}
        ssm = json.loads((out / pair / "ssm" / "stats.json").read_text())
        assert ssm["inputs"] == ["diffset"] and ssm["examples"] == figures["ssm_examples"] > 0
        assert list((out / pair / "ssm").glob("diffset.tfrecord-*"))
        # New passages: the Changed-set text, chunked; nothing Edited at 500 characters here.
        new = _jsonl(out / pair / "evolvingqa" / "new.jsonl")
        assert {r["article_id"] for r in new} == set(expected)
        assert all(r["entities"] and r["pair"] == pair and r["month"] == new_month for r in new)
        assert _jsonl(out / pair / "evolvingqa" / "edited.jsonl") == []
    # The sample world's prose edits are all shorter than 500 characters.
    assert [summary["pairs"][p]["changed_set"] for p in PAIRS] == [
        {"new": 5, "changed": 0}, {"new": 4, "changed": 0}, {"new": 4, "changed": 0}]
    assert (out / "evolvingqa" / "build.json").exists()


def test_unchanged_articles_are_those_the_same_in_every_snapshot(built):
    root, world, out, summary = built
    snapshots = [_articles(root, m) for m in world["months"]]
    expected = {pid for pid, article in snapshots[0].items()
                if all(s.get(pid, (None, None))[1] == article[1] for s in snapshots[1:])}
    records = _jsonl(out / "evolvingqa" / "unchanged.jsonl")
    assert {r["article_id"] for r in records} == expected and len(expected) == 110
    assert summary["unchanged"]["selected_articles"] == summary["unchanged"]["passages"] == 110
    for record in records:  # one passage per article: its first chunk of whole sentences
        title, paragraphs = snapshots[0][record["article_id"]]
        assert record["title"] == title and record["month"] == "2021-08"
        assert record["text"] == passages("\n".join(paragraphs), 200)[0]
        assert record["entities"] and all(e["text"] in record["text"] for e in record["entities"])


def test_edited_pairs_below_the_filter_through_the_cli(sample_world, tmp_path, capsys):
    root, _ = sample_world
    old, new = _articles(root, "2021-08"), _articles(root, "2021-09")
    dumps = [str(wikipedia_dump(root, m)) for m in ("2021-08", "2021-09")]
    code = _cli(["evolvingqa", "build", "--dumps", *dumps, "--out", str(tmp_path / "b"),
                 "--min-changed-chars", "0", "--unchanged-articles", "20"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "0809: Changed set 6 new + 29 changed articles (0 below 0 chars)" in printed
    assert "14 Edited pairs" in printed and "Unchanged over 2021-08..2021-09: 20 articles" in printed
    edited = _jsonl(tmp_path / "b" / "0809" / "evolvingqa" / "edited.jsonl")
    assert [r["title"] for r in edited] == [
        "Monan Kreivstad", "Wiro Derncroft", "Grol Textiles", "Luar Treimvik",
        "Zurn Textiles Group", "Groris Funley", "Granette Naunsberg", "L. J. Kulric",
        "Veistdale Rovers", "Buel Vosling", "Kreno Londstad", "Stano Wevton", "Real Graltport",
        "Mustminster Athletic"]
    ceo = edited[2]
    assert (ceo["old_text"], ceo["new_text"]) == (
        "Its chief executive officer is L. J. Kulric.",
        "Its chief executive officer is Granette Naunsberg.")
    assert ceo["old_entities"] == [{"text": "L. J. Kulric", "label": "PERSON"}]
    assert (ceo["old_month"], ceo["new_month"]) == ("2021-08", "2021-09")
    new_sentences = set()
    for record in edited:  # the old side is old text gone from the article, the new side new
        article_old = {s for p in old[record["article_id"]][1] for s in _sentences(p)}
        article_new = {s for p in new[record["article_id"]][1] for s in _sentences(p)}
        assert set(_sentences(record["old_text"])) <= article_old
        assert set(_sentences(record["new_text"])) <= article_new
        assert not set(_sentences(record["new_text"])) <= article_old
        new_sentences |= set(_sentences(record["new_text"])) - article_old
    passages_text = " ".join(r["text"] for r in _jsonl(tmp_path / "b" / "0809" / "evolvingqa"
                                                       / "new.jsonl"))
    assert not any(s in passages_text for s in new_sentences)  # updates are not New knowledge
    assert "Bordling and Meel Dreirdstad married on 24 August 2021." in passages_text
    assert len(_jsonl(tmp_path / "b" / "evolvingqa" / "unchanged.jsonl")) == 20


def test_bad_input_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:  # the path type's one-line argparse error
        evolvingqa_cli.main(["evolvingqa", "build", "--dumps", str(tmp_path / "nope.xml"),
                             str(tmp_path / "nope2.xml"), "--out", str(tmp_path)])
    assert stopped.value.code == 2
    assert "nope.xml: no such file" in capsys.readouterr().err
    dump = tmp_path / "enwiki-20210801-pages-articles.xml"
    dump.write_text("<mediawiki></mediawiki>")
    assert _cli(["evolvingqa", "build", "--dumps", str(dump), "--out", str(tmp_path / "o")]) == 2
    assert "at least two snapshots" in capsys.readouterr().err
