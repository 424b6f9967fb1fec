"""``tw-jax lifelong`` on the demo data with the tiny GPT-2: two months of DIFF, a rerun that
does nothing, and ``--eval-matrix`` completing the temporal-misalignment matrix.

The tiny GPT-2 has the demo data's vocabulary size, as ``tw-jax demo`` trains it
(``tw_jax.demo_training``): models/gpt2_tiny.gin's 50,257-wide output layer, for a vocabulary
of some 1,300 ids, is nearly all of each step's work on a CPU (a light-tuning step of 32 rows:
about 2 s), and nothing checked here depends on its width."""

from __future__ import annotations

import csv
import functools
import json
import shutil
from pathlib import Path

import pytest

from tw_jax import lifelong_cli
from tw_jax.cli_parser import OneLineErrorParser
from tw_jax.lifelong.runner import (
    LifelongError,
    LifelongOptions,
    check_months,
    default_initial_gin_files,
    method_name,
    run_lifelong,
    training_task,
)
from tw_jax.time import NO_MONTH, Period

MONTHS = ("0809", "0910")  # the demo data's periods, in the 2021 layout
MAX_PROBES = 16
VOCAB_SIZE = "tw_jax.models.GPT2Config.vocab_size"


def test_months_must_form_a_chain():
    assert [p.name for p in check_months(["0809", " 0910", "1011", ""])] == [
        "0809", "0910", "1011"]
    assert check_months(["1112", "1201", "0102"])[-1].new.date.isoformat() == "2022-02-01"
    assert [p.name for p in check_months(["2024-11", "2024-12", "2025-01"])] == [
        "2024-11_2024-12", "2024-12_2025-01"]  # the snapshots a chain runs through
    assert check_months(["2024-11_2024-12", "2024-12_2025-01"]) == check_months(
        ["2024-11", "2024-12", "2025-01"])
    with pytest.raises(LifelongError, match="0809 then 1011"):
        check_months(["0809", "1011"])
    with pytest.raises(LifelongError, match="'809'"):
        check_months(["809"])
    with pytest.raises(LifelongError, match="no periods"):
        check_months([])
    with pytest.raises(LifelongError, match="not in date order"):
        check_months(["2025-01", "2024-12"])


def test_method_and_its_training_data():
    assert method_name(["kadapter.gin", "models/t5_tiny.gin"]) == "kadapter"
    assert method_name(["/x/y/full.gin"]) == "full"
    assert method_name(["mine.gin"], method="lora") == "lora"
    with pytest.raises(LifelongError, match="--method"):
        method_name(["My Run.gin"])
    period = Period.parse
    assert training_task("kadapter", period("0910")) == "twiki_diffset_0910_{objective}"
    assert training_task("full", period("0910")) == "twiki_full_10_{objective}"
    assert training_task("mixreview", period("1011")) == "twiki_mixreview_1011_{objective}"
    assert training_task("mine", period("0809"), train_on="full") == "twiki_full_09_{objective}"
    assert training_task("diff", period("2024-12_2025-01")) == (
        "twiki_diffset_202412_202501_{objective}")
    assert training_task("full", period("2024-02_2024-02-20")) == "twiki_full_20240220_{objective}"
    with pytest.raises(LifelongError, match="--train-on"):
        training_task("mine", period("0809"))
    assert default_initial_gin_files(["lora.gin", "models/gpt2_tiny.gin"]) == [
        "initial.gin", "models/gpt2_tiny.gin",
    ]


def _cli(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="tw-jax")
    lifelong_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


@functools.cache
def _vocab_size(data: Path) -> int:
    """How many ids the data folder's GPT-2 vocabulary has (the model's output width here)."""
    from tw_jax.data.vocabularies import gpt2_vocabulary

    return int(gpt2_vocabulary(str(data / "vocab" / "gpt2")).vocab_size)


def _model_binding(data: Path) -> str:
    return f"{VOCAB_SIZE}={_vocab_size(data)}"


def _argv(data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "lifelong", "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin",
        "--gin_file=runs/cpu_smoke.gin", "--gin.TRAIN_STEPS=2", "--gin.BATCH_SIZE=2",
        "--gin.SCHEDULE=constant", "--gin.tw_jax.train.train.progress=False",
        f"--gin.{_model_binding(data)}",
        "--months", ",".join(MONTHS), "--data", str(data), "--out", str(out),
        "--max-probes", str(MAX_PROBES), "--eval-batch-size", "16", *extra,
    ]


def _probe_counts(data: Path, month: str) -> dict[str, int]:
    counts = {}
    for category in ("unchanged", "updated", "new", "deleted"):
        with open(data / month / "probes" / f"{category}.csv", encoding="utf-8", newline="") as f:
            counts[category] = min(len(list(csv.DictReader(f))), MAX_PROBES)
    return counts


def _trained_by(model_dir: Path):
    """The run that a MODEL_DIR's config.gin describes (it must say what trained it)."""
    from tw_jax.runtime import gin_setup
    from tw_jax.train.gin_config import train_config

    gin_setup.parse([str(model_dir / "config.gin")])
    return train_config()


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, demo_data, compile_cache) -> dict:
    from tw_jax.runtime import gin_setup

    root = tmp_path_factory.mktemp("lifelong")
    shutil.copytree(demo_data, root / "demo")  # what run_demo(root / "demo") writes
    data = root / "demo" / "data"
    out = root / "out"
    parsed, parse = [], gin_setup.parse

    def counted(files, *args, **kwargs):
        parsed.append(list(files))
        return parse(files, *args, **kwargs)

    gin_setup.parse = counted
    try:
        assert _cli(_argv(data, out)) == 0
    finally:
        gin_setup.parse = parse
    results = out / "results.jsonl"
    return {"data": data, "out": out, "text": results.read_text(encoding="utf-8"),
            "parsed": parsed}


def test_gin_is_parsed_once_per_run_the_files_describe(first_run):
    """INITIAL's files and the method's, once each when the run starts; the three trainings and
    the evaluations take typed configs (each MODEL_DIR's config.gin is its own run's)."""
    assert first_run["parsed"] == [
        ["initial.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
        ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
    ]


def test_first_run_writes_every_expected_result(first_run):
    from tw_jax.runtime import gin_setup

    data, out = first_run["data"], first_run["out"]
    lines = [json.loads(line) for line in first_run["text"].splitlines()]
    assert all(set(line) == {"method", "trained_through", "eval_month", "category", "metric",
                             "value"} for line in lines)
    counts = {m: _probe_counts(data, m) for m in MONTHS}
    assert counts["0809"]["deleted"] == 0 and counts["0910"]["deleted"] > 0  # demo data

    def probe_keys(method, trained, month):
        cats = {c for c, n in counts[month].items() if n} | {"changed"}
        return {(method, trained, month, c, metric) for c in cats
                for metric in ("ppl", "n_probes")}

    expected = (probe_keys("initial", "base", "0809") | probe_keys("initial", "base", "0910")
                | probe_keys("diff", "0809", "0809") | probe_keys("diff", "0910", "0910"))
    expected |= {(m, t, "-", "all", time)
                 for m, t in (("initial", "base"), ("diff", "0809"), ("diff", "0910"))
                 for time in ("train_seconds", "train_steps", "compile_seconds",
                              "train_tokens", "train_flops")}
    keys = [tuple(line[f] for f in ("method", "trained_through", "eval_month", "category",
                                    "metric")) for line in lines]
    assert len(keys) == len(expected) == 51
    assert set(keys) == expected
    assert all(line["value"] > 0 for line in lines)

    value = {k: line["value"] for k, line in zip(keys, lines, strict=True)}
    # each update changed the model: its scores differ from INITIAL's
    assert value[("diff", "0809", "0809", "unchanged", "ppl")] != value[
        ("initial", "base", "0809", "unchanged", "ppl")]
    # how many probes stand behind each number, and each update's steps
    for month in MONTHS:
        for category, n in counts[month].items():
            if n:
                assert value[("diff", month, month, category, "n_probes")] == n
        assert value[("diff", month, month, "changed", "n_probes")] == (
            counts[month]["updated"] + counts[month]["new"])
        assert value[("diff", month, "-", "all", "train_steps")] == 2
        # what the update cost: the same two steps of full LM blocks, the same FLOPs
        assert value[("diff", month, "-", "all", "train_tokens")] == value[
            ("diff", "0809", "-", "all", "train_tokens")]
        assert value[("diff", month, "-", "all", "train_flops")] == value[
            ("diff", "0809", "-", "all", "train_flops")]
        assert 0 < value[("diff", month, "-", "all", "compile_seconds")] <= value[
            ("diff", month, "-", "all", "train_seconds")]

    # the chain: INITIAL on the 08 snapshot, 0809 from INITIAL, 0910 from 0809
    checkpoints = out / "checkpoints"
    initial = _trained_by(checkpoints / "initial" / "08")
    assert initial.mixture_or_task_name == "twiki_full_08_{objective}"
    assert initial.model_dir == str(checkpoints / "initial" / "08")
    for month, start in (("0809", checkpoints / "initial" / "08"),
                         ("0910", checkpoints / "diff" / "0809")):
        update = _trained_by(checkpoints / "diff" / month)
        assert update.mixture_or_task_name == f"twiki_diffset_{month}_{{objective}}"
        assert (update.initial_checkpoint_path, update.train_steps) == (str(start), 2)
        # the file alone evaluates the run: it records the --data folder gin never saw
        assert gin_setup.macro("DATA_DIR") == str(data)


def test_scores_are_those_of_the_month_checkpoint(first_run):
    """Rescoring the 0910 checkpoint by hand gives the number in results.jsonl."""
    import gin
    from probe_oracle import probe_perplexities

    from tw_jax.evaluate.month_eval import read_probes
    from tw_jax.evaluate.runs import load_params
    from tw_jax.models.sharding import activate
    from tw_jax.runtime import gin_setup
    from tw_jax.runtime.run_model import build_run_model
    from tw_jax.tasks import LazyVocabulary
    from tw_jax.tasks.metrics import mean_perplexity

    data, out = first_run["data"], first_run["out"]
    gin_setup.parse(["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
                    ["MODEL_DIR='unused'", _model_binding(data)])
    config = gin.query_parameter("%MODEL").scoped_configurable_fn()
    run = build_run_model(config)
    vocabulary = LazyVocabulary("gpt2", str(data / "vocab" / "gpt2")).vocabulary
    rows = read_probes(str(data), Period.parse("0910"), "unchanged", MAX_PROBES)
    # CHANGED is its own task, UPDATED then NEW rows, and --max-probes takes the first N
    # examples of every task (seqio's num_examples)
    changed = (read_probes(str(data), Period.parse("0910"), "updated")
               + read_probes(str(data), Period.parse("0910"), "new"))[:MAX_PROBES]
    with activate(run.mesh):
        params, step = load_params(run, out / "checkpoints" / "diff" / "0910", None)
        expected = {c: mean_perplexity(probe_perplexities(run.module, params, vocabulary, r))
                    for c, r in (("unchanged", rows), ("changed", changed))}
    assert step == 2
    for category in ("unchanged", "changed"):
        found = [line["value"] for line in
                 (json.loads(text) for text in first_run["text"].splitlines())
                 if (line["method"], line["trained_through"], line["eval_month"],
                     line["category"], line["metric"]) == ("diff", "0910", "0910", category,
                                                           "ppl")]
        assert found == [pytest.approx(expected[category], rel=1e-6)]


def test_per_probe_scores_give_the_results_and_the_reports_marks(first_run, tmp_path):
    """Beside results.jsonl, each scored checkpoint and month has its per-probe scores; they
    average to the perplexities in results.jsonl exactly, pair INITIAL with DIFF probe by
    probe, and the report marks a cell exactly when the paired bootstrap says noise."""
    from tw_jax.evaluate.noise import bootstrap_within_noise
    from tw_jax.evaluate.per_probe import per_probe_path, read_file
    from tw_jax.evaluate.report_cli import build_report

    out = first_run["out"]
    lines = [json.loads(t) for t in first_run["text"].splitlines()]
    value = {tuple(line[f] for f in ("method", "trained_through", "eval_month", "category",
                                     "metric")): line["value"] for line in lines}
    checkpoints = {k[:3] for k in value if k[4] == "ppl"}
    assert len(checkpoints) == 4
    scores = {}
    for method, trained, month in checkpoints:
        found = read_file(per_probe_path(str(out), method, trained, month))
        assert {c for c, _ in found} == {k[3] for k in value
                                        if k[:3] == (method, trained, month) and k[4] == "ppl"}
        for (category, metric), s in found.items():
            key = (method, trained, month, category, metric)
            assert s.mean() == value[key]  # bit for bit
            assert len(s) == value[(*key[:4], "n_probes")]
            scores[key] = s
    marks = {}
    for month in MONTHS:
        for category in {k[3] for k in scores if k[2] == month}:
            diff, initial = (scores[(m, t, month, category, "ppl")]
                             for m, t in (("diff", month), ("initial", "base")))
            assert diff.pairs_with(initial)
            marks[(month, category)] = bootstrap_within_noise(diff.perplexities(),
                                                              initial.perplexities())
    build_report([str(out)], tmp_path / "report")
    table = (tmp_path / "report" / "table_ppl.md").read_text().splitlines()
    headers = [h.strip() for h in table[2].strip("|").split("|")]
    diff_row = [c.strip() for c in next(r for r in table if r.startswith("| DIFF |"))
                .strip("|").split("|")]
    labels = {"Un": "unchanged", "Up": "updated", "New": "new", "Del": "deleted",
              "Chg": "changed"}
    for header, cell in zip(headers[2:], diff_row[2:], strict=True):
        month, label = header.split()[:2]
        if label == "Avg":
            continue
        key = ("diff", month, month, labels[label], "ppl")
        if key not in value:  # 0809 has no DELETED probes
            assert cell == "-"
            continue
        assert cell == f"{value[key]:.2f}" + ("~" if marks[(month, labels[label])] else "")
    assert "paired bootstrap over the n probes" in "\n".join(table)


def test_rerun_adds_nothing_then_eval_matrix_completes_the_matrix(first_run):
    data, out = first_run["data"], first_run["out"]
    results = out / "results.jsonl"
    metrics = {p: p.read_bytes() for p in (out / "checkpoints").glob("*/*/metrics.jsonl")}
    assert len(metrics) == 3

    options = LifelongOptions(
        gin_files=["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
        gin_bindings=["TRAIN_STEPS=2", "BATCH_SIZE=2", "SCHEDULE='constant'",
                      _model_binding(data)],
        months=list(MONTHS), out_dir=out, data_dir=str(data), max_probes=MAX_PROBES,
    )
    summary = run_lifelong(options)
    assert (summary.trained, summary.evaluated, summary.appended) == ([], [], 0)
    assert results.read_text(encoding="utf-8") == first_run["text"]

    assert _cli(_argv(data, out, "--eval-matrix")) == 0
    lines = _lines(results)
    # 0809's checkpoint on 0910 (5 categories), 0910's on 0809 (4): ppl and n_probes each
    assert len(lines) == 51 + 2 * 9
    assert {p: p.read_bytes() for p in metrics} == metrics  # nothing was trained
    pairs = {(line["trained_through"], line["eval_month"]) for line in lines
             if line["method"] == "diff" and line["metric"] == "ppl"}
    assert pairs == {(t, e) for t in MONTHS for e in MONTHS}
    assert sum(line["metric"] == "train_seconds" for line in lines) == 3

    summary = run_lifelong(LifelongOptions(**{**options.__dict__, "eval_matrix": True}))
    assert (summary.trained, summary.appended) == ([], 0)


def test_bad_input_is_reported(first_run, tmp_path, capsys):
    data = first_run["data"]
    with pytest.raises(SystemExit) as stopped:  # the last --months wins: refused as it is read
        _cli(_argv(data, tmp_path / "o", "--months", "0809,1011"))
    assert stopped.value.code == 2 and "0809 then 1011" in capsys.readouterr().err
    options = LifelongOptions(gin_files=["diff.gin", "models/gpt2_tiny.gin",
                                         "runs/cpu_smoke.gin"],
                              months=["1112"], out_dir=tmp_path / "o", data_dir=str(data))
    with pytest.raises(LifelongError, match="1112: no data for 1112"):
        run_lifelong(options)
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_initial_alone_from_a_given_checkpoint(first_run, tmp_path):
    """``--gin_file=initial.gin`` with ``--initial-checkpoint``: no training, INITIAL scored on
    every month, with the numbers the first run got from the same checkpoint."""
    data, out = first_run["data"], tmp_path / "initial_only"
    given = first_run["out"] / "checkpoints" / "initial" / "08"
    argv = _argv(data, out, "--initial-checkpoint", str(given))
    argv[1] = "--gin_file=initial.gin"
    assert _cli(argv) == 0
    assert not (out / "checkpoints").exists()
    lines = _lines(out / "results.jsonl")
    first = [json.loads(t) for t in first_run["text"].splitlines()]
    expected = [line for line in first if line["method"] == "initial"
                and line["eval_month"] != "-"]
    assert len(lines) == len(expected) == 18
    assert sorted(lines, key=str) == sorted(expected, key=str)


def test_train_epochs_sizes_each_update_by_its_own_data(first_run, tmp_path, capsys):
    """``TRAIN_EPOCHS``: an update is ceil(examples · epochs / batch) steps over its own
    training set, packed blocks counted; Mix-Review's set is the DiffSet and its review data
    (TemporalWiki's mix-ratio 2: 2N old beside N new), so one pass is 3N examples. mixreview.gin
    sets TRAIN_EPOCHS = 1 itself; diff.gin (the first run) keeps TRAIN_STEPS."""
    import math

    from tw_jax.lifelong.runner import update_steps
    from tw_jax.runtime import task_data

    data, out = first_run["data"], tmp_path / "epochs"
    lengths = {"targets": 32}  # runs/cpu_smoke.gin
    blocks = {m: sum(1 for _ in task_data.task_dataset(
        f"twiki_diffset_{m}_lm", lengths, shuffle=False, num_epochs=1)) for m in MONTHS}
    assert all(n > 4 for n in blocks.values())
    n = blocks["0809"]
    assert update_steps("twiki_diffset_0809_lm", lengths, 2, 1.0) == math.ceil(n / 2)
    assert update_steps("twiki_diffset_0809_lm", lengths, 4, 2.5) == math.ceil(2.5 * n / 4)
    assert update_steps("twiki_mixreview_0809_lm", lengths, 2, 1.0) == math.ceil(3 * n / 2)

    # The runs below pass over whole training sets in batches of 8, not the first run's 2: a
    # step of the tiny model costs about the same at either size (its input pipeline and
    # dispatch), so a pass takes a quarter of the steps.
    batch = 8
    given = first_run["out"] / "checkpoints" / "initial" / "08"
    argv = _argv(data, out, "--initial-checkpoint", str(given), f"--gin.BATCH_SIZE={batch}")
    argv[1] = "--gin_file=mixreview.gin"
    assert _cli(argv) == 0
    for month in MONTHS:
        expected = math.ceil(3 * blocks[month] / batch)
        assert _trained_by(out / "checkpoints" / "mixreview" / month).train_steps == expected
        state = json.loads((out / "state" / "mixreview" / f"{month}.json").read_text())
        assert state["step"] == expected
    # The same through a binding, in passes of the DiffSet alone for DIFF.
    argv = _argv(data, tmp_path / "diff_epochs", "--initial-checkpoint", str(given),
                 "--months", "0809", "--gin.TRAIN_EPOCHS=2", f"--gin.BATCH_SIZE={batch}")
    assert _cli(argv) == 0
    update = _trained_by(tmp_path / "diff_epochs" / "checkpoints" / "diff" / "0809")
    assert update.train_steps == math.ceil(2 * n / batch)
    assert _cli(_argv(data, tmp_path / "bad", "--gin.TRAIN_EPOCHS=0")) == 2
    assert "TRAIN_EPOCHS must be a positive number of passes, got 0" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "checkpoints").exists()


def test_more_metric_groups_score_only_what_is_new(first_run, tmp_path):
    """A rerun asking for decoding, rank classification, proper-noun perplexity and
    light-tuning adds exactly those numbers and trains only the light-tuned copies."""
    data, out = first_run["data"], tmp_path / "out"
    shutil.copytree(first_run["out"], out)  # other tests may have added to it
    before = len(_lines(out / "results.jsonl"))
    argv = _argv(data, out, "--months", "0809", "--metrics", "ppl,qa,rank,propn,lighttune",
                 "--propn-instances", "8", "--propn-length", "64")
    assert _cli(argv) == 0
    added = _lines(out / "results.jsonl")[before:]
    counts = _probe_counts(data, "0809")
    categories = {c for c, n in counts.items() if n} | {"changed"}
    per_model = {(c, m) for c in categories for m in ("em", "f1", "lt_ppl", "lt_em", "lt_f1")}
    per_model |= {(c, m) for c in ("updated", "changed") for m in ("em_previous", "f1_previous")}
    per_model |= {("updated", "rank_acc"), ("updated", "rank_acc_norm"),
                  ("diffset", "propn_ppl_diffset"), ("nondiff", "propn_ppl_nondiff")}
    per_model |= {(c, "n_probes") for c in categories}  # recorded again with the new scores
    expected = {(m, t, "0809", c, metric) for m, t in (("initial", "base"), ("diff", "0809"))
                for c, metric in per_model}
    keys = [tuple(line[f] for f in ("method", "trained_through", "eval_month", "category",
                                    "metric")) for line in added]
    assert len(keys) == len(set(keys)) and set(keys) == expected
    value = dict(zip(keys, (line["value"] for line in added), strict=True))
    up, new = counts["updated"], counts["new"]
    for key, v in value.items():
        if key[4] == "n_probes":
            assert v == (up + new if key[3] == "changed" else counts[key[3]])
            continue
        assert (0 <= v <= 100) if key[4] in {"em", "f1", "em_previous", "f1_previous", "lt_em",
                                             "lt_f1", "rank_acc", "rank_acc_norm"} else v > 1
    for method, trained in (("initial", "base"), ("diff", "0809")):
        f1 = {c: value[(method, trained, "0809", c, "f1")] for c in ("updated", "new", "changed")}
        assert f1["changed"] == pytest.approx((up * f1["updated"] + new * f1["new"]) / (up + new))
    zero_shot = {tuple(line[f] for f in ("method", "trained_through", "eval_month", "category")):
                 line["value"] for line in _lines(out / "results.jsonl") if line["metric"] == "ppl"}
    for (method, trained, month, category, metric), v in value.items():
        if metric == "lt_ppl":  # light-tuning changed the model
            assert v != zero_shot[(method, trained, month, category)]
    tuned = out / "lighttuned" / "diff" / "0809" / "0809"
    lighttuning = _trained_by(tuned)
    # the copied state still names the first run's checkpoints
    trained = first_run["out"] / "checkpoints" / "diff" / "0809"
    assert lighttuning.initial_checkpoint_path == str(trained)
    assert lighttuning.mixture_or_task_name == "twiki_lighttuning_0809_all_object"
    assert lighttuning.model_config.freeze == "none"
    assert lighttuning.task_feature_lengths == {"inputs": 25, "targets": 25}
    assert list((out / "propn_blocks").glob("0809_diffset_8x64_*.npz"))

    assert _cli(argv) == 0  # everything asked for is there: nothing more
    assert len(_lines(out / "results.jsonl")) == before + len(added)


def test_an_interrupted_run_resumes_where_it_stopped(first_run, tmp_path, monkeypatch):
    """A run that dies while scoring the first update, rerun: INITIAL and that update are not
    trained again, and the results equal those of the run that was never interrupted."""
    from tw_jax.evaluate.results import read_results
    from tw_jax.lifelong import runner as lifelong

    data, out = first_run["data"], tmp_path / "out"
    options = LifelongOptions(
        gin_files=["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
        gin_bindings=["TRAIN_STEPS=2", "BATCH_SIZE=2", "SCHEDULE='constant'",
                      "tw_jax.train.train.progress=False", _model_binding(data)],
        months=list(MONTHS), out_dir=out, data_dir=str(data), max_probes=MAX_PROBES,
        eval_batch_size=16,
    )
    real, calls = lifelong.evaluate_month, []

    def dies_on_the_third_month(*args, **kwargs):
        calls.append(args[4])
        if len(calls) == 3:  # INITIAL scored 0809 and 0910; now DIFF 0809's checkpoint
            raise RuntimeError("simulated crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(lifelong, "evaluate_month", dies_on_the_third_month)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_lifelong(options)
    monkeypatch.setattr(lifelong, "evaluate_month", real)

    summary = run_lifelong(LifelongOptions(**options.__dict__))
    p0809, p0910 = (Period.parse(m) for m in MONTHS)
    assert summary.trained == [p0910]  # INITIAL and 0809 finished before the crash
    assert summary.evaluated == [(p0809, p0809), (p0910, p0910)]

    def aligned(key: tuple) -> bool:  # what a run without --eval-matrix writes
        return key[0] == "initial" or key[2] in (NO_MONTH, key[1])

    expected = {r.key: r.value for r in read_results([first_run["out"] / "results.jsonl"])
                if aligned(r.key)}
    found = {r.key: r.value for r in read_results([out / "results.jsonl"])}
    assert set(found) == set(expected)
    for key, value in found.items():
        if key[4] not in ("train_seconds", "compile_seconds"):  # wall clock
            assert value == pytest.approx(expected[key], rel=1e-6), key


def test_open_book_reads_initial_with_each_months_contexts(first_run, tmp_path, capsys):
    """``--method bm25``: no training; INITIAL reads each month's probes with the passages BM25
    found in that month's snapshot, recorded as trained through that month."""
    import gin
    from probe_oracle import probe_perplexities

    from tw_jax.evaluate.probe_contexts import write_probe_contexts
    from tw_jax.evaluate.runs import load_params
    from tw_jax.models.sharding import activate
    from tw_jax.preprocess.probes.probe_csv import read_probe_csv
    from tw_jax.retrieval import retriever_class
    from tw_jax.runtime import gin_setup
    from tw_jax.runtime.run_model import build_run_model
    from tw_jax.tasks import LazyVocabulary
    from tw_jax.tasks.metrics import mean_perplexity

    data, out = first_run["data"], tmp_path / "bm25"
    given = first_run["out"] / "checkpoints" / "initial" / "08"
    argv = _argv(data, out, "--initial-checkpoint", str(given), "--method", "bm25",
                 "--metrics", "ppl,rank")
    argv[1] = "--gin_file=initial.gin"
    assert _cli(argv) == 2  # no contexts yet: the command that writes them is named
    assert "tw-jax probe-contexts" in capsys.readouterr().err
    for month in MONTHS:
        write_probe_contexts(str(data), Period.parse(month), retriever_class("bm25")())
    assert _cli(argv) == 0
    assert "skipped bm25/rank: open book" in capsys.readouterr().out
    lines = _lines(out / "results.jsonl")
    book = [line for line in lines if line["method"] == "bm25"]
    assert {(line["trained_through"], line["eval_month"]) for line in book
            if line["metric"] != "train_seconds"} == {(m, m) for m in MONTHS}
    assert {line["metric"] for line in book} == {"ppl", "n_probes", "train_seconds"}
    # its Time: building each month's index
    assert sorted(line["trained_through"] for line in book
                  if line["metric"] == "train_seconds") == list(MONTHS)
    assert not (out / "checkpoints").exists()

    gin_setup.parse(["initial.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
                    ["MODEL_DIR='unused'", _model_binding(data)])
    run = build_run_model(gin.query_parameter("%MODEL").scoped_configurable_fn())
    vocabulary = LazyVocabulary("gpt2", str(data / "vocab" / "gpt2")).vocabulary
    rows = read_probe_csv(str(data / "0910" / "probes_bm25" / "unchanged.csv"))[:MAX_PROBES]
    assert all(row["context"] for row in rows)
    with activate(run.mesh):
        params, _ = load_params(run, given, None)
        expected = mean_perplexity(probe_perplexities(run.module, params, vocabulary, rows))
    value = {(line["method"], line["eval_month"], line["category"]): line["value"]
             for line in lines}
    assert value[("bm25", "0910", "unchanged")] == pytest.approx(expected, rel=1e-5)
    assert value[("bm25", "0910", "unchanged")] != value[("initial", "0910", "unchanged")]

    # the report puts the row next to the trained methods
    from tw_jax.evaluate.report_cli import build_report

    build_report([str(out), str(first_run["out"])], tmp_path / "report")
    table = (tmp_path / "report" / "table_ppl.md").read_text(encoding="utf-8")
    assert "| BM25 |" in table and "| DIFF |" in table and "BM25: open book" in table


def test_a_rerun_with_other_settings_is_refused_naming_each_difference(first_run, tmp_path,
                                                                       capsys):
    """A rerun resumes only the run its ``--out`` recorded: other training steps, another
    ``--max-probes`` or data rebuilt since are one line, nothing trained or appended."""
    data, out = first_run["data"], first_run["out"]
    before = (out / "results.jsonl").read_bytes()
    argv = [a.replace("--gin.TRAIN_STEPS=2", "--gin.TRAIN_STEPS=3") for a in _argv(data, out)]
    argv[argv.index("--max-probes") + 1] = "8"
    assert _cli(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"tw-jax lifelong: error: {out} holds a diff run with other settings "
                          "(training.train_steps '2' → '3'; max_probes 16 → 8): its recorded "
                          "updates are not this run's; use another --out")
    assert (out / "results.jsonl").read_bytes() == before

    copy = tmp_path / "data"
    shutil.copytree(data, copy, symlinks=True)
    stats = copy / "0910" / "probes" / "stats.json"
    stats.write_text(stats.read_text(encoding="utf-8").replace('"final": ', '"final": 1', 1),
                     encoding="utf-8")  # the probes rebuilt with other counts
    assert _cli(_argv(copy, out)) == 2
    err = capsys.readouterr().err
    assert "the data of 0910 (stats.json of its stages: rebuilt or replaced)" in err
    assert "the data of 0809" not in err


def test_results_no_lifelong_run_wrote_are_not_mixed_in(first_run, tmp_path, capsys):
    out = tmp_path / "foreign"
    out.mkdir()
    (out / "results.jsonl").write_text(first_run["text"], encoding="utf-8")
    assert _cli(_argv(first_run["data"], out)) == 2
    assert capsys.readouterr().err.strip() == (
        f"tw-jax lifelong: error: {out / 'results.jsonl'}: no lifelong run wrote it (no state/ "
        "beside it); give another --out so two runs' results do not mix")
