"""split_sentences: the Sentences rules of docs/plaintext.md, with exact expected lists."""

from __future__ import annotations

import pytest

from tw_jax.preprocess.plaintext import sentences
from tw_jax.preprocess.plaintext.sentences import ABBREVIATIONS, split_sentences


def test_basic_terminators():
    assert split_sentences("It rained. Then it snowed! Did it stop? Yes.") == [
        "It rained.",
        "Then it snowed!",
        "Did it stop?",
        "Yes.",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Dr. Smith lives on St. James Street.",
        "Acme Inc. Makes anvils.",
        "He was No. 1 in the U.S. Army for years.",
        "She met Mr. Brown and Mrs. Green at 9 a.m. Sharp.",
        "Built c. 1500 by Gen. Lee, e.g. Near here, etc. Fine.",
        "Brown Bros. Company and Smith vs. Jones in Jan. Or Feb. Ok.",
        "Born in the U.K. During the war.",
    ],
)
def test_abbreviations_do_not_end_sentences(text):
    assert split_sentences(text) == [text]


def test_may_is_not_an_abbreviation():
    assert split_sentences("It happened in May. June was quiet.") == [
        "It happened in May.",
        "June was quiet.",
    ]


def test_initials():
    assert split_sentences("The author J. R. R. Tolkien wrote it. George R.R. Martin did not.") == [
        "The author J. R. R. Tolkien wrote it.",
        "George R.R. Martin did not.",
    ]


def test_decimals_and_thousands_do_not_split():
    assert split_sentences(
        "It is 3.5 km long and cost 1,250,000 dollars in version 2.0. Done."
    ) == ["It is 3.5 km long and cost 1,250,000 dollars in version 2.0.", "Done."]


def test_sentence_starting_with_a_digit():
    assert split_sentences("The war ended in 1945. 1946 was calmer.") == [
        "The war ended in 1945.",
        "1946 was calmer.",
    ]


def test_closing_quotes_and_brackets_stay_with_the_sentence():
    text = 'He said "Stop." Then he left. (It was late.) "Why?" she asked! [Citation.] Next.'
    assert split_sentences(text) == [
        'He said "Stop."',
        "Then he left.",
        "(It was late.)",
        '"Why?" she asked!',
        "[Citation.]",
        "Next.",
    ]
    assert split_sentences("He wrote \u201cHello.\u201d \u2018Fine\u2019 it was.") == [
        "He wrote \u201cHello.\u201d",
        "\u2018Fine\u2019 it was.",
    ]


def test_no_split_before_lowercase_or_without_space():
    assert split_sentences("See the map. it is wrong.") == ["See the map. it is wrong."]
    assert split_sentences("Visit example.com.Today.") == ["Visit example.com.Today."]
    assert split_sentences("Ends with é. école suivante.") == ["Ends with é. école suivante."]


def test_non_ascii_capital_starts_a_sentence():
    assert split_sentences("Il pleut. Élise rentre.") == ["Il pleut.", "Élise rentre."]


def test_ellipsis_and_mixed_marks():
    assert split_sentences("Wait... What?! No way.") == ["Wait...", "What?!", "No way."]


def test_whitespace_is_normalised_and_join_gives_back_the_paragraph():
    text = "  First  one.\n\tSecond\u00a0one!   Third. "
    result = split_sentences(text)
    assert result == ["First one.", "Second one!", "Third."]
    assert " ".join(result) == " ".join(text.split())
    assert split_sentences("") == []
    assert split_sentences(" \n ") == []
    assert split_sentences("No terminator") == ["No terminator"]


def test_abbreviations_can_be_extended(monkeypatch):
    text = "See Tab. 3 for details."
    assert split_sentences(text) == ["See Tab.", "3 for details."]
    assert split_sentences(text, abbreviations=ABBREVIATIONS | {"Tab."}) == [text]
    monkeypatch.setattr(sentences, "ABBREVIATIONS", ABBREVIATIONS | {"Tab."})
    assert split_sentences(text) == [text]


def test_abbreviation_inside_brackets():
    assert split_sentences("The church (c. 1200) stands. It is old.") == [
        "The church (c. 1200) stands.",
        "It is old.",
    ]


@pytest.mark.parametrize(
    "text",
    [
        # ranks and titles before a name (real English Wikipedia sentences)
        "Bvt. Brig. Gen. Henry Atkinson led the army.",
        "Maj. Gen. Leonidas Polk and Adm. Nelson met Cpl. Smith, Pvt. Jones and Lt. Col. Brown.",
        "Sen. Smith, Rep. Jones, Gov. Brown, Rev. King, Prof. Lee, Dr. Who and Capt. Kirk came.",
        # citations written in prose
        "See Vol. 1 Dover edition, vol. II and Vols. III.",
        "The source is Smith 2015 p. 22 and pp. 30–31.",
        "This is old but cf. Lewis 2004 for more.",
        "The sheep (Ch. IX) and ch. X agree.",
        "As shown in Fig. 3 and fig. 4 (Figs. 5) it works.",
        "The Oxford 2nd ed. London edition and eds. Smith and Jones.",
        "Called soroban (lit. Counting tray) in Japan.",
        "In Brown v. Board of Education the court ruled.",
        # the conditional ones: before a number or a bracket
        "Chaubey et al. (2010) found it and Smith et al. 2011 agreed.",
        "It was no. 5 on the list.",
        # initials and months before a number
        "J. R. R. Tolkien wrote it on Jan. 3 and Feb. 12.",
    ],
)
def test_real_world_abbreviations_do_not_end_sentences(text):
    assert split_sentences(text) == [text]


def test_conditional_abbreviations_end_sentences_before_a_capital():
    assert split_sentences("The answer was no. Then he left.") == [
        "The answer was no.",
        "Then he left.",
    ]
    assert split_sentences("It was found by Smith et al. The result held.") == [
        "It was found by Smith et al.",
        "The result held.",
    ]
    assert split_sentences("Smith et al. (2010) and no. (5) here.") == [
        "Smith et al. (2010) and no. (5) here."
    ]
