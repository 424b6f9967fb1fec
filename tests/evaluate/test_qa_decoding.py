"""EM/F1 against the new and the previous answer; batched decoding equals decoding alone."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from eval_helpers import set_unigram

from tw_jax.evaluate.qa import decode_answers, probe_qa, qa_scores
from tw_jax.models import decoding
from tw_jax.tasks import metrics


def test_scores_against_new_and_previous_answers():
    scores = qa_scores(["Paris", "the London", "Berlin"], [["Paris"], ["London"], ["Rome"]],
                       [[], ["Londres"], ["Berlin", "Bonn"]])
    assert scores["em"] == pytest.approx(200 / 3) and scores["f1"] == pytest.approx(200 / 3)
    assert scores["em_previous"] == 50.0 and scores["f1_previous"] == 50.0
    assert "em_previous" not in qa_scores(["a"], [["a"]], [[]])


def test_probe_qa_on_a_model_that_always_says_paris(unigram_gpt2, gpt2_vocab):
    model, params, _ = unigram_gpt2
    (paris,) = gpt2_vocab.encode(" Paris")
    params, _ = set_unigram(params, {paris: -0.01}, params["wte"]["embedding"].shape[0])
    rows = [
        {"subject": "France", "relation": "capital", "object": "Paris", "previous_object": ""},
        {"subject": "England", "relation": "capital", "object": "London",
         "previous_object": "Paris"},
    ]
    scores, predictions = probe_qa(model, params, gpt2_vocab, rows, max_new_tokens=3)
    assert predictions == ["Paris Paris Paris"] * 2
    # F1 "Paris Paris Paris" vs "Paris": precision 1/3, recall 1 -> 0.5.
    assert scores == {"em": 0.0, "f1": 25.0, "em_previous": 0.0, "f1_previous": 50.0}


@pytest.mark.parametrize("kind", ["gpt2", "t5"])
def test_batched_decoding_equals_each_prompt_alone(kind, vocabs, random_gpt2, random_t5):
    vocab = vocabs[kind]
    model, params = random_gpt2 if kind == "gpt2" else random_t5
    prompts = ["Barack Obama was born in", "Paris", "Angela Merkel met Emmanuel Macron in"]
    if kind == "t5":
        prompts = [p + " <extra_id_0>" for p in prompts]
    for beam in (1, 2):
        got = decode_answers(model, params, vocab, prompts, max_new_tokens=5, beam_size=beam,
                             batch_size=2)
        for prompt, answer in zip(prompts, got, strict=True):
            ids = [*vocab.encode(prompt), *([vocab.eos_id] if kind == "t5" else [])]
            ids = jnp.asarray([ids])
            if beam == 1:
                out = decoding.greedy_decode(model, params, ids, max_new_tokens=5,
                                             eos_id=vocab.eos_id)[0]
            else:
                out = decoding.beam_search(model, params, ids, beam_size=2, max_new_tokens=5,
                                           eos_id=vocab.eos_id)[0][0, 0]
            tokens = np.asarray(out).tolist()
            if vocab.eos_id in tokens:
                tokens = tokens[: tokens.index(vocab.eos_id)]
            text = vocab.decode(tokens)
            post = metrics.answer_from_t5 if kind == "t5" else metrics.answer_from_gpt2
            assert answer == post(text)
