"""The results.jsonl schema: round trip, replacement by later lines, clear errors."""

from __future__ import annotations

import json

import pytest

from tw_jax.errors import DumpError
from tw_jax.evaluate.results import (
    BASE,
    METRICS,
    NO_MONTH,
    Result,
    append_results,
    iter_results,
    read_results,
)


def _r(method="diff", trained="0910", month="0910", category="updated", metric="ppl", value=1.5):
    return Result(method, trained, month, category, metric, value)


def test_append_then_read_round_trips_and_later_lines_win(tmp_path):
    first = [_r(value=268.58), _r(method="initial", trained=BASE, category="unchanged", value=3),
             _r(category="all", metric="train_seconds", month=NO_MONTH, value=7200.0)]
    path = append_results(tmp_path / "run", first)
    assert path == tmp_path / "run" / "results.jsonl"
    append_results(tmp_path / "run", [_r(value=250.0)])
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0]) == {
        "method": "diff", "trained_through": "0910", "eval_month": "0910",
        "category": "updated", "metric": "ppl", "value": 268.58}
    assert [r.value for r in iter_results(tmp_path / "run")] == [268.58, 3, 7200.0, 250.0]
    merged = read_results([tmp_path / "run"])
    assert sorted(r.value for r in merged) == [3, 250.0, 7200.0]


def test_several_runs_combine(tmp_path):
    append_results(tmp_path / "a", [_r(method="diff")])
    append_results(tmp_path / "b", [_r(method="kadapter", value=2.0)])
    assert {r.method for r in read_results([tmp_path / "a", tmp_path / "b" / "results.jsonl"])} \
        == {"diff", "kadapter"}


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (_r(metric="perplexity"), "unknown metric 'perplexity'"),
        (_r(metric="propn_ppl_diffset", category="updated"), "takes category diffset"),
        (_r(metric="train_seconds"), "takes category all"),
        (_r(trained="2021-09"), "trained_through '2021-09'"),
        (_r(month="base"), "eval_month 'base'"),
        (_r(method="DIFF"), "method 'DIFF'"),
        (_r(value=float("nan")), "not a finite number"),
        (_r(value="3.0"), "not a finite number"),
    ],
)
def test_invalid_results_are_refused_before_writing(tmp_path, result, message):
    with pytest.raises(ValueError, match=message):
        append_results(tmp_path, [_r(), result])
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"method": "diff", "trained_through": "0910"', "line 2: not JSON"),
        ("[1, 2]", "line 2: not a JSON object"),
        ('{"method": "diff", "trained_through": "0910", "eval_month": "0910", '
         '"category": "new", "value": 1}', "line 2: missing metric"),
        ('{"method": "diff", "trained_through": "0910", "eval_month": "0910", "category": "new", '
         '"metric": "ppl", "value": 1, "seed": 3}', "line 2: unexpected seed"),
        ('{"method": "diff", "trained_through": 910, "eval_month": "0910", "category": "new", '
         '"metric": "ppl", "value": 1}', "line 2: trained_through must be strings"),
        ('{"method": "diff", "trained_through": "0910", "eval_month": "0910", "category": "new", '
         '"metric": "ppl", "value": NaN}', "line 2: value nan is not a finite number"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    path = append_results(tmp_path, [_r()])
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    with pytest.raises(DumpError, match=message) as caught:
        read_results([tmp_path])
    assert caught.value.path == str(path) and caught.value.record == "line 2"


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DumpError, match="no results file"):
        read_results([tmp_path / "nowhere"])


def test_every_metric_documents_its_categories():
    for name, spec in METRICS.items():
        assert spec.description and spec.categories, name
        _r(metric=name, category=spec.categories[0],
           month=NO_MONTH if name == "train_seconds" else "0910").validate()
