"""Proper-noun tokens: span overlap on hand-given offsets, spaCy tags mapped to both
vocabularies, fixed-length blocks, and proper-noun perplexity on a unigram GPT-2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tw_jax.data.tokens import encode_with_offsets, object_span, overlaps, span_mask
from tw_jax.errors import DumpError
from tw_jax.evaluate.propn import (
    Block,
    TaggedText,
    corpus_blocks,
    iter_blocks,
    propn_perplexity,
    propn_spans,
    read_articles,
    relative,
    sample_blocks,
    tag_texts,
)


def test_span_mask_on_hand_given_offsets():
    # "Ms Ada Lovelace wrote." tokenised as Ms|▁Ad|a|▁Lovel|ace|▁wrote|.
    offsets = [(0, 2), (2, 5), (5, 6), (6, 12), (12, 15), (15, 21), (21, 22)]
    spans = [(3, 6), (7, 15)]  # "Ada", "Lovelace"
    assert span_mask(offsets, spans) == [False, True, True, True, True, False, False]
    assert span_mask(offsets, list(reversed(spans))) == span_mask(offsets, spans)
    assert span_mask(offsets, []) == [False] * 7
    assert span_mask([(0, 0), (0, 2)], [(0, 2)]) == [False, True]  # empty tokens never count
    assert span_mask([(2, 4)], [(0, 2), (4, 6)]) == [False]  # touching is not overlapping
    assert overlaps((2, 4), [(3, 3), (3, 9)]) and not overlaps((2, 4), [(3, 3)])
    assert object_span("The capital of X is Paris .", "Paris") == (19, 25)
    assert object_span("Paris", "Paris") == (0, 5) and object_span("abc", "Paris") is None


@pytest.mark.parametrize("kind", ["gpt2", "t5"])
def test_offsets_give_the_vocabularys_own_ids(vocabs, kind):
    vocab = vocabs[kind]
    for text in ["Barack Obama was born in Honolulu.", "Zoë  Café 24042\nnew line", ""]:
        ids, offsets = encode_with_offsets(vocab, text)
        assert ids == list(vocab.encode(text))
        assert all(0 <= s <= e <= len(text) for s, e in offsets)


SENTENCE = "Barack Obama was born in Honolulu and studied at Columbia University."


def test_spacy_tags_proper_nouns(pos_nlp):
    doc = pos_nlp(SENTENCE)
    assert [SENTENCE[s:e] for s, e in propn_spans(doc)] == [
        "Barack", " Obama", " Honolulu", " Columbia", " University"]
    assert propn_spans(pos_nlp("She walked to the market and bought some bread.")) == []
    assert "parser" not in pos_nlp.pipe_names and "ner" not in pos_nlp.pipe_names


@pytest.mark.parametrize("kind", ["gpt2", "t5"])
def test_flags_cover_exactly_the_proper_noun_words(pos_nlp, vocabs, kind):
    vocab = vocabs[kind]
    (tagged,) = list(tag_texts(pos_nlp, vocab, [SENTENCE]))
    ids, offsets = encode_with_offsets(vocab, SENTENCE)
    assert tagged.ids == tuple(ids) and len(tagged.propn) == len(ids)
    covered = "".join(SENTENCE[s:e] if flag else "|" for (s, e), flag in zip(
        offsets, tagged.propn, strict=True))
    # Runs of flagged tokens spell the proper nouns (with the spaces their tokens carry).
    runs = [" ".join(run.split()) for run in covered.split("|") if run.strip()]
    assert runs == ["Barack Obama", "Honolulu", "Columbia University"]


def test_blocks_are_consecutive_and_sampled_deterministically():
    texts = [TaggedText((1, 2, 3), (False, True, False)), TaggedText((4, 5), (True, True))]
    blocks = list(iter_blocks(texts, length=3, separator=0))
    assert blocks == [Block(0, (1, 2, 3), (False, True, False)),
                      Block(1, (0, 4, 5), (False, True, True))]  # the tail (0,) is dropped
    many = [Block(i, (i, i), (False, True)) for i in range(50)]
    chosen = sample_blocks(many, 5, seed=1)
    assert [b.index for b in chosen] == [b.index for b in sample_blocks(many, 5, seed=1)]
    assert len(chosen) == 5 and chosen == sorted(chosen, key=lambda b: b.index)
    assert [b.index for b in sample_blocks(many, 5, seed=2)] != [b.index for b in chosen]
    assert sample_blocks(many[:3], 10) == many[:3]


def test_corpus_blocks_from_a_jsonl(tmp_path, pos_nlp, gpt2_vocab):
    path = tmp_path / "diffset.jsonl"
    rows = [{"id": i, "title": "t", "text": SENTENCE} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    blocks = corpus_blocks(pos_nlp, gpt2_vocab, read_articles(path), n=3, length=16, seed=0)
    again = corpus_blocks(pos_nlp, gpt2_vocab, read_articles(path), n=3, length=16, seed=0)
    assert blocks == again and len(blocks) == 3
    assert all(len(b.ids) == 16 and any(b.propn) for b in blocks)
    (tmp_path / "bad.jsonl").write_text(json.dumps(rows[0]) + "\n{oops\n")
    with pytest.raises(DumpError, match="bad.jsonl, line 2: not JSON"):
        list(read_articles(tmp_path / "bad.jsonl"))


def test_propn_perplexity_on_a_unigram_model(unigram_gpt2):
    model, params, log_probs = unigram_gpt2
    blocks = [
        Block(0, (5, 6, 7, 8), (True, True, False, True)),    # token 5 has no context: skipped
        Block(1, (9, 10, 11, 12), (False, False, False, False)),  # no proper noun: not averaged
        Block(2, (13, 14, 15, 16), (False, False, True, False)),
    ]
    value, count = propn_perplexity(model, params, blocks, batch_size=2)
    expected = np.mean([np.exp(-np.mean(log_probs[[6, 8]])), np.exp(-log_probs[15])])
    assert count == 2 and value == pytest.approx(expected, rel=1e-4)
    assert relative({"0809": 30.0, "0910": 10.0}, {"0809": 40.0}) == {"0809": 0.75}
