"""Rank classification on models whose preferences are known, summed and length-normalised."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from eval_helpers import set_unigram

from tw_jax.evaluate.rank import RankItem, probe_rank_items, rank_classify
from tw_jax.models import BARTConfig, GPT2Config, T5Config, scoring


def _single_and_triple(vocab) -> tuple[str, int, str, list[int]]:
    """A word that is one token and a phrase of three distinct other tokens (after a space)."""
    words = ["Obama", "Paris", "Honolulu", "London", "Berlin", "Tokyo", "river", "valley",
             "market", "bread"]
    singles = [w for w in words if len(vocab.encode(" " + w)) == 1]
    assert len(singles) >= 4, singles
    phrase = " ".join(singles[1:4])
    ids = vocab.encode(" " + phrase)
    assert len(ids) == 3 and len(set(ids)) == 3
    return singles[0], vocab.encode(" " + singles[0])[0], phrase, ids


def test_sum_prefers_the_short_answer_and_the_mean_the_likely_tokens(unigram_gpt2, gpt2_vocab):
    model, params, _ = unigram_gpt2
    single, single_id, phrase, phrase_ids = _single_and_triple(gpt2_vocab)
    # Gold: one token at log p -2 (sum -2, mean -2). Other: three tokens at -1.5 each
    # (sum -4.5, mean -1.5). Every position predicts the same distribution.
    wanted = {single_id: -2.0, **{i: -1.5 for i in phrase_ids}}
    params, exact = set_unigram(params, wanted, params["wte"]["embedding"].shape[0])
    items = [RankItem("Barack Obama born in", (single, phrase), gold=0),
             RankItem("Barack Obama born in", (single, phrase), gold=1)]
    result = rank_classify(model, params, gpt2_vocab, items, batch_size=4)
    np.testing.assert_allclose(result.summed[0], [exact[single_id], exact[phrase_ids].sum()],
                               atol=1e-4)
    np.testing.assert_allclose(result.summed[0], [-2.0, -4.5], atol=1e-3)
    np.testing.assert_allclose(result.mean[0], [-2.0, -1.5], atol=1e-3)
    assert result.accuracy == 50.0 and result.accuracy_normalised == 50.0
    first = rank_classify(model, params, gpt2_vocab, items[:1])
    assert (first.accuracy, first.accuracy_normalised) == (100.0, 0.0)


def test_a_tie_is_a_miss(unigram_gpt2, gpt2_vocab):
    model, params, _ = unigram_gpt2
    result = rank_classify(model, params, gpt2_vocab, [RankItem("x is", ("Paris", "Paris"))])
    assert result.summed[0][0] == result.summed[0][1] and result.accuracy == 0.0


def test_t5_candidates_are_teacher_forced(random_t5, t5_vocab):
    model, params = random_t5
    prompt = "Barack Obama educated at <extra_id_0>"
    candidates = ("Columbia University", "Honolulu", "Paris")
    result = rank_classify(model, params, t5_vocab, [RankItem(prompt, candidates, gold=1)])
    inputs = jnp.asarray([[*t5_vocab.encode(prompt), t5_vocab.eos_id]])
    expected = []
    for candidate in candidates:
        target = t5_vocab.encode(f"<extra_id_0> {candidate}")
        log_probs = scoring.seq2seq_log_likelihoods(
            model, params, inputs, jnp.asarray([[*target, t5_vocab.eos_id]]))
        expected.append(float(np.asarray(log_probs)[0, 1:len(target)].sum()))
    np.testing.assert_allclose(result.summed[0], expected, rtol=1e-4)
    assert result.accuracy == (100.0 if int(np.argmax(expected)) == 1 else 0.0)


def test_probe_rows_become_new_versus_previous_items():
    rows = [
        {"subject": "A", "relation": "coach", "object": "X", "previous_object": "Y | Z | Y"},
        {"subject": "B", "relation": "coach", "object": "X", "previous_object": ""},
        {"subject": "C", "relation": "coach", "object": "X", "previous_object": "X"},
    ]
    assert probe_rank_items(rows, GPT2Config()) == [RankItem("A coach", ("X", "Y", "Z"), 0)]
    assert probe_rank_items(rows, T5Config())[0].prompt == "A coach <extra_id_0>"
    assert probe_rank_items(rows, BARTConfig())[0].prompt == "A coach"
    with pytest.raises(ValueError, match="2\\+ candidates"):
        RankItem("p", ("only",))
