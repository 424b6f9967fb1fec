"""The report's opening figure, its colours, probe counts, noise marks and time split, from a
small synthetic results file."""

from __future__ import annotations

import json

import pytest

from tw_jax.cli import main
from tw_jax.evaluate.colours import METHOD_COLOURS, method_colours
from tw_jax.evaluate.noise import within_noise
from tw_jax.evaluate.plots import misalignment_panels, shared_scale
from tw_jax.evaluate.report import ResultIndex, probe_table
from tw_jax.evaluate.results import BASE, NO_MONTH, Result, append_results
from tw_jax.evaluate.summary import learned_kept, summary_table
from tw_jax.lifelong.state import UpdateState
from tw_jax.time import Period
from tw_jax.train.metrics_log import first_step_seconds

CATS = ("unchanged", "updated", "new", "changed")
P0809, P0910 = Period.parse("0809"), Period.parse("0910")
PPL = {  # (method, trained_through, month): Un, Up, New, Chg
    ("initial", BASE, "0809"): (400.0, 300.0, 200.0, 250.0),
    ("initial", BASE, "0910"): (200.0, 100.0, 400.0, 300.0),
    ("diff", "0809", "0809"): (440.0, 210.0, 150.0, 175.0),
    ("diff", "0910", "0910"): (210.0, 80.0, 240.0, 150.0),
    ("lora", "0809", "0809"): (396.0, 300.0, 200.0, 245.0),
}
F1 = {  # Un, Up: 1 of 21 UPDATED probes right is 4.76
    ("initial", BASE, "0809"): (2.0, 0.0),
    ("diff", "0809", "0809"): (3.0, 4.76),
    ("lora", "0809", "0809"): (40.0, 0.0),
}
N = {"unchanged": 400, "updated": 21, "new": 19, "changed": 40}


def _results(counted: bool = True) -> list[Result]:
    out = [Result(m, t, month, c, "ppl", v) for (m, t, month), values in PPL.items()
           for c, v in zip(CATS, values, strict=True)]
    out += [Result(m, t, month, c, "f1", v) for (m, t, month), values in F1.items()
            for c, v in zip(CATS, values, strict=False)]
    if counted:
        out += [Result(m, t, month, c, "n_probes", float(N[c])) for (m, t, month) in PPL
                for c in CATS]
    out += [Result("diff", "0809", NO_MONTH, "all", "train_seconds", 40.0),
            Result("diff", "0910", NO_MONTH, "all", "train_seconds", 20.0),
            Result("diff", "0809", NO_MONTH, "all", "train_steps", 28.0),
            Result("diff", "0910", NO_MONTH, "all", "train_steps", 26.0),
            Result("diff", "0809", NO_MONTH, "all", "compile_seconds", 14.0),
            Result("diff", "0910", NO_MONTH, "all", "compile_seconds", 10.0)]
    return out


def test_learned_against_kept_per_method_and_month():
    points = learned_kept(ResultIndex(_results()))
    assert points == [
        ("diff", P0809, pytest.approx(-30.0), pytest.approx(10.0)),  # 175/250, 440/400
        ("diff", P0910, pytest.approx(-50.0), pytest.approx(5.0)),   # 150/300, 210/200
        ("lora", P0809, pytest.approx(-2.0), pytest.approx(-1.0)),   # 245/250, 396/400
    ]


def test_one_colour_per_method_in_every_figure():
    assert METHOD_COLOURS["initial"] == "#7f7f7f"
    assert method_colours(["diff", "lora"]) == {"diff": "#ff7f0e", "lora": "#9467bd"}
    # TiC-LM's methods have fixed colours of their own; a method outside the table the next
    # free one.
    assert method_colours(["ewc", "lwf", "replay"]) == {
        "ewc": "#393b79", "lwf": "#637939", "replay": "#843c39"}
    assert method_colours(["lora", "mine", "diff", "ours"]) == {
        "lora": "#9467bd", "mine": "#aec7e8", "diff": "#ff7f0e", "ours": "#ffbb78"}


def test_misalignment_panels_share_one_colour_scale():
    panels = misalignment_panels(ResultIndex(_results()), "changed")
    assert [(m, trained, evaluated, grid) for m, trained, evaluated, grid in panels] == [
        ("diff", [P0809, P0910], [P0809, P0910], [[175.0, None], [None, 150.0]]),
        ("lora", [P0809], [P0809, P0910], [[245.0, None]]),
    ]
    assert shared_scale(panels) == (150.0, 245.0)  # LoRA's 245 is as light as it is anywhere


def test_noise_interval_of_two_rates():
    # 1 of 21 against 0 of 21: p~ = 2/23 and 1/23, spread sqrt((2/23·21/23 + 1/23·22/23)/23)
    assert within_noise(4.76, 21, 0.0, 21)
    assert within_noise(3.0, 400, 2.0, 400)  # 12 vs 8 of 400
    assert not within_noise(40.0, 400, 2.0, 400)
    assert not within_noise(60.0, 20, 0.0, 20)


def test_tables_show_n_marks_noise_and_split_time():
    index = ResultIndex(_results())
    table = probe_table(index, "f1")
    assert table.headers == ["Method", "Time", "0809 Un (n=400)", "0809 Up (n=21)"]
    assert table.rows == [
        ["INITIAL", "0 h", "2.00", "0.00"],
        ["DIFF", "18 s train + 12 s compile (27 steps)", "3.00~", "4.76~"],  # means of two updates
        ["LORA", "-", "40.00", "0.00~"],
    ]
    assert table.notes[-1].startswith("n = probes behind each column. ~ marks a score whose "
                                      "difference to INITIAL's is within sampling noise")
    ppl = probe_table(index, "ppl")
    assert ppl.headers[2:7] == ["0809 Un (n=400)", "0809 Up (n=21)", "0809 New (n=19)",
                                "0809 Chg (n=40)", "0809 Avg"]
    assert ppl.rows[1][2:4] == ["440.00", "210.00"]  # perplexity: never marked
    assert "Perplexity cells are not tested against sampling noise" in ppl.notes[2]
    summary = summary_table(index)
    assert summary.headers[2:4] == ["Un (kept, n=400)", "Chg (learned, n=40)"]

    old = ResultIndex(_results(counted=False))
    assert probe_table(old, "f1").headers[2] == "0809 Un"
    assert probe_table(old, "f1").rows[1][3] == "4.76"
    assert probe_table(old, "f1").notes[-1].startswith("n: these results do not record")


def test_report_opens_with_the_learned_kept_figure(tmp_path, capsys):
    append_results(tmp_path / "run", _results())
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")]) == 0
    assert "(9 tables, 3 figures)" not in capsys.readouterr().out
    report = (tmp_path / "report" / "report.md").read_text()
    lines = report.splitlines()
    assert lines[4].startswith("Each point is one method's model after its update through a "
                               "month, against INITIAL")
    assert lines[6] == "![fig1_learned_kept](fig1_learned_kept.png)"
    assert report.index("![fig1_learned_kept]") < report.index("### Summary")
    for stem in ("fig4_probe_average", "fig5_misalignment"):
        before = report[:report.index(f"![{stem}]")].rstrip().splitlines()[-1]
        assert before and not before.startswith(("!", "|", "#", "-"))  # a sentence above it
    png = (tmp_path / "report" / "fig1_learned_kept.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def test_time_split_recorded_per_update(tmp_path):
    model_dir = tmp_path / "diff" / "0910"
    model_dir.mkdir(parents=True)
    lines = [{"step": 11, "step_time": 12.5}, {"step": 20, "step_time": 0.1}]
    (model_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert first_step_seconds(model_dir, 10) == 12.5
    assert first_step_seconds(model_dir, 0) is None
    assert first_step_seconds(tmp_path / "none", 0) is None
    state = UpdateState("m", train_seconds=30.0, step=28, resumed_from_step=10,
                        compile_seconds=12.5)
    period = Period.parse("0910")
    assert [(r.metric, r.value, r.trained_through, r.eval_month)
            for r in state.time_results("diff", period)] == [
        ("train_seconds", 30.0, period, NO_MONTH), ("train_steps", 18.0, period, NO_MONTH),
        ("compile_seconds", 12.5, period, NO_MONTH)]
    assert [r.metric for r in UpdateState("m", train_seconds=3.0).time_results("bm25", period)
            ] == ["train_seconds"]
