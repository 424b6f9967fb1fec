"""A month's probe mixtures keep their batches between checkpoints (tw_jax.evaluate.eval_batches):
a later checkpoint's numbers through the kept batches are exactly a fresh evaluator's, and
probe files rewritten since are read anew."""

from __future__ import annotations

import csv

import jax
import numpy as np
import pytest
from eval_helpers import write_probe_stats
from probe_oracle import probe_perplexities

from tw_jax.evaluate import eval_batches
from tw_jax.evaluate.mixture_eval import MixtureEvaluators
from tw_jax.evaluate.month_eval import EvalSettings, evaluate_month
from tw_jax.tasks.metrics import mean_perplexity
from tw_jax.time import Period

P0809 = Period.parse("0809")

FIELDS = ["subject", "relation", "object", "previous_object", "cloze"]
ROWS = {
    "unchanged": [
        ("Ada Lovelace", "occupation", "mathematician", "", "Ada Lovelace was a mathematician ."),
        ("Alan Turing", "employer", "University of Manchester", "",
         "Alan Turing worked at the University of Manchester ."),
        ("Oslo", "country", "Norway", "", ""),
        ("Angela Merkel", "residence", "Berlin", "", "Angela Merkel lives in Berlin ."),
        ("Microsoft", "headquarters location", "Redmond", "", ""),
    ],
    "updated": [("Lisbon", "head of government", "Carlos Moedas", "Fernando Medina",
                 "Carlos Moedas leads Lisbon ."),
                ("Real Graltport", "head coach", "Stano Wevton", "Groris Funley | Ada Vell", ""),
                ("Trurmouth", "population", "24042", "23001", "")],
    "new": [("Dravminster", "population", "24042", "", "Dravminster has 24042 people ."),
            ("Trurmouth", "head of government", "Groris Funley", "", "")],
    "deleted": [],
}


def _write(folder, rows) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for category, chosen in rows.items():
        with open(folder / f"{category}.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(FIELDS)
            writer.writerows(chosen)
    write_probe_stats(folder, {c: len(chosen) for c, chosen in rows.items()})  # as the stage


@pytest.fixture()
def probe_data(tmp_path, register_probes):
    _write(tmp_path / "0809" / "probes", ROWS)
    register_probes(tmp_path)
    return tmp_path


def _other(params):
    """Another checkpoint: every parameter changed."""
    return jax.tree.map(lambda x: x * 1.25 + 0.01, params)


def _assert_identical(kept, fresh) -> None:
    assert kept.values == fresh.values  # float equality, every metric
    assert set(kept.probes) == set(fresh.probes)
    for key, scores in kept.probes.items():
        assert np.array_equal(scores.log_likelihood, fresh.probes[key].log_likelihood), key
        assert np.array_equal(scores.tokens, fresh.probes[key].tokens), key


@pytest.mark.parametrize("family", ["gpt2", "t5"])
def test_a_later_checkpoint_through_kept_batches_equals_a_fresh_evaluator(
        family, probe_data, random_gpt2, random_t5, gpt2_vocab, t5_vocab):
    model, params = random_gpt2 if family == "gpt2" else random_t5
    vocab = gpt2_vocab if family == "gpt2" else t5_vocab
    settings = EvalSettings(groups=("ppl", "ppl_object", "ppl_cloze", "qa"), batch_size=2,
                            max_new_tokens=4)
    evaluators = MixtureEvaluators()
    first = evaluate_month(model, params, vocab, str(probe_data), P0809, settings,
                           evaluators=evaluators)
    datasets = [d for e in evaluators._built.values() for d in e.cached_model_datasets.values()]
    assert datasets and all(eval_batches.registered(d) for d in datasets)
    kept = evaluate_month(model, _other(params), vocab, str(probe_data), P0809, settings,
                          evaluators=evaluators)
    fresh = evaluate_month(model, _other(params), vocab, str(probe_data), P0809, settings,
                           evaluators=MixtureEvaluators())
    _assert_identical(kept, fresh)
    assert kept.values[("unchanged", "ppl")] != first.values[("unchanged", "ppl")]
    # CHANGED's rows are UPDATED's then NEW's, computed once: the same scores exactly
    changed = kept.probes[("changed", "ppl")].log_likelihood
    parts = [kept.probes[(c, "ppl")].log_likelihood for c in ("updated", "new")]
    assert np.array_equal(changed, np.concatenate(parts))


def test_rewritten_probe_files_are_read_anew(probe_data, random_gpt2, gpt2_vocab):
    model, params = random_gpt2
    settings = EvalSettings(groups=("ppl", "qa"), batch_size=2)
    evaluators = MixtureEvaluators(capacity=2)  # a month's two mixtures: "" and "_object"
    before = evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809, settings,
                            evaluators=evaluators)
    old = [d for e in evaluators._built.values() for d in e.cached_model_datasets.values()]
    rewritten = dict(ROWS, unchanged=[*ROWS["unchanged"][1:3],
                                      ("Oslo", "mayor", "Anne Lindboe", "", "")])
    _write(probe_data / "0809" / "probes", rewritten)
    after = evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809, settings,
                           evaluators=evaluators)
    assert after.counts["unchanged"] == 3 and before.counts["unchanged"] == 5
    rows = [dict(zip(FIELDS, r, strict=True)) for r in rewritten["unchanged"]]
    assert after.values[("unchanged", "ppl")] == pytest.approx(
        mean_perplexity(probe_perplexities(model, params, gpt2_vocab, rows)), rel=2e-5)
    _assert_identical(after, evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809,
                                            settings, evaluators=MixtureEvaluators()))
    # the new data built new evaluators; the old ones went, and their batches with them
    assert len(evaluators._built) == 2
    assert not any(eval_batches.registered(d) for d in old)
