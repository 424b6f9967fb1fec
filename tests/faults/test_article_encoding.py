"""Invalid UTF-8 inside one article costs that article, not the run: ``tw-jax diffset`` skips
it, counted as ``bad_utf8`` with its page id and title, and writes the others (XML plain or
bz2, WikiExtractor JSON lines, local and Beam)."""

import bz2
import json

import pytest

from tw_jax.cli import main

EXPORT = '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">\n' \
         "<siteinfo><sitename>Wikipedia</sitename></siteinfo>\n{}</mediawiki>\n"
PAGE = ("<page>\n<title>{title}</title>\n<ns>0</ns>\n<id>{id}</id>\n<revision><id>9</id>\n"
        '<text xml:space="preserve">{text}</text>\n</revision>\n</page>\n')
ARTICLES = [(1, "Alpha", "Alpha is the first letter of the alphabet."),
            (2, "Broken", "This text holds BAD bytes in the middle."),
            (3, "Gamma", "Gamma is the third letter, after beta.")]
BAD = b"\xff\xfe"


def xml_dump(tmp_path, name):
    text = EXPORT.format("".join(PAGE.format(id=i, title=t, text=x) for i, t, x in ARTICLES))
    data = text.encode().replace(b"BAD", BAD)
    path = tmp_path / name
    path.write_bytes(bz2.compress(data) if name.endswith(".bz2") else data)
    return path, f"{path}:11 page id=2 'Broken'"  # the line of its <page>


def jsonl_dump(tmp_path, name):
    lines = [json.dumps({"id": str(i), "url": f"u{i}", "title": t, "text": f"{t}\n{x}"}).encode()
             for i, t, x in ARTICLES]
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines).replace(b"BAD", BAD) + b"\n")
    return path, f"{path}:2 page id=2 'Broken'"


def _run(argv, capsys):
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _check(out, example):
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["new_dump"]["pages"] == 3
    assert stats["new_dump"]["skipped"] == {"by_reason": {"bad_utf8": 1},
                                            "examples": {"bad_utf8": [example]}}
    assert stats["accounting"]["balanced"] is True
    for name in ("full", "diffset"):
        records = [json.loads(line) for line in
                   (out / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
        assert sorted((r["id"], r["title"]) for r in records) == [(1, "Alpha"), (3, "Gamma")]


@pytest.mark.parametrize("name,make", [("enwiki.xml", xml_dump), ("enwiki.xml.bz2", xml_dump),
                                       ("wiki_00.jsonl", jsonl_dump)])
def test_one_article_with_invalid_utf8_is_a_counted_skip(tmp_path, capsys, name, make):
    dump, example = make(tmp_path, name)
    out = tmp_path / "diffset"
    summary = _run(["diffset", "--new", str(dump), "--out", str(out)], capsys)
    assert summary["articles"]["new"] == 2
    _check(out, example)


def test_the_old_dump_and_the_beam_runner_skip_it_the_same_way(tmp_path, capsys):
    pytest.importorskip("apache_beam")
    old = tmp_path / "old"
    old.mkdir()
    old_dump, example = xml_dump(old, "enwiki.xml")
    new_dump, _ = xml_dump(tmp_path, "enwiki.xml")
    for runner in ("local", "beam"):
        out = tmp_path / runner
        _run(["diffset", "--old", str(old_dump), "--new", str(new_dump), "--out", str(out),
              "--runner", runner], capsys)
        stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
        assert stats["old_dump"]["skipped"] == {"by_reason": {"bad_utf8": 1},
                                                "examples": {"bad_utf8": [example]}}
        assert stats["articles"]["unchanged"] == 2
