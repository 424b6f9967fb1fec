"""Evaluation says how far it is: off a terminal, a plain line per interval over the month's
examples (every example of each probe mixture once per model function, the rank rows), and a
closing line; nothing when it is quick."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from eval_helpers import write_probe_stats

from tw_jax.evaluate.month_eval import EvalSettings, evaluate_month
from tw_jax.io import progress
from tw_jax.io.progress import INTERVAL_ENV
from tw_jax.time import Period

P0809 = Period.parse("0809")

ROWS = {
    "unchanged": [("Ada Lovelace", "occupation", "mathematician", ""),
                  ("Alan Turing", "employer", "University of Manchester", "")],
    "updated": [("Lisbon", "head of government", "Carlos Moedas", "Fernando Medina")],
    "new": [("Oslo", "population", "700000", "")],
    "deleted": [],
}


@pytest.fixture()
def probe_data(tmp_path):
    folder = tmp_path / "0809" / "probes"
    folder.mkdir(parents=True)
    for category, rows in ROWS.items():
        lines = ["subject,relation,object,previous_object"]
        lines += [",".join(row) for row in rows]
        (folder / f"{category}.csv").write_text("\n".join(lines) + "\n")
    write_probe_stats(folder, {c: len(r) for c, r in ROWS.items()})
    return tmp_path


def test_a_month_reports_its_examples_and_its_end(probe_data, random_gpt2, gpt2_vocab,
                                                   register_probes, capsys, monkeypatch):
    register_probes(probe_data)
    monkeypatch.setenv("TW_JAX_PROGRESS_SECONDS", "0")  # a line at every update
    model, params = random_gpt2
    settings = EvalSettings(groups=("ppl", "rank"), batch_size=4)
    scores = evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809, settings)
    values, skipped = scores.values, scores.skipped
    assert skipped == {"deleted": "no probe rows"}
    assert ("changed", "ppl") in values and ("updated", "rank_acc") in values
    lines = [re.sub(r"\([\d,.]+ ", "(N ", line)
             for line in capsys.readouterr().err.splitlines()]
    # ppl, the mixture's tasks in name order: changed 2, new 1, unchanged 2, updated 1; rank:
    # every category's rows count, scored or not (unchanged 2, updated 1, new 1)
    assert lines == [
        "evaluating 0809: 2 examples (N examples/s)",
        "evaluating 0809: 3 examples (N examples/s)",
        "evaluating 0809: 5 examples (N examples/s)",
        "evaluating 0809: 6 examples (N examples/s)",
        "evaluating 0809: 8 examples (N examples/s)",
        "evaluating 0809: 9 examples (N examples/s)",
        "evaluating 0809: 10 examples (N examples/s)",
        "evaluating 0809: 10 examples (N examples/s) done",
    ]


def test_a_quick_month_prints_nothing(probe_data, random_gpt2, gpt2_vocab, register_probes,
                                      capsys, monkeypatch):
    register_probes(probe_data)
    # "Quick" is shorter than the interval (the default, 60 s): the progress's clock is stopped,
    # so the month takes no time however loaded the machine is.
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: 0.0))
    model, params = random_gpt2
    evaluate_month(model, params, gpt2_vocab, str(probe_data), P0809,
                   EvalSettings(groups=("ppl",), batch_size=4))
    assert capsys.readouterr().err == ""
