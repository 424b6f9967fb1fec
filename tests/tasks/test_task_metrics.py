"""SQuAD EM/F1 and perplexity as the probe tasks report them, with hand-computed values."""

from __future__ import annotations

import math

import pytest

from tw_jax.tasks import metrics


def test_squad_normalisation():
    assert metrics.normalize_answer("The  Eiffel-Tower, in Paris!") == "eiffeltower in paris"
    assert metrics.normalize_answer("An apple a day") == "apple day"
    assert metrics.normalize_answer("Theatre thereby") == "theatre thereby"  # words, not prefixes


def test_exact_match_and_f1_values():
    assert metrics.exact_match("the Paris.", "Paris") == 1.0
    assert metrics.exact_match("Paris, France", "Paris") == 0.0
    # prediction "paris france" vs gold "paris": precision 1/2, recall 1 -> F1 2/3
    assert metrics.token_f1("Paris, France", "Paris") == pytest.approx(2 / 3)
    assert metrics.token_f1("Lyon", "Paris") == 0.0
    assert metrics.token_f1("the", "a") == 1.0  # both empty after normalisation
    assert metrics.token_f1("", "Paris") == 0.0


def test_squad_takes_the_best_answer_and_reports_percent():
    targets = [
        "Paris",
        ["Wiro Derncroft", "Groris Funley"],
        metrics.Target(answers=["24042"], num_tokens=3),
        "New York City",
    ]
    predictions = ["paris", "Groris Funley.", "23865", "New York"]
    result = metrics.squad(targets, predictions)
    # EM: 1 + 1 + 0 + 0 over 4; F1: 1 + 1 + 0 + (2·1·2/3)/(1+2/3) = 0.8
    assert result["em"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(100 * (1 + 1 + 0 + 0.8) / 4)
    with pytest.raises(ValueError, match="2 targets but 1 predictions"):
        metrics.squad(["a", "b"], ["a"])


def test_squad_scores_the_outdated_answer_where_a_target_has_one():
    """UPDATED probes carry their previous objects: em_previous/f1_previous average over those
    targets only (how often the model still gives the outdated answer)."""
    targets = [metrics.Target(answers=["Carlos Moedas"], num_tokens=None,
                              previous=["Fernando Medina"]),
               metrics.Target(answers=["Oslo"], num_tokens=None, previous=[]),
               "Paris"]
    result = metrics.squad(targets, ["Fernando Medina", "Oslo", "Lyon"])
    assert result == {"em": pytest.approx(100 / 3), "f1": pytest.approx(100 / 3),
                      "em_previous": 100.0, "f1_previous": 100.0}
    assert set(metrics.squad(["a"], ["a"])) == {"em", "f1"}  # no target with a previous answer
    example = {"object": b"Carlos Moedas", "previous_object": b"Fernando Medina | F. Medina",
               "targets": [5, 6, 1]}
    target = metrics.probe_postprocessor("", example, is_target=True)
    assert target["previous"] == ["Fernando Medina", "F. Medina"]


def test_perplexity_per_instance_and_per_token():
    targets = [metrics.Target(answers=["x"], num_tokens=2), {"num_tokens": 4}, 1]
    scores = [-2.0, -4.0, -0.5]
    result = metrics.perplexity(targets, scores)
    assert result["perplexity"] == pytest.approx((math.e + math.e + math.exp(0.5)) / 3)
    assert result["token_perplexity"] == pytest.approx(math.exp(6.5 / 7))
    assert (result["examples"], result["tokens"]) == (3, 7)
    with pytest.raises(ValueError, match="at least one token"):
        metrics.perplexity([0], [-1.0])


def test_a_score_may_carry_the_tokens_the_model_scored():
    """tw_jax's score_fn returns [log-likelihood, tokens]: that count wins over the target's
    (a GPT-2 block's first token has no context, so the model scores one fewer)."""
    targets = [metrics.Target(answers=["x"], num_tokens=3), 9]
    result = metrics.perplexity(targets, [[-2.0, 2], [-4.0, 4]])
    assert result == {"perplexity": math.e, "token_perplexity": math.e, "examples": 2.0,
                      "tokens": 6.0}
    with pytest.raises(ValueError, match=r"log-likelihood, tokens\]"):
        metrics.perplexity([1], [[-1.0, 1.0, 2.0]])


def test_per_instance_perplexity_is_the_one_formula():
    """ppl_i = exp(-(1/|y_i|) Σ log p): what tw-jax eval and the lifelong report both call."""
    got = metrics.instance_perplexities([-2.0, -4.0, 0.0], [2, 4, 0])
    assert got[:2].tolist() == [math.e, math.e] and math.isnan(got[2])
    assert metrics.mean_perplexity([2.0, 4.0]) == 3.0
    with pytest.raises(ValueError, match="1 instances had no scored token"):
        metrics.mean_perplexity(got)
    with pytest.raises(ValueError, match="no instances"):
        metrics.mean_perplexity([])
    assert metrics.mean_token_loss([-2.0, -4.0, -0.5], [2, 4, 1]) == 6.5 / 7
    # the metric is exactly those two functions
    result = metrics.perplexity([2, 4], [-2.0, -3.0])
    assert result["perplexity"] == metrics.mean_perplexity(
        metrics.instance_perplexities([-2.0, -3.0], [2, 4]))
    assert result["token_perplexity"] == math.exp(5.0 / 6)


def test_postprocessors_extract_answers_and_token_counts():
    example = {"object": b"Groris Funley", "targets": [5, 6, 7, 1]}
    target = metrics.probe_postprocessor("<extra_id_0> Groris Funley", example, is_target=True)
    assert target == {"answers": ["Groris Funley"], "num_tokens": 4, "previous": []}
    assert (
        metrics.probe_postprocessor("<extra_id_0> Groris Funley <extra_id_1> x") == "Groris Funley"
    )
    assert metrics.probe_postprocessor(" Groris Funley\nand more") == "Groris Funley"
    assert metrics.probe_postprocessor("<extra_id_0>") == ""
    block = metrics.token_count_postprocessor("text", {"targets": [1] * 64}, is_target=True)
    assert block.num_tokens == 64
    # a probe example counts the tokens its targets_weights marks (the object's, not the
    # sentinel or EOS)
    probe = {"object": b"Groris Funley", "targets": [9, 5, 6, 1], "targets_weights": [0, 1, 1, 0]}
    assert metrics.probe_postprocessor("x", probe, is_target=True).num_tokens == 2
