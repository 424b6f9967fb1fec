"""Probe perplexity per instance: hand computations on a unigram GPT-2, padding invariance, T5."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from probe_oracle import probe_perplexities

from tw_jax.models import scoring
from tw_jax.tasks.metrics import mean_perplexity

ROWS = [
    {"subject": "Trurmouth", "relation": "head of government", "object": "Groris Funley",
     "previous_object": "Wiro Derncroft", "text": "Trurmouth head of government Groris Funley",
     "cloze": "The head of government of Trurmouth is Groris Funley ."},
    {"subject": "Dravminster", "relation": "population", "object": "24042",
     "previous_object": "", "text": "Dravminster population 24042",
     "cloze": "The population of Dravminster is 24042 ."},
    {"subject": "Barack Obama", "relation": "educated at", "object": "Columbia University",
     "previous_object": "", "text": "Barack Obama educated at Columbia University", "cloze": ""},
]


def _unigram_ppl(log_probs, ids) -> float:
    return float(np.exp(-np.mean([log_probs[i] for i in ids])))


def test_gpt2_text_scores_every_token(unigram_gpt2, gpt2_vocab):
    model, params, log_probs = unigram_gpt2
    got = probe_perplexities(model, params, gpt2_vocab, ROWS, "text", batch_size=2)
    expected = [_unigram_ppl(log_probs, gpt2_vocab.encode(r["text"])) for r in ROWS]
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    # The reference's convention: the first token is context only.
    got = probe_perplexities(model, params, gpt2_vocab, ROWS, "text", prepend_bos=False)
    expected = [_unigram_ppl(log_probs, gpt2_vocab.encode(r["text"])[1:]) for r in ROWS]
    np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_gpt2_object_and_cloze_score_the_object_tokens_only(unigram_gpt2, gpt2_vocab):
    model, params, log_probs = unigram_gpt2
    objects = [gpt2_vocab.encode(" " + r["object"]) for r in ROWS]
    for row, ids in zip(ROWS, objects, strict=True):  # byte-level BPE splits before the space
        prefix = gpt2_vocab.encode(f"{row['subject']} {row['relation']}")
        assert prefix + ids == gpt2_vocab.encode(row["text"])
    expected = [_unigram_ppl(log_probs, ids) for ids in objects]
    for variant in ("object", "cloze"):  # the third row has no cloze: falls back to "object"
        got = probe_perplexities(model, params, gpt2_vocab, ROWS, variant, batch_size=4)
        np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_padding_and_batch_size_do_not_change_values(random_gpt2, gpt2_vocab):
    model, params = random_gpt2
    one = probe_perplexities(model, params, gpt2_vocab, ROWS, "text", batch_size=1)
    three = probe_perplexities(model, params, gpt2_vocab, ROWS, "text", batch_size=3)
    np.testing.assert_allclose(one, three, rtol=1e-5)
    ids = [gpt2_vocab.eos_id, *gpt2_vocab.encode(ROWS[1]["text"])]
    log_probs = scoring.causal_lm_log_likelihoods(model, params, jnp.asarray([ids]))
    assert one[1] == pytest.approx(float(np.exp(-np.mean(np.asarray(log_probs)))), rel=1e-5)


def _t5_expected(model, params, vocab, source: str, obj: str) -> float:
    inputs = [*vocab.encode(source), vocab.eos_id]
    target = vocab.encode(f"<extra_id_0> {obj}")
    assert target[0] == vocab.vocab_size - 1  # the sentinel, then the object's pieces
    targets = [*target, vocab.eos_id]
    log_probs = np.asarray(scoring.seq2seq_log_likelihoods(
        model, params, jnp.asarray([inputs]), jnp.asarray([targets])))[0]
    return float(np.exp(-np.mean(log_probs[1:len(target)])))


def test_t5_scores_the_object_given_subject_and_relation(random_t5, t5_vocab):
    model, params = random_t5
    got = probe_perplexities(model, params, t5_vocab, ROWS, "text", batch_size=2)
    expected = [
        _t5_expected(model, params, t5_vocab, f"{r['subject']} {r['relation']} <extra_id_0>",
                     r["object"]) for r in ROWS
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    cloze = probe_perplexities(model, params, t5_vocab, ROWS, "cloze", batch_size=2)
    assert cloze[0] == pytest.approx(_t5_expected(
        model, params, t5_vocab, "The head of government of Trurmouth is <extra_id_0> .",
        "Groris Funley"), rel=1e-4)
    assert cloze[2] == pytest.approx(expected[2], rel=1e-5)  # no cloze sentence: the ssm input


def test_mean_is_over_instances():
    assert mean_perplexity([2.0, 4.0]) == 3.0
    with pytest.raises(ValueError, match="no scored token"):
        mean_perplexity([2.0, float("nan")])
    with pytest.raises(ValueError, match="no instances"):
        mean_perplexity([])


def test_unknown_variant_is_refused(random_gpt2, gpt2_vocab):
    model, params = random_gpt2
    with pytest.raises(ValueError, match="unknown variant 'masked'"):
        probe_perplexities(model, params, gpt2_vocab, ROWS, "masked")
