"""WikiExtractor JSON-lines reader: good lines become pages, bad lines are counted by reason."""

from __future__ import annotations

import bz2
import gzip
import json

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.mediawiki import Page
from tw_jax.preprocess.dumps.wikiextractor import iter_pages
from tw_jax.preprocess.dumps.wikipedia import (
    iter_articles,
    iter_dump_pages,
    paragraphs_of,
    sniff_format,
)
from tw_jax.preprocess.runners.accounting import Skips


def line(page_id: object, title: str, text: str, **extra: object) -> bytes:
    record = {
        "id": page_id,
        "url": f"https://en.wikipedia.org/wiki?curid={page_id}",
        "title": title,
        "text": text,
        **extra,
    }
    return json.dumps(record).encode() + b"\n"


GOOD = [
    line("12", "Anarchism", "Anarchism\n\nAnarchism is a political philosophy.\nIt is old."),
    line("25", "Autism", "Autism is a condition.", revid="1"),
    line(39, "Albedo", "Albedo is \u2018whiteness\u2019."),
]
EXPECTED = [
    Page(
        12,
        0,
        "Anarchism",
        "Anarchism\n\nAnarchism is a political philosophy.\nIt is old.",
        None,
        "plain",
    ),
    Page(25, 0, "Autism", "Autism is a condition.", None, "plain"),
    Page(39, 0, "Albedo", "Albedo is \u2018whiteness\u2019.", None, "plain"),
]


@pytest.mark.parametrize("kind", ["plain", "bz2", "gzip"])
def test_reads_every_container(tmp_path, kind):
    data = b"".join(GOOD)
    if kind == "bz2":
        data = bz2.compress(data)
    elif kind == "gzip":
        data = gzip.compress(data)
    path = tmp_path / "wiki_00"
    path.write_bytes(data)
    skips = Skips()
    assert list(iter_pages(path, skips)) == EXPECTED
    assert skips.total == 0
    assert sniff_format(path) == "jsonl"
    assert list(iter_dump_pages(path, Skips())) == EXPECTED


def test_bad_lines_are_skipped_by_reason_with_file_and_line(tmp_path):
    lines = [
        GOOD[0],  # 1
        b'{"id": "13", "title": "Cut", "te\n',  # 2 bad_json
        b"\n",  # 3 blank: not a record
        line("14", "Caf\u00e9", "x").replace(b"Caf\\u00e9", b"Caf\xe9"),  # 4 bad_utf8
        b'{"id": "15", "url": "u", "title": "No text"}\n',  # 5 missing_field
        line("16a", "Letters", "x"),  # 6 bad_id
        line(1.5, "Float", "x"),  # 7 bad_id
        line(True, "Bool", "x"),  # 8 bad_id
        line("-3", "Negative", "x"),  # 9 bad_id
        line("17", "Listy", ["not", "text"]),  # 10 bad_field
        b"[1, 2, 3]\n",  # 11 bad_json (not an object)
        b'{"id": "18", "url": "u", "title": "Lone", "text": "\\ud800 x"}\n',  # 12 bad_utf8
        GOOD[1],  # 13
    ]
    path = tmp_path / "wiki_01.bz2"
    path.write_bytes(bz2.compress(b"".join(lines)))
    skips = Skips()
    pages = list(iter_pages(path, skips))
    assert [p.id for p in pages] == [12, 25]
    assert dict(skips.counts) == {
        "bad_json": 2,
        "bad_utf8": 2,
        "missing_field": 1,
        "bad_id": 4,
        "bad_field": 1,
    }
    assert skips.examples == {
        "bad_json": [f"{path}:2", f"{path}:11"],
        # id and title as far as they can be read: the bad byte shows as U+FFFD
        "bad_utf8": [f"{path}:4 page id=14 'Caf\ufffd'", f"{path}:12 page id=18 'Lone'"],
        "missing_field": [f"{path}:5"],
        "bad_id": [f"{path}:6", f"{path}:7", f"{path}:8", f"{path}:9"],
        "bad_field": [f"{path}:10"],
    }


def test_truncated_archive_names_file_and_last_line(tmp_path):
    body = b"".join(line(str(i), f"T{i}", "text " * 50) for i in range(1, 200))
    blob = bz2.compress(body[:5000]) + bz2.compress(body[5000:])[:-40]
    path = tmp_path / "wiki_02.bz2"
    path.write_bytes(blob)
    seen = []
    with pytest.raises(DumpError) as info:
        for page in iter_pages(path, Skips()):
            seen.append(page.id)
    assert seen == list(range(1, len(seen) + 1)) and seen
    assert info.value.path == str(path)
    assert info.value.record.endswith(f"after line {len(seen)}")
    assert info.value.message.startswith("truncated bz2 archive")


def test_plain_paragraphs_are_lines():
    page = Page(
        1, 0, "Anarchism", "Anarchism\n\nFirst  para\twith   space.\n \nSecond.\n", None, "plain"
    )
    assert paragraphs_of(page) == ["First para with space.", "Second."]
    # a first line that is not the title is a paragraph
    page = Page(2, 0, "Other", "Lead line.\nNext line.", None, "plain")
    assert paragraphs_of(page) == ["Lead line.", "Next line."]


def test_articles_filter_applies_to_jsonl(tmp_path):
    data = GOOD[0] + GOOD[0] + line("40", "Empty", "   ") + line("41", "R", "#REDIRECT [[X]]")
    path = tmp_path / "wiki.jsonl"
    path.write_bytes(data)
    skips = Skips()
    articles = list(iter_articles(iter_dump_pages(path, skips), skips))
    assert [a.id for a in articles] == [12]
    assert dict(skips.counts) == {"duplicate_id": 1, "missing_text": 1, "redirect": 1}
