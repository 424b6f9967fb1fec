"""The quality figures of rendered text: leftover markup and abbreviation splits, exact counts."""

from __future__ import annotations

from tw_jax.preprocess.plaintext.audit import (
    abbreviation_splits,
    leftover_markup,
    per_thousand_words,
)


def test_leftover_markup_counts_each_kind():
    texts = [
        "A [[link]] and {{template}} with a | pipe.",
        "''italic'' == heading == <ref name=x>r</ref> <br/> <!-- c --> &nbsp; &#91;",
        "Prose comparisons n > 3 and x < y are text, as is a single ' apostrophe.",
    ]
    assert dict(leftover_markup(texts)) == {
        "[[": 1,
        "]]": 1,
        "{{": 1,
        "}}": 1,
        "|": 1,
        "''": 2,
        "==": 2,
        "<tag>": 3,
        "<!--": 1,
        "-->": 1,
        "&entity;": 2,
    }
    assert leftover_markup(["Clean prose."]) == {}


def test_abbreviation_splits_name_the_boundary():
    sentences = [
        "He served Bvt.",
        "Brig. Gen. Henry Atkinson.",
        "See Chaubey et al.",
        "(2010) for more, and J.",
        "R. Smith in Jan.",
        "5 and vol.",
        "II.",
        "The answer was no.",
        "Then it was Jan.",
        "Quiet.",
    ]
    assert abbreviation_splits(sentences) == [
        ("He served Bvt.", "Brig. Gen. Henry Atkinson."),
        ("See Chaubey et al.", "(2010) for more, and J."),
        ("(2010) for more, and J.", "R. Smith in Jan."),
        ("R. Smith in Jan.", "5 and vol."),
        ("5 and vol.", "II."),
    ]
    assert abbreviation_splits(["One."]) == []


def test_per_thousand_words():
    assert per_thousand_words(3, 442_609) == 3000 / 442_609
    assert per_thousand_words(5, 0) == 0.0
