"""split_sentences leaves an already normalised paragraph as it is (no new string) and
normalises any other, with the same sentences either way: every character that ``str.split()``
splits on, but the space, is unprintable, which is what lets a printable paragraph skip the
``split``/``join``."""

from __future__ import annotations

import sys

import pytest

from tw_jax.preprocess.plaintext.sentences import split_sentences


def test_every_whitespace_character_but_the_space_is_unprintable():
    whitespace = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    assert len(whitespace) == 29
    assert [c for c in whitespace if c.isprintable()] == [" "]


@pytest.mark.parametrize(
    "paragraph",
    [
        "It rained.\tThen it snowed!  Did it stop?\u00a0Yes.",
        "  Dr. Smith came.\nHe left. ",
        "A\u2028B. C\u3000D. E\x85F.",
        "One. Two.",
    ],
)
def test_unnormalised_paragraphs_split_as_their_normalised_form(paragraph):
    normalised = " ".join(paragraph.split())
    assert split_sentences(paragraph) == split_sentences(normalised)
    assert " ".join(split_sentences(paragraph)) == normalised


def test_a_normalised_paragraph_is_cut_without_copying():
    paragraph = "Only one sentence, already normalised"
    (sentence,) = split_sentences(paragraph)
    assert sentence is paragraph  # not a copy made by " ".join(paragraph.split())
    (sentence,) = split_sentences(paragraph + " ")
    assert sentence == paragraph and sentence is not paragraph


def test_empty_and_blank_paragraphs_have_no_sentences():
    assert split_sentences("") == []
    assert split_sentences(" \t\n\u00a0") == []
