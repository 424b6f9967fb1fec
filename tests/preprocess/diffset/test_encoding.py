"""What the local DiffSet stage writes for an article, made without the general encoders
(outputs.encode_records) and counted without splitting (stats.summarize), is what the general
encoders and a split give: the JSON line of json_line, the tf.train.Example of encode_example,
the token count of str.split."""

from __future__ import annotations

import pytest

from tw_jax.io.tfrecord import encode_example
from tw_jax.preprocess.diffset.algorithm import (
    CHANGED,
    EMPTY,
    NEW,
    UNCHANGED,
    ArticleDiff,
    compare,
)
from tw_jax.preprocess.diffset.outputs import encode_records, json_line, records_for
from tw_jax.preprocess.diffset.stats import summarize
from tw_jax.preprocess.dumps.mediawiki import Page

TEXTS = ["", "a", "x" * 127, "y" * 128, "\u00e9" * 70, "z" * 16383, "w" * 16384, "q" * 2_100_000,
         'quote " backslash \\ newline \n tab \t control \x01 \u2028 \U0001f600']


def general(result: ArticleDiff) -> list[tuple[str, bytes, bytes]]:
    return [(name, (json_line(record) + "\n").encode("utf-8"), encode_example(record))
            for name, record in records_for(result)]


@pytest.mark.parametrize("page_id", [0, 1, 127, 128, 2**31, 2**63 - 1, -1, -(2**63)])
@pytest.mark.parametrize("kind", [NEW, CHANGED, UNCHANGED, EMPTY])
def test_records_are_the_general_encoders_bytes(page_id, kind):
    for text in TEXTS:
        paragraphs = tuple(text.split("\n"))
        result = ArticleDiff(page_id, f"T\u00e9 {text[:40]}", kind, paragraphs,
                             paragraphs[:1] if kind in (NEW, CHANGED) else (), 1, True)
        assert encode_records(result) == general(result)


def test_an_unchanged_article_is_one_record_written_twice():
    result = ArticleDiff(5, "T", UNCHANGED, ("a b",), (), 0, True)
    (full, line, example), (unchanged, line2, example2) = encode_records(result)
    assert (full, unchanged) == ("full", "unchanged")
    assert line is line2 and example is example2
    assert line == b'{"id":5,"title":"T","text":"a b"}\n'


WIKITEXT = [
    "Plain words here.\n\nA second\tparagraph with\u00a0no-break\u2003em spaces.",
    "* item one\n* item\u3000two\n\n== Heading ==\nText [[link|label]] {{lang|fr|mot}}.",
    "Soft\u00adhyphen and zero\u200bwidth and \u2028 line separator \x85 next line.",
    "'''Bold''' ''italic'' <ref>gone</ref> &nbsp;entity&nbsp; and &amp; sign.",
    "{{Infobox x|a=1}}\nOnly this.",
]


@pytest.mark.parametrize("new_text", WIKITEXT)
def test_token_counts_are_those_of_split(new_text):
    old = Page(1, 0, "T", "Something else entirely. Another sentence here.", None)
    for result in (compare(Page(1, 0, "T", new_text, None), None),
                   compare(Page(1, 0, "T", new_text, None), old),
                   compare(Page(2, 0, "W", "x\n" + new_text, None, "plain"), None)):
        summary = summarize(result)
        for sizes, paragraphs in ((summary.full, result.paragraphs),
                                  (summary.diff, result.diff_paragraphs)):
            joined = " ".join(paragraphs)
            assert sizes == (len(paragraphs), len(joined.split()), len(joined))
