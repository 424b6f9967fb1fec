"""The probe mixtures' metrics, computed from examples read once, are seqio.Evaluator's own:
the same outputs give the same numbers as ``evaluate(compute_metrics=True)``, for T5's decoded
answers and GPT-2's teacher-forced ones, perplexity and EM/F1 alike."""

from __future__ import annotations

import pytest
import seqio

from tw_jax.evaluate.seqio_eval import ModelFeatureConverter, SeqioModel
from tw_jax.evaluate.task_metrics import compute_metrics, task_examples
from tw_jax.tasks import names
from tw_jax.time import Period

ROWS = {
    "unchanged": [("Ada Lovelace", "occupation", "mathematician", "", "Ada was a mathematician ."),
                  ("Oslo", "country", "Norway", "", "")],
    "updated": [("Lisbon", "head of government", "Carlos Moedas", "Fernando Medina", ""),
                ("Real Graltport", "head coach", "Stano Wevton", "Groris Funley | Ada Vell", "")],
    "new": [("Trurmouth", "head of government", "Groris Funley", "", "")],
    "deleted": [],
}
OUTPUT = seqio.metrics.ModelOutputType


@pytest.fixture()
def probe_data(month_probes):
    return month_probes(ROWS)


def _evaluator(mixture: str, model) -> seqio.Evaluator:
    return seqio.Evaluator(mixture, ModelFeatureConverter(model), eval_split="validation",
                           async_compute_metrics=False)


@pytest.mark.parametrize(("family", "suffix"), [("t5", "_ssm"), ("gpt2", "_object")])
def test_the_metrics_are_seqios_own(probe_data, family, suffix, request):
    model, params = request.getfixturevalue(f"random_{family}")
    vocab = request.getfixturevalue(f"{family}_vocab")
    fns = SeqioModel(model, params, vocabulary=vocab, batch_size=2, max_new_tokens=4)
    evaluator = _evaluator(names.probes(Period.parse("0809"), None, suffix), model)
    future, outputs = evaluator.evaluate(compute_metrics=True, score_fn=fns.score_fn,
                                         predict_fn=fns.predict_fn)
    expected = future.result()
    assert sorted(expected) == sorted(f"twiki_probes_0809_{c}{suffix}"
                                      for c in ("unchanged", "updated", "new", "changed"))
    assert compute_metrics(evaluator, outputs) == expected
    # the updated probes have previous objects: their metrics are there, as seqio gives them
    assert {"perplexity", "em", "f1", "em_previous", "f1_previous"} <= set(
        expected[f"twiki_probes_0809_updated{suffix}"])
    # a second checkpoint's outputs on the same evaluator: the kept examples serve again
    fns.params = params
    again = compute_metrics(evaluator, evaluator.evaluate(
        compute_metrics=False, score_fn=fns.score_fn, predict_fn=fns.predict_fn)[1])
    assert again == expected


def test_only_the_asked_outputs_metrics(probe_data, random_t5, t5_vocab):
    model, params = random_t5
    fns = SeqioModel(model, params, batch_size=2, max_new_tokens=4)
    evaluator = _evaluator(names.probes(Period.parse("0809"), None, "_ssm"), model)
    _, outputs = evaluator.evaluate(compute_metrics=False, score_fn=fns.score_fn,
                                    predict_fn=fns.predict_fn)
    everything = compute_metrics(evaluator, outputs)
    scores = compute_metrics(evaluator, outputs, types=(OUTPUT.SCORE,))
    answers = compute_metrics(evaluator, outputs, types=(OUTPUT.PREDICTION,))
    for task, metrics in everything.items():
        assert "perplexity" in scores[task] and "em" not in scores[task]
        assert "em" in answers[task] and "perplexity" not in answers[task]
        assert {**scores[task], **answers[task]} == metrics


def test_examples_are_read_once_per_evaluator_in_seqios_order(probe_data, random_t5):
    model, _ = random_t5
    evaluator = _evaluator(names.probes(Period.parse("0809"), None, "_ssm"), model)
    read = task_examples(evaluator)
    assert task_examples(evaluator) is read
    changed = read.examples["twiki_probes_0809_changed_ssm"]
    assert [ex["object"].decode() for ex in changed] == ["Carlos Moedas", "Stano Wevton",
                                                         "Groris Funley"]
    assert task_examples(_evaluator(names.probes(Period.parse("0809"), None, "_ssm"), model)) is not read
