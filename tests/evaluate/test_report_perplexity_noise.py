"""Perplexity cells are tested against sampling noise by a paired bootstrap over probes, from
the per-probe scores a run keeps beside results.jsonl; runs without them render unmarked."""

from __future__ import annotations

import numpy as np
import pytest

from tw_jax.cli import main
from tw_jax.errors import DumpError
from tw_jax.evaluate.noise import RESAMPLES, SEED, bootstrap_within_noise, paired_bootstrap
from tw_jax.evaluate.per_probe import (
    ProbeScores,
    per_probe_path,
    probe_keys,
    read_file,
    read_runs,
    write_file,
)
from tw_jax.evaluate.report import ResultIndex, probe_table
from tw_jax.evaluate.results import BASE, Result, append_results
from tw_jax.evaluate.summary import summary_table
from tw_jax.time import Period

P0809 = Period.parse("0809")


def test_identical_values_are_noise():
    values = np.array([10.0, 250.0, 31.5, 7.0])
    assert paired_bootstrap(values, values.copy()) == (0.0, 0.0)
    assert bootstrap_within_noise(values, values.copy())


def test_a_shift_beyond_any_resampling_spread_is_not_noise():
    baseline = np.array([10.0, 250.0, 31.5, 7.0, 90.0])
    low, high = paired_bootstrap(baseline - 5.0, baseline)
    assert (low, high) == (pytest.approx(-5.0), pytest.approx(-5.0))
    assert not bootstrap_within_noise(baseline - 5.0, baseline)


def test_hand_made_intervals():
    # one probe: every draw is that probe, so the interval is its difference; which is no
    # evidence, so the cell counts as noise
    assert paired_bootstrap(np.array([5.0]), np.array([2.0])) == (3.0, 3.0)
    assert bootstrap_within_noise(np.array([5.0]), np.array([2.0]))
    # two probes, differences -1 and +1: a draw's mean difference is -1, 0 or +1 with
    # probabilities 1/4, 1/2, 1/4, so the 2.5th and 97.5th percentiles are -1 and +1
    assert paired_bootstrap(np.array([1.0, 3.0]), np.array([2.0, 2.0])) == (-1.0, 1.0)
    assert bootstrap_within_noise(np.array([1.0, 3.0]), np.array([2.0, 2.0]))
    # differences +1 and +3: every draw's mean lies in [1, 3], so 0 is outside
    assert paired_bootstrap(np.array([3.0, 5.0]), np.array([2.0, 2.0])) == (1.0, 3.0)


def test_the_bootstrap_is_deterministic_and_pairs_probes():
    rng = np.random.default_rng(7)
    baseline = rng.lognormal(5.0, 1.0, 300)
    values = baseline * rng.normal(1.0, 0.05, 300)
    first = paired_bootstrap(values, baseline)
    assert paired_bootstrap(values, baseline) == first
    assert paired_bootstrap(values, baseline, seed=SEED + 1) != first
    assert first[0] < first[1]
    # paired: a spread across probes far larger than the shift does not hide the shift
    assert not bootstrap_within_noise(baseline * 0.99, baseline)
    with pytest.raises(ValueError, match="two equal, non-empty sets"):
        paired_bootstrap(values, baseline[:-1])
    assert RESAMPLES == 1000


ROWS = [{"subject": f"S{i}", "relation": "r", "object": f"O{i}", "previous_object": ""}
        for i in range(40)]


def _scores(perplexities: np.ndarray, rows=ROWS) -> ProbeScores:
    tokens = np.arange(len(perplexities)) % 3 + 1.0
    return ProbeScores(probe_keys(rows), -np.log(perplexities) * tokens, tokens)


def _run() -> tuple[list[Result], dict]:
    """INITIAL and DIFF on 0809: UNCHANGED barely moves (within noise), UPDATED falls on every
    probe (not noise)."""
    rng = np.random.default_rng(3)
    base = {c: rng.lognormal(5.0, 0.8, 40) for c in ("unchanged", "updated")}
    scores = {("initial", BASE): {c: _scores(v) for c, v in base.items()},
              ("diff", P0809): {"unchanged": _scores(base["unchanged"]
                                                      * rng.normal(1.0, 0.02, 40)),
                                 "updated": _scores(base["updated"] * 0.6)}}
    results = [Result(m, t, P0809, c, metric, value)
               for (m, t), per_category in scores.items() for c, s in per_category.items()
               for metric, value in (("ppl", s.mean()), ("n_probes", 40.0))]
    return results, scores


def _probe_index(scores: dict) -> dict:
    return {(m, t, P0809, c, "ppl"): s for (m, t), per in scores.items()
            for c, s in per.items()}


def test_tables_mark_perplexity_within_noise():
    results, scores = _run()
    index = ResultIndex(results, _probe_index(scores))
    assert index.noisy("diff", P0809, "unchanged", "ppl")
    assert not index.noisy("diff", P0809, "updated", "ppl")
    table = probe_table(index, "ppl")
    assert table.headers[2:] == ["0809 Un (n=40)", "0809 Up (n=40)"]
    diff = scores[("diff", P0809)]
    assert table.rows[1][2:] == [f"{diff['unchanged'].mean():.2f}~",
                                 f"{diff['updated'].mean():.2f}"]
    assert table.rows[0][2:] == [f"{s.mean():.2f}" for s in scores[("initial", BASE)].values()]
    assert "paired bootstrap over the n probes (1000 resamples with replacement, seed 0" in (
        table.notes[2])
    summary = summary_table(index)
    assert summary.rows[1][2] == f"{diff['unchanged'].mean():.2f}~"

    # without per-probe scores (an older run): the same numbers, unmarked, and the note says why
    old = probe_table(ResultIndex(results), "ppl")
    assert [row[2:] for row in old.rows] == [[c.removesuffix("~") for c in row[2:]]
                                             for row in table.rows]
    assert "~" not in "".join(old.rows[1])
    assert "without per-probe scores" in old.notes[2]


def test_scores_that_do_not_give_the_number_or_pair_are_not_used():
    results, scores = _run()
    probes = _probe_index(scores)
    key = ("diff", P0809, P0809, "unchanged", "ppl")
    stale = dict(probes)
    stale[key] = _scores(np.exp(-probes[key].log_likelihood / probes[key].tokens) * 1.5)
    assert not ResultIndex(results, stale).noisy("diff", P0809, "unchanged", "ppl")
    other = [{**row, "object": "X"} for row in ROWS]
    moved = dict(probes)
    moved[key] = ProbeScores(probe_keys(other), probes[key].log_likelihood, probes[key].tokens)
    assert not ResultIndex(results, moved).noisy("diff", P0809, "unchanged", "ppl")


def test_files_round_trip_and_render_in_the_report(tmp_path, capsys):
    results, scores = _run()
    run = tmp_path / "run"
    append_results(run, results)
    for (method, trained), per_category in scores.items():
        path = per_probe_path(str(run), method, trained, P0809)
        write_file(path, {("unchanged", "ppl"): per_category["unchanged"]})
        write_file(path, {("updated", "ppl"): per_category["updated"]})  # added, not replaced
        back = read_file(path)
        assert set(back) == {("unchanged", "ppl"), ("updated", "ppl")}
        for (category, _), s in back.items():
            original = per_category[category]
            assert s.mean() == original.mean() and s.pairs_with(original)
    assert read_runs([run / "results.jsonl"], results).keys() == _probe_index(scores).keys()
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| DIFF |")]
    assert [row.count("~") for row in rows] == [1, 1]  # UNCHANGED in the summary and Table 3
    assert "paired bootstrap over the n probes" in report

    bad = per_probe_path(str(run), "diff", P0809, P0809)
    with open(bad, "wb") as handle:
        handle.write(b"not a zip")
    with pytest.raises(DumpError, match="not a per-probe .npz file"):
        read_file(bad)
