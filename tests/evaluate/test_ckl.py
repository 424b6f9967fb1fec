"""CKL's evaluation end to end with a tiny T5 on CPU: ``tw-jax ckl eval`` (a Hugging Face folder
and a MODEL_DIR that ``tw-jax ckl train`` continued from it), the phases folder the lifelong
runner reads, ``tw-jax ckl eval-phases``, and CKL Table 2 with FUAR from the results."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tw_jax.benchmarks import ckl_cli
from tw_jax.benchmarks.ckl_eval import CklEvalConfig, chosen_tasks, evaluate
from tw_jax.cli_parser import OneLineErrorParser
from tw_jax.errors import UsageError
from tw_jax.evaluate import ckl
from tw_jax.evaluate.fuar import single_phase_fuar
from tw_jax.evaluate.results import Result, append_results, read_results
from tw_jax.tasks import metrics

IL = [[0, "Barack Obama was born in <extra_id_0> .", "Honolulu"],
      [1, "The capital of France is <extra_id_0> .", "Paris"]]
# Short statements: with the tiny vocabulary every input fits one 32-token bucket, so each
# model decodes with two compiled graphs (4 and 10 new tokens).
UL = [["u1", "<extra_id_0> leads England.", "Boris Johnson"]]
UL_ANSWERS = {"u1": [{"old": ["Theresa May"], "new": ["Boris Johnson", "Johnson"]}]}
NL = [["n1", "<extra_id_0> owns Marvel.", "Disney"]]
NLE = [["e1", "Lazard hurt his <extra_id_0> .", "knee"],
       ["e2", "They study at <extra_id_0> .", "Howard University"]]
NLE_ANSWERS = {"e1": ["knee", "a knee"], "e2": ["Howard University"]}
NEWS = [["<extra_id_0> won the election.", "<extra_id_0> Joe Biden", "Joe Biden won."],
        ["Paris is in <extra_id_0>.", "<extra_id_0> France", "Paris is in France."]]
HEADERS = {"invariantLAMA": ["id", "input", "output"],
           "updatedLAMA": ["unique_id", "statement", "new_answer"]}
NEW_HEADER = ["unique_id", "statement", "answer"]


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _write_release(root: Path) -> None:
    _write_csv(root / "invariantLAMA.csv", HEADERS["invariantLAMA"], IL)
    _write_csv(root / "updatedLAMA.csv", HEADERS["updatedLAMA"], UL)
    (root / "updatedlama_val_answers.json").write_text(json.dumps(UL_ANSWERS))
    _write_csv(root / "newLAMA.csv", NEW_HEADER, NL)
    _write_csv(root / "newLAMA_easy.csv", NEW_HEADER, NLE)
    _write_csv(root / "newLAMA_easy_small_split1.csv", NEW_HEADER, NLE[:1])
    _write_csv(root / "newLAMA_easy_small_split2.csv", NEW_HEADER, NLE[1:])
    (root / "recentlama_val_answers.json").write_text(json.dumps(NLE_ANSWERS))
    for name, rows in (("recent_news_small", NEWS), ("recent_news_small1", NEWS[:1]),
                       ("recent_news_small2", NEWS[1:])):
        _write_csv(root / f"{name}.csv", ["input", "output", "original"], rows)


def _tiny_gin(path: Path, vocab) -> Path:
    """CKL's gin with the tiny model of the Hugging Face folder and a CPU run."""
    fields = dict(vocab_size=vocab.vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                  num_heads=4, relative_attention_num_buckets=8, dropout_rate=0.0,
                  eos_token_id=vocab.eos_id)
    lines = ["include 'ckl.gin'", "include 'runs/cpu_smoke.gin'"]
    lines += [f"tw_jax.models.T5Config.{k} = {v!r}" for k, v in fields.items()]
    # freeze None (no variant: everything trains) keeps the config equal to the one read from
    # the Hugging Face folder, so both decode with the same compiled graphs.
    lines += ["tw_jax.models.ModelSettings.freeze = None", "INPUTS_LENGTH = 32",
              "TARGETS_LENGTH = 16", "BATCH_SIZE = 2", "tw_jax.train.train.progress = False"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory, compile_cache) -> dict:
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    from tw_jax.data.vocab_training import train_sentencepiece
    from tw_jax.data.vocabularies import t5_vocabulary
    from tw_jax.models.t5 import T5, T5Config
    from tw_jax.models.t5_io import save_t5

    root = tmp_path_factory.mktemp("ckl_eval")
    _write_release(root / "data")
    texts = [" ".join(str(c) for r in rows for c in r) for rows in (IL, UL, NL, NLE, NEWS)]
    spiece = train_sentencepiece(texts * 20, root / "spiece", hard_vocab_limit=False)
    vocab = t5_vocabulary(spiece)
    config = T5Config(vocab_size=vocab.vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                      num_heads=4, relative_attention_num_buckets=8, dropout_rate=0.0,
                      eos_token_id=vocab.eos_id)
    dummy = jnp.zeros((1, 8), jnp.int32)
    params = nn.unbox(jax.jit(T5(config).init)(jax.random.key(0), dummy, dummy)["params"])
    save_t5(root / "t5", config, params)
    shutil.copyfile(spiece, root / "t5" / "spiece.model")  # `ckl eval --model` finds it there
    return {"root": root, "data": root / "data", "hf": root / "t5", "spiece": str(spiece),
            "gin": _tiny_gin(root / "tiny.gin", vocab)}


def _cli(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="tw-jax")
    ckl_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ckl", *argv])
    return args.func(args)


def _keys(path: Path) -> set[tuple]:
    """The results' keys, the periods by their names (``0001``)."""
    return set(_values(path))


def _values(path: Path) -> dict[tuple, float]:
    return {(r.method, str(r.trained_through), str(r.eval_month), r.category, r.metric): r.value
            for r in read_results([path])}


def test_which_model_is_recorded_on_invariant_lama():
    assert [ckl.scored_here(0, i, "unchanged") for i in (1, 2, 3)] == [True] * 3
    assert [ckl.scored_here(2, i, "unchanged") for i in (1, 2, 3)] == [True, True, False]
    assert [ckl.scored_here(1, i, "unchanged") for i in (1, 2)] == [True, False]
    assert all(ckl.scored_here(1, i, "new") for i in (1, 2, 3))


def test_table_2_and_the_phases_fuar_from_results(tmp_path):
    """CKL Table 2's T5-Vanilla row; then two phases recorded by eval-phases' rule, whose FUAR
    is CKL eq. 1 with T^F_0 = IL and T^A_i = the phase's set."""
    rows = [("initial", "base", 24.17, 1.62, 1.88, 10.32), ("vanilla", "0001", 12.89, 10.17,
                                                             3.77, 17.75)]
    append_results(tmp_path / "one", [
        Result(m, t, "0001", c, "em", v) for m, t, *values in rows
        for c, v in zip(("unchanged", "updated", "new", "new_easy"), values, strict=True)])
    assert "| VANILLA | 12.89 | 10.17 | 3.77 | 17.75 | 1.08 |" in ckl.ckl_table_text(
        tmp_path / "one")

    il = {0: 24.0, 1: 20.0, 2: 18.0}  # IL EM of the base model and after each phase
    new = {1: {0: 8.0, 1: 12.0, 2: 10.0}, 2: {0: 9.0, 1: 9.5, 2: 13.0}}  # NLE_Pi by model
    trained = {0: "base", 1: "0001", 2: "0102"}
    results = []
    for k in (0, 1, 2):
        method = "initial" if k == 0 else "vanilla"
        for i, pair in ((1, "0001"), (2, "0102")):
            if ckl.scored_here(k, i, "unchanged"):
                results.append(Result(method, trained[k], pair, "unchanged", "em", il[k]))
            results.append(Result(method, trained[k], pair, "new", "em", new[i][k]))
    append_results(tmp_path / "two", results)
    # FUAR = [(24 - 20) + (24 - 18)] / [(12 - 8) + (13 - 9.5)] = 10 / 7.5
    assert "| VANILLA | 18.00 | 13.00 | 1.33 |" in ckl.ckl_table_text(tmp_path / "two")


def test_every_accepted_answer_counts(setup, monkeypatch):
    from tw_jax.tasks.ckl import register_ckl

    register_ckl(setup["data"], setup["spiece"], group="ckl_planted")
    planted = {"ckl_updated_lama": ["Johnson"], "ckl_new_lama_easy": ["A knee!", "howard  university"],
               "ckl_invariant_lama": ["Honolulu", "Lyon"]}
    current: list[str] = []
    monkeypatch.setattr(ckl, "decode_token_rows", lambda *a, **k: list(current))
    scores = {}
    for task, predictions in planted.items():
        current[:] = predictions
        scores[task] = ckl.evaluate_task(None, None, task).values
    assert scores["ckl_updated_lama"] == {"em": 100.0, "f1": 100.0, "em_previous": 0.0,
                                          "f1_previous": 0.0}
    assert scores["ckl_new_lama_easy"]["em"] == 100.0
    assert scores["ckl_invariant_lama"]["em"] == 50.0
    current[:] = ["Theresa May"]
    assert ckl.evaluate_task(None, None, "ckl_updated_lama").values["em_previous"] == 100.0


@pytest.fixture(scope="module")
def trained(setup) -> Path:
    """``ckl train`` continuing the Hugging Face model: 1 epoch of 2 examples at batch 2."""
    model_dir = setup["root"] / "vanilla"
    assert _cli(["train", "--data", str(setup["data"]), f"--gin_file={setup['gin']}",
                 f"--gin.MODEL_DIR={model_dir}", f"--gin.INITIAL_CHECKPOINT_PATH={setup['hf']}",
                 "--vocab", setup["spiece"], "--epochs", "1"]) == 0
    assert (model_dir / "checkpoints" / "1").is_dir()
    return model_dir


def test_eval_a_folder_then_a_trained_model(setup, trained, tmp_path, capsys):
    out, predictions = tmp_path / "out", tmp_path / "predictions"
    assert _cli(["eval", "--data", str(setup["data"]), "--out", str(out), "--model",
                 str(setup["hf"]), "--predictions", str(predictions)]) == 0
    sets = {"unchanged": "ckl_invariant_lama", "updated": "ckl_updated_lama",
            "new": "ckl_new_lama", "new_easy": "ckl_new_lama_easy"}
    expected = {("initial", "base", "0001", c, m) for c in sets for m in ("em", "f1")}
    expected |= {("initial", "base", "0001", "updated", m) for m in ("em_previous", "f1_previous")}
    assert _keys(out) == expected
    # EM is SQuAD EM of the written predictions against every accepted answer
    answers = {"ckl_invariant_lama": [[r[2]] for r in IL], "ckl_new_lama": [[r[2]] for r in NL],
               "ckl_updated_lama": [UL_ANSWERS["u1"][0]["new"]],
               "ckl_new_lama_easy": [NLE_ANSWERS[r[0]] for r in NLE]}
    values = _values(out)
    for category, task in sets.items():
        lines = (predictions / f"initial.base.{task}.jsonl").read_text().splitlines()
        predicted = [json.loads(line)["prediction"] for line in lines]
        assert values[("initial", "base", "0001", category, "em")] == pytest.approx(
            metrics.squad(answers[task], predicted)["em"])

    assert _cli(["eval", "--data", str(setup["data"]), "--out", str(out), "--model-dir",
                 str(trained), f"--gin_file={setup['gin']}", "--method", "vanilla",
                 "--vocab", setup["spiece"]]) == 0
    printed = capsys.readouterr().out
    assert "ckl_invariant_lama (unchanged, 2 probes): em=" in printed
    values = _values(out)
    get = {t: {c: values[(m, t, "0001", c, "em")] for c in sets}
           for m, t in (("initial", "base"), ("vanilla", "0001"))}
    fuar = single_phase_fuar(get["base"], get["0001"])
    row = [line for line in printed.splitlines() if line.startswith("| VANILLA |")]
    assert row and row[0].endswith(f"| {fuar} |")
    assert "| INITIAL |" in printed and "| Method | IL EM | UL EM | NL EM | NLE EM | FUAR |" in printed


def test_eval_reports_bad_arguments(setup, tmp_path, capsys):
    base = ["eval", "--data", str(setup["data"]), "--out", str(tmp_path), "--model",
            str(setup["hf"])]
    assert _cli([*base, "--tasks", "ckl_nope"]) == 2
    assert "no probe task ['ckl_nope']" in capsys.readouterr().err
    assert _cli([*base, "--tasks", "ckl_new_lama_easy,ckl_new_lama_easy_small_split1"]) == 2
    assert "share a results category" in capsys.readouterr().err
    assert _cli([*base, "--tasks", "ckl_new_lama_easy:newest"]) == 2
    assert "categories unchanged, updated, new, new_easy" in capsys.readouterr().err
    assert _cli([*base, "--method", "Vanilla X"]) == 2
    assert "not a lower-case name" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # the path type's one-line argparse error
        _cli(["eval", "--data", str(tmp_path / "none"), "--out", str(tmp_path), "--model",
              str(setup["hf"])])
    assert stopped.value.code == 2
    assert "--data: " + str(tmp_path / "none") + ": no such file or folder" in (
        capsys.readouterr().err)
    assert not (tmp_path / "results.jsonl").exists()


def test_eval_is_a_python_function_the_command_calls(setup, tmp_path, capsys):
    """A notebook or a sweep calls what ``tw-jax ckl eval`` runs: the same settings as a config
    give the command's results."""
    echoed: list[str] = []
    outcome = evaluate(CklEvalConfig(data=str(setup["data"]), out=str(tmp_path / "py"),
                                     model=str(setup["hf"]),
                                     tasks={"ckl_updated_lama": "", "ckl_new_lama_easy": "new"}),
                       echo=echoed.append)
    assert [s.name for s in outcome.scored] == ["ckl_updated_lama", "ckl_new_lama_easy"]
    assert [s.category for s in outcome.scored] == ["updated", "new"]
    assert echoed[0].startswith("ckl_updated_lama (updated, 1 probes): em=")
    assert outcome.results_path == str(tmp_path / "py" / "results.jsonl")
    assert _cli(["eval", "--data", str(setup["data"]), "--out", str(tmp_path / "cli"), "--model",
                 str(setup["hf"]), "--tasks", "ckl_updated_lama,ckl_new_lama_easy:new"]) == 0
    assert _values(tmp_path / "py") == _values(tmp_path / "cli")
    assert len(_values(tmp_path / "py")) == len(outcome.results) == 6
    with pytest.raises(UsageError, match="not a lower-case name"):
        evaluate(CklEvalConfig(data=str(setup["data"]), out=str(tmp_path / "x"),
                               model=str(setup["hf"]), method="Vanilla X"))
    assert not (tmp_path / "x").exists()


def test_cli_helpers():
    present = {"ckl_invariant_lama": "unchanged", "ckl_new_lama_easy": "new_easy"}
    asked = ckl_cli._task_categories("ckl_invariant_lama, ckl_new_lama_easy:new")
    assert asked == {"ckl_invariant_lama": "", "ckl_new_lama_easy": "new"}
    config = CklEvalConfig(data="D", out="O", tasks=asked)
    assert chosen_tasks(config, present) == {"ckl_invariant_lama": "unchanged",
                                             "ckl_new_lama_easy": "new"}
    assert ckl_cli._csv("a.csv,-, b.csv") == ["a.csv", None, "b.csv"]


def test_epochs_become_steps_with_mix_reviews_old_data():
    import gin

    gin.clear_config()  # no preset bound: CKL's own, N * 4 * 0.7^e old examples in epoch e
    assert ckl_cli._epoch_examples(4, 10, mixreview=False) == 40
    # M_e = floor(10 * 4 * 0.7^e): 40, 28, 19, 13
    assert ckl_cli._epoch_examples(4, 10, mixreview=True) == 40 + 40 + 28 + 19 + 13
    assert ckl_cli._epoch_examples(1.5, 10, mixreview=True) == 50 + 0.5 * 38
    gin.parse_config(["tw_jax.tasks.MixReviewSchedule.preset = 'ckl_code'"])
    try:  # the reference code's 4N every epoch
        assert ckl_cli._epoch_examples(4, 10, mixreview=True) == 4 * 50
    finally:
        gin.clear_config()


@pytest.fixture(scope="module")
def phases(setup) -> Path:
    out = setup["root"] / "phases"
    assert _cli(["phases", "--data", str(setup["data"]), "--out", str(out), "--corpus",
                 "recent_news_small1.csv,recent_news_small2.csv", "--new",
                 "newLAMA_easy_small_split1.csv,newLAMA_easy_small_split2.csv", "--updated",
                 "updatedLAMA.csv,-", "--vocab", setup["spiece"]]) == 0
    return out


def test_the_phases_folder_is_what_the_runner_reads(phases):
    from tw_jax.evaluate.month_eval import read_probes
    from tw_jax.lifelong.runner import check_months, training_task
    from tw_jax.models import T5Config, model_for
    from tw_jax.preprocess.probes.probe_csv import masked_cloze
    from tw_jax.runtime import task_data
    from tw_jax.tasks import register_all
    from tw_jax.time import Period

    manifest = json.loads((phases / "ckl_phases.json").read_text())
    assert [p["pair"] for p in manifest["phases"]] == [
        p.name for p in check_months(["0001", "0102"])]
    assert manifest["phases"][1]["sets"] == {
        "unchanged": "ckl_invariant_lama", "updated": None,
        "new": "ckl_new_lama_easy_small_split2", "new_easy": None}
    names = register_all(phases)
    for month in ("0001", "0102"):
        assert training_task("vanilla", Period.parse(month)).format(objective="ssm") in names
        assert {f"twiki_probes_{month}_{c}_ssm_cloze" for c in ("unchanged", "new")} <= set(names)
    news = list(task_data.task_dataset("twiki_diffset_0102_ssm", {"inputs": 32, "targets": 16},
                                  shuffle=False, num_epochs=1).as_numpy_iterator())
    vocabulary = task_data.vocabulary("twiki_diffset_0102_ssm")
    assert [vocabulary.decode(e["targets"].tolist()) for e in news] == [NEWS[1][1]]

    new = read_probes(str(phases), Period.parse("0102"), "new")
    assert [(r["subject"], r["object"], masked_cloze(r)) for r in new] == [
        ("NewLAMA-Easy", "Howard University", NLE[1][1])]
    updated = read_probes(str(phases), Period.parse("0001"), "updated")
    assert updated[0]["previous_object"] == "Theresa May"
    assert read_probes(str(phases), Period.parse("0102"), "updated") == []
    # ppl_cloze on T5: the answer given the statement as CKL wrote it
    example = model_for(T5Config()).probe_example(vocabulary, new[0], "cloze")
    assert vocabulary.decode(list(example.inputs[:-1])) == NLE[1][1]


def test_eval_phases_scores_every_checkpoint(setup, trained, phases, tmp_path, capsys):
    """A lifelong run's state (INITIAL the Hugging Face folder, both phases the trained model),
    scored by ``eval-phases``: InvariantLAMA by the rule, every other set by every model."""
    out = tmp_path / "lifelong"
    for method, through, model_dir in (("initial", "base", setup["hf"]),
                                       ("vanilla", "0001", trained), ("vanilla", "0102", trained)):
        state = out / "state" / method / f"{through}.json"
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps({"model_dir": str(model_dir), "evaluated": []}))
    assert _cli(["eval-phases", f"--gin_file={setup['gin']}", "--method", "vanilla",
                 f"--initial-gin-file={setup['gin']}", "--data", str(phases),
                 "--lifelong", str(out)]) == 0
    models = (("initial", "base", 0), ("vanilla", "0001", 1), ("vanilla", "0102", 2))
    expected = set()
    for method, through, k in models:
        for i, pair in ((1, "0001"), (2, "0102")):
            if ckl.scored_here(k, i, "unchanged"):
                expected |= {(method, through, pair, "unchanged", m) for m in ("em", "f1")}
            expected |= {(method, through, pair, "new", m) for m in ("em", "f1")}
        expected |= {(method, through, "0001", "updated", m) for m in ckl.METRICS}
    assert _keys(out) == expected
    values = _values(out)
    # both phases are the same checkpoint here: the same scores on the same set
    for category in ("unchanged", "new", "updated"):
        assert values[("vanilla", "0001", "0001", category, "em")] == values[
            ("vanilla", "0102", "0001", category, "em")]
    printed = capsys.readouterr().out
    assert "| Method | IL EM | UL EM | NL EM | FUAR |" in printed and "| VANILLA |" in printed


def test_eval_phases_needs_the_runs_state(setup, phases, tmp_path, capsys):
    from tw_jax.errors import DumpError

    with pytest.raises(DumpError, match="no initial checkpoint through base"):
        _cli(["eval-phases", f"--gin_file={setup['gin']}", "--data", str(phases),
              "--lifelong", str(tmp_path)])


def test_a_model_that_fills_no_spans_is_refused_before_its_checkpoint_is_read(tmp_path):
    """CKL's probe tasks are T5's salient-span masking: a GPT-2 run is one line naming why,
    from the shared loader, before the (here absent) checkpoint is looked for."""
    from tw_jax.evaluate import ckl

    source = ckl.ModelSource(model_dir=str(tmp_path / "no_checkpoint"),
                             gin_files=["diff.gin", "models/gpt2_tiny.gin"],
                             gin_bindings=["MODEL_DIR='unused'"])
    with pytest.raises(ValueError) as refused, ckl.loaded_model(source):
        pass
    assert str(refused.value) == (
        "the gin files: CKL's probe tasks (salient span masking; GPT-2 is light-tuned first, "
        "CKL App. G) are for a model of objective 'ssm', not 'lm' (GPT2Config)")
