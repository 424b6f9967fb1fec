"""ECBD builder rules one at a time: origination dates, years, mentions, quotes, random spans."""

from __future__ import annotations

import random

import pytest

from tw_jax.preprocess.dumps.wikidata import Claim, Entity
from tw_jax.preprocess.ecbd.entities import origination, parse_years
from tw_jax.preprocess.ecbd.sentences import (
    candidate_sentences,
    entity_names,
    find_mention,
    word_count,
)
from tw_jax.preprocess.ecbd.spans import RANDOM, mask, random_spans
from tw_jax.preprocess.runners.accounting import Skips


def _entity(*claims: Claim) -> Entity:
    return Entity("Q1", "item", "Thing", (), "Thing", None, claims)


def _time(prop: str, time: str, precision: int = 11) -> Claim:
    return Claim(prop, "time", ("time", time, precision))


def test_origination_takes_the_first_property_in_order_then_its_earliest_value():
    entity = _entity(
        _time("P571", "+2015-01-01T00:00:00Z"),
        _time("P580", "+2019-05-05T00:00:00Z"),
        _time("P580", "+2018-03-01T00:00:00Z"),
        Claim("P31", "wikibase-item", ("item", "Q5")),
    )
    assert origination(entity) == ("P580", "+2018-03-01T00:00:00Z", 11, 2018)
    assert origination(_entity(_time("P9448", "+2021-00-00T00:00:00Z", 9),
                               _time("P6949", "+2020-02-00T00:00:00Z", 10))) == (
        "P6949", "+2020-02-00T00:00:00Z", 10, 2020)
    assert origination(_entity(Claim("P569", "time", ("time", "+1990-01-01T00:00:00Z", 11)))) is None


def test_dates_coarser_than_a_year_are_skipped_and_counted():
    skips = Skips()
    entity = _entity(_time("P580", "+2000-00-00T00:00:00Z", 8), _time("P571", "-0500-00-00T00:00:00Z", 9))
    assert origination(entity, skips) == ("P571", "-0500-00-00T00:00:00Z", 9, -500)
    assert skips.counts == {"imprecise_date": 1}


def test_parse_years():
    assert parse_years("2017-2021") == (2017, 2021)
    assert parse_years(" 2019 ") == (2019, 2019)
    assert parse_years("all") is None and parse_years(None) is None
    for bad in ("2021-2017", "next year", "2017-"):
        with pytest.raises(ValueError, match="years"):
            parse_years(bad)


def test_names_drop_disambiguation_and_repeat_once():
    assert entity_names("Hurricane Ida", ["Hurricane Ida (2021)", None], ["Ida", "Hurricane Ida"]) == [
        "Hurricane Ida", "Ida"]


def test_mentions_are_on_word_boundaries_case_sensitive_and_outside_quotes():
    names = ["Ida", "Hurricane Ida"]
    mention, found, reason = find_mention("Idaho saw Hurricane Ida and then Ida again.", names)
    assert reason is None and mention == (10, 23)  # the longest name starting first
    assert found == [(10, 23), (20, 23), (33, 36)]
    assert find_mention("The river Idaho flows, ida too.", names)[2] == "no_mention"
    text = 'The song "Ida" topped the charts before “Ida” did.'
    assert find_mention(text, names)[2] == "mention_in_quotes"
    mention, _, _ = find_mention('The song "Ida" was about Ida and the coast.', names)
    assert mention == (25, 28)
    # Names ending in punctuation still end on a boundary.
    assert find_mention("Steil Textiles Inc. opened a plant.", ["Steil Textiles Inc."])[0] == (0, 19)


def test_candidate_sentences_skip_the_definition_short_sentences_and_quoted_mentions():
    paragraphs = [
        "Ida is a storm. Ida formed in the Gulf of Mexico in August.",
        "Ida made landfall in Louisiana on 29 August. Ida struck hard.",
        'Forecasters called it "the Ida event" for weeks. Later Ida weakened over land quickly.',
    ]
    skips = Skips()
    found = candidate_sentences(paragraphs, ["Ida"], skips, "Q1")
    assert [(c.paragraph, c.sentence, c.mention_text) for c in found] == [
        (1, 0, "Ida"), (2, 1, "Ida")]
    assert found[1].text == "Later Ida weakened over land quickly." and found[1].mention == (6, 9)
    assert skips.counts == {"short_sentence": 1, "mention_in_quotes": 1}
    assert word_count(paragraphs) == 12 + 11 + 15


def test_random_spans_start_after_the_mention_within_the_distance():
    import spacy

    nlp = spacy.blank("en")
    paragraphs = ["Intro.", "One two three four five Ida six seven eight nine ten eleven twelve "
                  "thirteen fourteen fifteen sixteen seventeen, eighteen."]
    (candidate,) = candidate_sentences(paragraphs, ["Ida"], Skips(), "Q1")
    doc = nlp(candidate.text)
    seen = set()
    for seed in range(40):
        spans = random_spans(doc, candidate, random.Random(seed), max_distance=10, count=5)
        assert 1 <= len(spans) <= 5 and len({(s.start, s.end) for s in spans}) == len(spans)
        for span in spans:
            assert span.span_type == RANDOM and 1 <= span.end - span.start <= 5
            assert 6 <= span.start <= 6 + 10  # "Ida" is token 5; at most 10 tokens after it
            assert not doc[span.start].is_punct and not doc[span.end - 1].is_punct
            masked, answer = mask(candidate.text, span)
            assert masked.replace("<extra_id_0>", span.text) == candidate.text
            assert answer == f"<extra_id_0> {span.text} <extra_id_1>"
            seen.add(span.start)
    assert seen == set(range(6, 17))  # every allowed start is drawn at some seed
    again = random_spans(doc, candidate, random.Random(3))
    assert again == random_spans(doc, candidate, random.Random(3))


def test_random_spans_never_cover_another_mention():
    import spacy

    nlp = spacy.blank("en")
    paragraphs = ["Intro.", "Ida met Ida and Ida again today."]
    (candidate,) = candidate_sentences(paragraphs, ["Ida"], Skips(), "Q1")
    doc = nlp(candidate.text)
    for seed in range(20):
        for span in random_spans(doc, candidate, random.Random(seed)):
            assert "Ida" not in span.text
