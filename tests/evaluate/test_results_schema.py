"""The results.jsonl schema: round trip, replacement by later lines, clear errors."""

from __future__ import annotations

import json

import pytest

from tw_jax.errors import DumpError
from tw_jax.evaluate.results import (
    BASE,
    METRIC_PATTERNS,
    METRICS,
    NO_MONTH,
    Result,
    append_results,
    iter_results,
    method_name,
    metric_spec,
    read_results,
)
from tw_jax.time import Period


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
    ("fields", "message"),
    [
        ({"metric": "perplexity"}, "unknown metric 'perplexity'"),
        ({"metric": "propn_ppl_diffset", "category": "updated"}, "takes category diffset"),
        ({"metric": "train_seconds"}, "takes category all"),
        ({"trained": "2021-09"}, "trained_through: '2021-09' is neither a period"),
        ({"trained": "2025-01_2024-12"}, "trained_through: .* is not before"),
        ({"month": "base"}, "eval_month: 'base' is neither a period"),
        ({"method": "DIFF"}, "method 'DIFF'"),
        ({"value": float("nan")}, "not a finite number"),
        ({"value": "3.0"}, "not a finite number"),
    ],
)
def test_invalid_results_are_refused_before_writing(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        append_results(tmp_path, [_r(), _r(**fields)])
    assert not (tmp_path / "results.jsonl").exists()


def test_periods_are_typed_written_by_name_and_one_key_in_either_spelling(tmp_path):
    dated = _r(trained="2024-12_2025-01", month="2025-01_2025-02")
    assert dated.trained_through == Period.parse("202412_202501")
    assert json.loads(dated.to_json())["trained_through"] == "2024-12_2025-01"
    path = append_results(tmp_path, [_r(value=1.0), dated, _r(trained="2021-09_2021-10",
                                                              month="2021-09_2021-10", value=2.0)])
    assert [json.loads(line)["eval_month"] for line in path.read_text().splitlines()] == [
        "0910", "2025-01_2025-02", "2021-09_2021-10"]
    merged = read_results([tmp_path])  # 0910 and 2021-09_2021-10 are one period: one key
    assert sorted((r.eval_month, r.value) for r in merged) == [
        (Period.parse("0910"), 2.0), (Period.parse("2025-01_2025-02"), 1.5)]


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
        assert spec.description and (spec.categories or spec.category_pattern), name
        category = spec.categories[0] if spec.categories else "2017"
        Result("diff", "0910", NO_MONTH if name == "train_seconds" else "0910", category, name,
               1.0, {key: "test" for key in spec.slice_keys}).validate()
    for display, (_, spec) in METRIC_PATTERNS.items():
        assert spec.description and display.endswith("<k>")


# --- slice: the further key dimensions of another benchmark's cells (ECBD's) -----------------

ECBD_SLICE = {"split": "test", "input": "no_ent", "span_type": "NP"}


def _ecbd(metric="ecbd_ppl_entity", category="2017-2019", value=40.5, **slice_) -> Result:
    return Result("t5-small", BASE, NO_MONTH, category, metric, value, {**ECBD_SLICE, **slice_})


def test_a_slice_round_trips_sorted_and_is_part_of_the_key(tmp_path):
    path = append_results(tmp_path, [_r(), _ecbd(), _ecbd(input="original", value=30.0),
                                      _ecbd(metric="ecbd_recall_at_10", category="2019",
                                            value=12.5)])
    lines = path.read_text().splitlines()
    assert lines[0] == ('{"method": "diff", "trained_through": "0910", "eval_month": "0910", '
                        '"category": "updated", "metric": "ppl", "value": 1.5}')
    assert lines[1] == ('{"method": "t5-small", "trained_through": "base", "eval_month": "-", '
                        '"category": "2017-2019", "metric": "ecbd_ppl_entity", "value": 40.5, '
                        '"slice": {"input": "no_ent", "span_type": "NP", "split": "test"}}')
    read = list(iter_results(tmp_path))
    assert read == [_r(), _ecbd(), _ecbd(input="original", value=30.0),
                    _ecbd(metric="ecbd_recall_at_10", category="2019", value=12.5)]
    assert [r.to_json() for r in read] == lines
    assert read[1].key == ("t5-small", BASE, NO_MONTH, "2017-2019", "ecbd_ppl_entity",
                           ("input", "no_ent"), ("span_type", "NP"), ("split", "test"))
    assert _r().key == ("diff", Period.parse("0910"), Period.parse("0910"), "updated",
                        "ppl")  # no slice: five parts
    # Cells differing only in their slice are kept apart; the same slice in another order is
    # the same key, so the later line replaces the earlier one.
    append_results(tmp_path, [Result("t5-small", BASE, NO_MONTH, "2017-2019", "ecbd_ppl_entity",
                                     41.0, {"span_type": "NP", "split": "test",
                                            "input": "no_ent"})])
    merged = {r.slice.get("input"): r.value for r in read_results([tmp_path])
              if r.metric == "ecbd_ppl_entity"}
    assert merged == {"no_ent": 41.0, "original": 30.0}
    assert len({_ecbd(), _ecbd(value=40.5)}) == 1  # results still hash, equal ones alike


def test_a_line_written_before_slice_existed_reads_and_writes_back_the_same(tmp_path):
    old = ('{"method": "diff", "trained_through": "0910", "eval_month": "0910", "category": "new",'
           ' "metric": "n_probes", "value": 21}')
    (tmp_path / "results.jsonl").write_text(old + "\n", encoding="utf-8")
    [result] = read_results([tmp_path])
    assert result == Result("diff", "0910", "0910", "new", "n_probes", 21)
    assert result.slice == {} and result.to_json() == old


@pytest.mark.parametrize(
    ("slice_", "message"),
    [
        ('"test"', "line 2: slice must be a JSON object, not 'test'"),
        ('{"input": "no_ent", "span_type": "NP"}',
         "line 2: metric 'ecbd_ppl' takes slice input, span_type, split, not slice input, "
         "span_type$"),
        ('{"input": "no_ent", "span_type": "NP", "split": "test", "seed": "1"}',
         "line 2: metric 'ecbd_ppl' takes slice input, span_type, split, not slice input, seed,"),
        ('{"Input": "no_ent", "span_type": "NP", "split": "test"}',
         "line 2: slice name 'Input' is not a lower-case name"),
        ('{"input": 3, "span_type": "NP", "split": "test"}', "line 2: slice input value 3 is not"),
        ('{"input": "no ent", "span_type": "NP", "split": "test"}',
         "line 2: slice input value 'no ent' is not a name"),
    ],
)
def test_a_bad_slice_names_file_and_line(tmp_path, slice_, message):
    path = append_results(tmp_path, [_r()])
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"method": "t5", "trained_through": "base", "eval_month": "-", '
                     '"category": "2019", "metric": "ecbd_ppl", "value": 9.5, '
                     f'"slice": {slice_}}}\n')
    with pytest.raises(DumpError, match=message) as caught:
        read_results([tmp_path])
    assert caught.value.path == str(path) and caught.value.record == "line 2"


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (Result("diff", "0910", "0910", "new", "ppl", 1.0, {"split": "test"}),
         "metric 'ppl' takes no slice, not slice split"),
        (_ecbd(metric="ecbd_recall_at_0"), "unknown metric 'ecbd_recall_at_0'"),
        (_ecbd(metric="ecbd_recall_at_k"), r"known: .*, ecbd_recall_at_<k>\)"),
        (_ecbd(category="2017 2019"),
         r"metric 'ecbd_ppl_entity' takes a category matching .*, not '2017 2019'"),
        (_ecbd(metric="ppl"), "metric 'ppl' takes category unchanged / updated"),
    ],
)
def test_invalid_slices_and_ecbd_metrics_are_refused_before_writing(tmp_path, result, message):
    with pytest.raises(ValueError, match=message):
        append_results(tmp_path, [_r(), result])
    assert not (tmp_path / "results.jsonl").exists()


def test_ecbd_metrics_take_any_recall_k_and_their_own_subsets():
    for metric, category in (("ecbd_recall_at_1", "popular"), ("ecbd_recall_at_100", "2021"),
                             ("ecbd_examples", "2020-2021"), ("ecbd_entities", "my_subset.v2")):
        _ecbd(metric=metric, category=category).validate()
    assert metric_spec("ecbd_recall_at_10") is METRIC_PATTERNS["ecbd_recall_at_<k>"][1]
    assert metric_spec("ecbd_ppl").tables == "tw-jax ecbd report"
    assert metric_spec("ppl").tables == "tw-jax report" and metric_spec("nonsense") is None


def test_method_names_are_lower_cased_or_refused_by_name():
    assert method_name("T5-Small_v2") == "t5-small_v2"
    with pytest.raises(ValueError, match=r"^'t5\.small' is not a method name"):
        method_name("t5.small")
    with pytest.raises(ValueError, match=r"^'' is not a method name"):
        method_name("")
