"""Sentinel masking, its inverse, span selection and chunking: exact values, no spaCy needed."""

import pytest

from tw_jax.preprocess.ssm.chunks import chunk_spans
from tw_jax.preprocess.ssm.masking import (
    MAX_SPANS,
    Span,
    choose_spans,
    mask,
    restore,
    target_spans,
    unmask,
)

CHUNK = "Cien Bordling was born in Trurhollow on 12 September 1985."


def span_of(text: str, label: str) -> Span:
    start = CHUNK.index(text)
    return Span(start, start + len(text), label)


PERSON = span_of("Cien Bordling", "PERSON")
GPE = span_of("Trurhollow", "GPE")
DATE = span_of("12 September 1985", "DATE")


def test_mask_uses_t5_sentinels_in_text_order():
    inputs, targets = mask(CHUNK, [DATE, PERSON])  # any order in, text order out
    assert inputs == "<extra_id_0> was born in Trurhollow on <extra_id_1>."
    assert targets == "<extra_id_0> Cien Bordling <extra_id_1> 12 September 1985 <extra_id_2>"


def test_one_span_example():
    inputs, targets = mask(CHUNK, [GPE])
    assert inputs == "Cien Bordling was born in <extra_id_0> on 12 September 1985."
    assert targets == "<extra_id_0> Trurhollow <extra_id_1>"


def test_restore_gives_back_the_chunk_and_span_offsets():
    inputs, targets = mask(CHUNK, [PERSON, GPE, DATE])
    chunk, offsets = restore(inputs, targets)
    assert chunk == CHUNK
    assert offsets == [(s.start, s.end) for s in (PERSON, GPE, DATE)]
    assert target_spans(targets) == ["Cien Bordling", "Trurhollow", "12 September 1985"]
    assert unmask(inputs, targets) == CHUNK


def test_spans_with_inner_newlines_and_spaces_round_trip():
    chunk = "Born in New\nYork  City, in  May 2001.\nThen   left."
    spans = []
    for text, label in (("New\nYork  City", "GPE"), ("May 2001", "DATE")):
        start = chunk.index(text)
        spans.append(Span(start, start + len(text), label))
    inputs, targets = mask(chunk, spans)
    assert inputs == "Born in <extra_id_0>, in  <extra_id_1>.\nThen   left."
    assert targets == "<extra_id_0> New\nYork  City <extra_id_1> May 2001 <extra_id_2>"
    assert unmask(inputs, targets) == chunk


@pytest.mark.parametrize(
    "spans",
    [
        [],
        [Span(0, 13, "PERSON"), Span(5, 20, "ORG")],  # overlap
        [Span(3, 3, "PERSON")],  # empty
        [Span(170, 999, "DATE")],  # past the end of the chunk
        [Span(i, i + 1, "X") for i in range(MAX_SPANS + 1)],  # more than the sentinels allow
    ],
)
def test_mask_rejects_impossible_spans(spans):
    with pytest.raises(ValueError):
        mask(CHUNK * 3, spans)


@pytest.mark.parametrize(
    "targets",
    [
        "<extra_id_1> Trurhollow <extra_id_2>",  # does not start at 0
        "Trurhollow <extra_id_0>",  # text before the first sentinel
        "<extra_id_0> Trurhollow",  # no closing sentinel
        "<extra_id_0> Trurhollow <extra_id_1> extra",  # text after the closing sentinel
        "<extra_id_0>Trurhollow<extra_id_1>",  # no separating spaces
        "",
    ],
)
def test_malformed_targets_are_rejected(targets):
    with pytest.raises(ValueError):
        target_spans(targets)


def test_inputs_must_hold_the_targets_sentinels():
    with pytest.raises(ValueError):
        restore("no sentinel here", "<extra_id_0> x <extra_id_1>")


def test_choose_spans_is_seeded_by_key():
    spans = [Span(i * 10, i * 10 + 5, "DATE") for i in range(8)]
    first = choose_spans(spans, per_example=1, examples=1, key="0/11119/0")
    assert first == choose_spans(spans, per_example=1, examples=1, key="0/11119/0")
    chosen = {
        choose_spans(spans, per_example=1, examples=1, key=f"0/{i}/0")[0][0] for i in range(40)
    }
    assert len(chosen) > 4  # different articles mask different spans


def test_choose_spans_partitions_all_spans_when_examples_is_zero():
    spans = [Span(i * 10, i * 10 + 5, "PERSON") for i in range(5)]
    groups = choose_spans(spans, per_example=2, examples=0, key="7/1/3")
    assert [len(g) for g in groups] == [2, 2, 1]
    assert sorted(s for g in groups for s in g) == spans
    assert all(g == sorted(g) for g in groups)
    two = choose_spans(spans, per_example=2, examples=2, key="7/1/3")
    assert two == groups[:2]


def test_choose_spans_with_fewer_spans_than_asked_masks_them_all():
    assert choose_spans([PERSON, DATE], per_example=3, examples=1, key="k") == [[PERSON, DATE]]


TEXT = "Alpha beta. Gamma delta epsilon.\nZeta eta theta. Iota."


def chunks(text: str, max_words: int) -> list[str]:
    return [text[s:e] for s, e in chunk_spans(text, max_words)]


def test_chunks_pack_whole_sentences_across_paragraphs():
    assert chunks(TEXT, 5) == ["Alpha beta. Gamma delta epsilon.", "Zeta eta theta. Iota."]
    assert chunks(TEXT, 4) == ["Alpha beta.", "Gamma delta epsilon.", "Zeta eta theta. Iota."]
    assert chunks(TEXT, 6) == ["Alpha beta. Gamma delta epsilon.", "Zeta eta theta. Iota."]
    assert chunks(TEXT, 9) == [TEXT]


def test_a_sentence_longer_than_a_chunk_is_cut_between_words():
    assert chunks(TEXT, 2) == [
        "Alpha beta.",
        "Gamma delta",
        "epsilon.",
        "Zeta eta",
        "theta.",
        "Iota.",
    ]


def test_chunks_are_slices_of_irregularly_spaced_text():
    text = "  Alpha   beta.  Gamma delta.\n\n  Zeta. "
    assert chunks(text, 3) == ["Alpha   beta.", "Gamma delta.\n\n  Zeta."]


def test_text_without_words_has_no_chunks():
    assert chunk_spans("", 5) == [] and chunk_spans("  \n \n", 5) == []
    with pytest.raises(ValueError):
        chunk_spans(TEXT, 0)
