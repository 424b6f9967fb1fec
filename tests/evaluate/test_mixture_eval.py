"""The lifelong runner's probe numbers come through the probe mixtures and seqio.Evaluator, and
are the numbers of the row-by-row scorers they replaced: per-instance perplexity in every
variant, teacher-forced (GPT-2) and decoded (T5) EM/F1, CHANGED as UPDATED then NEW."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from eval_helpers import PROBE_FIELDS as FIELDS
from probe_oracle import previous_answers, probe_answers, probe_perplexities

from tw_jax.evaluate.mixture_eval import MixtureEvaluators, probe_forms
from tw_jax.evaluate.month_eval import EvalSettings, evaluate_month
from tw_jax.evaluate.per_probe import probe_keys
from tw_jax.evaluate.qa import qa_scores
from tw_jax.models.gpt2 import GPT2
from tw_jax.tasks import names
from tw_jax.tasks.metrics import mean_perplexity
from tw_jax.time import Period

P0809 = Period.parse("0809")

ROWS = {
    "unchanged": [
        ("Ada Lovelace", "occupation", "mathematician", "", "Ada Lovelace was a mathematician ."),
        ("Alan Turing", "employer", "University of Manchester", "",
         "Alan Turing worked at the University of Manchester ."),
        ("Oslo", "country", "Norway", "", ""),
    ],
    "updated": [("Lisbon", "head of government", "Carlos Moedas", "Fernando Medina",
                 "Carlos Moedas leads Lisbon ."),
                ("Real Graltport", "head coach", "Stano Wevton", "Groris Funley | Ada Vell", "")],
    "new": [("Dravminster", "population", "24042", "", "Dravminster has 24042 people ."),
            ("Trurmouth", "head of government", "Groris Funley", "", "")],
    "deleted": [],
}


@pytest.fixture()
def probe_data(month_probes):
    return month_probes(ROWS)


def _rows(category: str) -> list[dict[str, str]]:
    if category == "changed":
        return _rows("updated") + _rows("new")
    return [dict(zip(FIELDS, r, strict=True)) for r in ROWS[category]]


CATEGORIES = ("unchanged", "updated", "new", "changed")


def _expected(model, params, vocab, groups, cloze_qa=False) -> dict:
    expected = {}
    for category in CATEGORIES:
        rows = _rows(category)
        for group, variant in (("ppl", "text"), ("ppl_object", "object"), ("ppl_cloze", "cloze")):
            if group in groups:
                expected[(category, group)] = mean_perplexity(
                    probe_perplexities(model, params, vocab, rows, variant, batch_size=4))
        if "qa" in groups:
            answers = probe_answers(model, params, vocab, rows, cloze=cloze_qa, batch_size=4)
            scores = qa_scores(answers, [[r["object"]] for r in rows],
                               [previous_answers(r) for r in rows])
            expected.update({(category, k): v for k, v in scores.items()})
    return expected


def _assert_same(values: dict, expected: dict) -> None:
    assert set(values) == set(expected)
    for key, value in expected.items():
        assert values[key] == pytest.approx(value, rel=2e-5, abs=1e-9), key


def test_gpt2_through_the_mixtures_equals_row_by_row(probe_data, random_gpt2, gpt2_vocab):
    model, params = random_gpt2
    groups = ("ppl", "ppl_object", "ppl_cloze", "qa")
    found = evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809,
                           EvalSettings(groups=groups, batch_size=4))
    values = found.values
    assert found.skipped == {"deleted": "no probe rows"}
    _assert_same(values, _expected(model, params, gpt2_vocab, groups))
    # previous-answer scores exist where rows have previous objects
    assert ("updated", "em_previous") in values and ("new", "em_previous") not in values


def test_per_probe_scores_give_the_numbers_exactly(probe_data, random_gpt2, gpt2_vocab):
    """Each perplexity's per-probe log-likelihoods and token counts, keyed by probe, average to
    the category's number bit for bit; a key names the probe, whichever category holds it."""
    model, params = random_gpt2
    found = evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809,
                           EvalSettings(groups=("ppl", "ppl_object", "qa"), batch_size=4))
    assert set(found.probes) == {(c, g) for c in CATEGORIES for g in ("ppl", "ppl_object")}
    for (category, metric), scores in found.probes.items():
        assert scores.mean() == found.values[(category, metric)]
        assert len(scores) == len(_rows(category)) == found.counts[category]
        assert list(scores.key) == list(probe_keys(_rows(category)))
        assert np.all(scores.tokens >= 1) and np.all(scores.log_likelihood < 0)
    changed, parts = found.probes[("changed", "ppl")], [found.probes[(c, "ppl")]
                                                       for c in ("updated", "new")]
    assert list(changed.key) == [k for p in parts for k in p.key]
    assert list(changed.log_likelihood) == pytest.approx(
        [v for p in parts for v in p.log_likelihood], rel=1e-6)
    assert found.probe_counts() == {("unchanged", "n_probes"): 3.0, ("updated", "n_probes"): 2.0,
                                    ("new", "n_probes"): 2.0, ("changed", "n_probes"): 4.0}
    assert len(set(probe_keys(_rows("unchanged")))) == 3


def test_t5_through_the_mixtures_equals_row_by_row(probe_data, random_t5, t5_vocab):
    model, params = random_t5
    values = evaluate_month(model, params, t5_vocab, str(probe_data), P0809,
                            EvalSettings(groups=("ppl", "ppl_cloze", "qa"), batch_size=4,
                                         max_new_tokens=4)).values
    expected = _expected(model, params, t5_vocab, ("ppl", "ppl_cloze"))
    for category in CATEGORIES:  # decoding: the same greedy answers, four new tokens
        rows = _rows(category)
        answers = probe_answers(model, params, t5_vocab, rows, max_new_tokens=4, batch_size=4)
        scores = qa_scores(answers, [[r["object"]] for r in rows],
                           [previous_answers(r) for r in rows])
        expected.update({(category, k): v for k, v in scores.items()})
    _assert_same(values, expected)


def test_max_probes_takes_the_first_rows_of_every_task(probe_data, random_gpt2, gpt2_vocab):
    model, params = random_gpt2
    found = evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809,
                           EvalSettings(groups=("ppl",), batch_size=4, max_probes=1))
    values = found.values
    for category in ("unchanged", "updated", "new"):
        first = _rows(category)[:1]
        assert values[(category, "ppl")] == pytest.approx(
            mean_perplexity(probe_perplexities(model, params, gpt2_vocab, first)), rel=2e-5)
    # CHANGED is its own task, UPDATED then NEW: its first row is UPDATED's first
    assert values[("changed", "ppl")] == pytest.approx(values[("updated", "ppl")], rel=1e-6)
    # n: the examples each task held, CHANGED's too (1, not UPDATED's 1 + NEW's 1)
    assert found.probe_counts() == {(c, "n_probes"): 1.0 for c in CATEGORIES}
    assert len(found.probes[("changed", "ppl")]) == 1


def test_evaluators_are_built_once_per_mixture(probe_data, random_gpt2, gpt2_vocab):
    model, params = random_gpt2
    evaluators = MixtureEvaluators()
    settings = EvalSettings(groups=("ppl", "qa"), batch_size=4)
    first = evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809, settings,
                           evaluators=evaluators).values
    built = dict(evaluators._built)
    assert sorted(key[0] for key in built) == ["twiki_probes_0809", "twiki_probes_0809_object"]
    second = evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809, settings,
                            evaluators=evaluators).values
    assert evaluators._built == built and second == first
    assert evaluators.examples(built[next(iter(built))]) == 3 + 2 + 2 + 4


def test_another_folders_tasks_are_replaced_by_this_ones(probe_data, random_gpt2, gpt2_vocab,
                                                          register_probes, vocab_files,
                                                          tmp_path_factory, monkeypatch):
    """Tasks registered from another folder are never scored as this folder's probes."""
    monkeypatch.setenv("TW_JAX_GPT2_VOCAB", str(vocab_files["gpt2"]))
    other = tmp_path_factory.mktemp("other")
    (other / "0809" / "probes").mkdir(parents=True)
    for category in ROWS:
        (other / "0809" / "probes" / f"{category}.csv").write_text(
            ",".join(FIELDS) + "\nX,occupation,Y,,\n")
    register_probes(other)
    model, params = random_gpt2
    values = evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809,
                            EvalSettings(groups=("ppl",), batch_size=4)).values
    assert values[("unchanged", "ppl")] == pytest.approx(mean_perplexity(
        probe_perplexities(model, params, gpt2_vocab, _rows("unchanged"))), rel=2e-5)
    assert ("deleted", "ppl") not in values


def test_names_and_forms():
    assert names.probes(P0809, None, "_object") == "twiki_probes_0809_object"
    assert names.probes(P0809, None, "_ssm", "bm25") == "twiki_probes_0809_bm25_ssm"
    assert names.probe_category("twiki_probes_0809_bm25_changed_ssm", P0809, "_ssm",
                                "bm25") == "changed"
    assert names.probe_category("twiki_probes_0809_new", P0809, "") == "new"
    dated = Period.parse("2024-12_2025-01")
    assert names.probes(dated, "updated", "_ssm") == "twiki_probes_202412_202501_updated_ssm"
    assert names.probe_category("twiki_probes_202412_202501_bm25_new", dated, "", "bm25") == "new"
    with pytest.raises(ValueError, match="not a probe task"):
        names.probe_category("twiki_probes_0910_new", P0809, "")


def test_forms_by_objective(random_gpt2, random_t5):
    assert probe_forms(random_gpt2[0], ["ppl", "qa", "rank", "propn"]) == {
        "": ["ppl"], "_object": ["qa"]}
    assert probe_forms(random_t5[0], ["ppl", "ppl_object", "ppl_cloze", "qa"]) == {
        "_ssm": ["ppl", "ppl_object", "qa"], "_ssm_cloze": ["ppl_cloze"]}


def test_tasks_of_another_vocabulary_are_an_error_not_nan(probe_data, random_gpt2, gpt2_vocab):
    """Token ids past the model's embedding would score every probe NaN: the evaluator refuses
    tasks whose vocabulary is larger than the model's, naming it."""
    model, params = random_gpt2
    smaller = GPT2(dataclasses.replace(model.config, vocab_size=gpt2_vocab.vocab_size - 1))
    with pytest.raises(ValueError, match=r"twiki_probes_0809_\w+: its vocabulary \(.*\) has "
                       rf"{gpt2_vocab.vocab_size} tokens, the model's embedding "
                       rf"{gpt2_vocab.vocab_size - 1}"):
        evaluate_month(smaller, params, gpt2_vocab, str(probe_data), P0809,
                       EvalSettings(groups=("ppl",), batch_size=4),
                       evaluators=MixtureEvaluators())
