"""EvolvingQA evaluation: EM/F1 against updated and outdated answers, the teacher-forced
multiple choice (Appendix D), the results mapping, train → eval end to end on CPU, and open-book
eval (BM25 and DPR retrieval on the sample world) beside closed book in `tw-jax report`."""

from __future__ import annotations

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from eqa_world import build_eqa_world, tiny_dpr_encoders
from eval_helpers import set_unigram

from tw_jax.benchmarks import evolvingqa_cli
from tw_jax.benchmarks.evolvingqa_eval import (
    EvalConfig,
    OpenBook,
    RetrieveConfig,
    evaluate,
    retrieve,
)
from tw_jax.cli import main
from tw_jax.cli_parser import OneLineErrorParser
from tw_jax.errors import UsageError
from tw_jax.evaluate import evolvingqa as eqa
from tw_jax.evaluate.rank import RankItem
from tw_jax.models import scoring
from tw_jax.retrieval.recall import first_hit, has_answer


def _cli(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="tw-jax")
    evolvingqa_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_rank_scores_each_answer_as_the_plain_target(random_t5, t5_vocab):
    model, params = random_t5
    item = RankItem("Who coaches Real Graltport?", ("Stano Wevton", "Buel Vosling"), gold=0)
    result = eqa.qa_rank_classify(model, params, t5_vocab, [item])
    inputs = jnp.asarray([[*t5_vocab.encode(item.prompt), t5_vocab.eos_id]])
    expected = []
    for candidate in item.candidates:
        target = t5_vocab.encode(candidate)
        log_probs = scoring.seq2seq_log_likelihoods(
            model, params, inputs, jnp.asarray([[*target, t5_vocab.eos_id]]))
        expected.append(float(np.asarray(log_probs)[0, : len(target)].sum()))
    np.testing.assert_allclose(result.summed[0], expected, rtol=1e-4)
    assert result.accuracy == (100.0 if expected[0] > expected[1] else 0.0)
    rows = [{"question": "q", "answer1": "The 17th.", "answer2": "17th"},
            {"question": "q", "answer1": "16th", "answer2": "17th"}]
    assert eqa.qa_rank_items(rows) == [RankItem("q", ("17th", "16th"), 0)]


def test_a_model_that_always_says_paris(unigram_gpt2, gpt2_vocab):
    model, params, _ = unigram_gpt2
    (paris,) = gpt2_vocab.encode(" Paris")
    params, _ = set_unigram(params, {paris: -0.01}, params["wte"]["embedding"].shape[0])
    unchanged = [{"question": "What is the capital of France?", "answer": "Paris"},
                 {"question": "What is the capital of England?", "answer": "London"}]
    edited = [{"question": "Where is the summit?", "answer1": "London", "answer2": "Paris"},
              {"question": "Where is the fair?", "answer1": "Paris", "answer2": "London"}]
    sets = [eqa.score_set(model, params, gpt2_vocab, "unchanged", unchanged, max_new_tokens=1),
            eqa.score_set(model, params, gpt2_vocab, "edited", edited, max_new_tokens=1)]
    assert sets[0].predictions == ["Paris", "Paris"]
    assert sets[0].values == {"em": 50.0, "f1": 50.0}
    assert sets[1].values == {"em": 50.0, "f1": 50.0, "em_previous": 50.0, "f1_previous": 50.0,
                              "rank_acc": 50.0, "rank_acc_norm": 50.0}
    results = eqa.to_results("full", "0809", "0809", sets)
    assert {(r.category, r.metric) for r in results} == {
        ("unchanged", "em"), ("unchanged", "f1"), ("updated", "em"), ("updated", "f1"),
        ("updated", "em_previous"), ("updated", "f1_previous"), ("updated", "rank_acc"),
        ("updated", "rank_acc_norm")}
    for result in results:
        result.validate()
    table = eqa.format_table(sets)
    assert "Outdated        2   50.00   50.00" in table
    assert "updated 50.00% / outdated 50.00% (summed log-likelihood)" in table
    with pytest.raises(ValueError, match="unknown EvolvingQA set"):
        eqa.score_set(model, params, gpt2_vocab, "changed", unchanged)


QA_FILES = {
    "unchanged_train.csv": "question,answer\n" + "".join(
        f"What is the population of Town{i}?,{1000 + i}\n" for i in range(6)),
    "unchanged_eval.csv": "question,answer\nWho directed Silent Islands?,Zelel Wernton\n",
    "new_0809.csv": "question,answer\nWhom did Bordling marry?,Meel Dreirdstad\n",
    "edited_0809.csv": "question,answer1,answer2\n"
                       "Who coaches Real Graltport?,Buel Vosling,Stano Wevton\n"
                       "What is the population of Dravminster?,23865,24042\n",
}
# t5_tiny cut to one layer, the test vocabulary's size and short sequences: compiles fast.
TINY = ["--gin_file=models/t5_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
        "--gin.tw_jax.models.T5Config.num_layers=1", "--gin.tw_jax.models.T5Config.vocab_size=1152",
        "--gin.INPUTS_LENGTH=16", "--gin.TARGETS_LENGTH=8",
        "--gin.tw_jax.train.train.progress=False", "--gin.CHECKPOINT_PERIOD=100"]
MODEL = TINY[:6]


def test_qa_fine_tuning_then_evaluation_end_to_end(tmp_path, t5_vocab, capsys):
    data, qa = tmp_path / "data", tmp_path / "data" / "qa"
    qa.mkdir(parents=True)
    for name, text in QA_FILES.items():
        (qa / name).write_text(text, encoding="utf-8")
    vocab = t5_vocab.sentencepiece_model_file
    model_dir = tmp_path / "qa_model"
    assert _cli(["evolvingqa", "train", "--stage", "qa", "--data", str(data), "--model-dir",
                 str(model_dir), "--t5-vocab", vocab, *TINY]) == 0
    printed = capsys.readouterr().out
    # One epoch: 6 rows at cpu_smoke's batch of 4.
    assert "evolvingqa_finetune: 1 epoch(s) of 6 examples at batch 4: 2 steps" in printed
    assert sorted(p.name for p in (model_dir / "checkpoints").iterdir()) == ["2"]
    config = (model_dir / "operative_config.gin").read_text()
    assert "TRAIN_STEPS = 2" in config and "MIXTURE_OR_TASK_NAME = 'evolvingqa_finetune'" in config

    out = tmp_path / "results"
    assert _cli(["evolvingqa", "eval", "--qa", str(qa), "--checkpoint", str(model_dir),
                 "--month", "0809", "--method", "full", "--out", str(out), "--t5-vocab", vocab,
                 "--max-answer-tokens", "4", "--batch-size", "4", *MODEL]) == 0
    printed = capsys.readouterr().out
    assert "EvolvingQA full trained through 0809, time step 0809:" in printed
    rows = {line.split()[0]: line.split()[1] for line in printed.splitlines()[2:6]}
    assert rows == {"Unchanged": "1", "New": "1", "Outdated": "2", "Updated": "2"}
    assert "multiple choice (2 Edited pairs): updated" in printed
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["category"], r["metric"]) for r in lines] == [
        ("unchanged", "em"), ("unchanged", "f1"), ("new", "em"), ("new", "f1"),
        ("updated", "em"), ("updated", "f1"), ("updated", "em_previous"),
        ("updated", "f1_previous"), ("updated", "rank_acc"), ("updated", "rank_acc_norm")]
    assert {(r["method"], r["trained_through"], r["eval_month"]) for r in lines} == {
        ("full", "0809", "0809")}
    predictions = out / "predictions" / "full.0809.0809" / "edited.jsonl"
    assert [json.loads(line)["answer2"] for line in predictions.read_text().splitlines()] == [
        "Stano Wevton", "24042"]

    assert _cli(["evolvingqa", "eval", "--qa", str(qa), "--checkpoint", str(model_dir),
                 "--month", "0910", "--out", str(out), *MODEL]) == 2
    assert "has no evolvingqa_new_0910, evolvingqa_edited_0910" in capsys.readouterr().err


def test_the_paper_settings_are_in_the_gin_files():
    import gin

    from tw_jax.runtime import gin_setup

    gin_setup.parse(["evolvingqa_qa.gin"], ["MODEL_DIR='/tmp/x'"])
    assert [gin.query_parameter(f"%{m}") for m in (
        "LEARNING_RATE", "BATCH_SIZE", "SCHEDULE", "MIXTURE_OR_TASK_NAME")] == [
        1e-5, 32, "constant", "evolvingqa_finetune"]
    gin_setup.parse(["evolvingqa.gin"], ["MODEL_DIR='/tmp/x'"])
    assert [gin.query_parameter(f"%{m}") for m in (
        "LEARNING_RATE", "BATCH_SIZE", "ACCUMULATE_STEPS")] == [1e-3, 5, 3]


def test_continual_training_needs_the_months_ssm_corpus(tmp_path, capsys):
    assert _cli(["evolvingqa", "train", "--stage", "continual", "--data", str(tmp_path),
                 "--model-dir", str(tmp_path / "m"), *TINY]) == 2
    assert "needs --month PERIOD" in capsys.readouterr().err
    assert _cli(["evolvingqa", "train", "--stage", "continual", "--data", str(tmp_path),
                 "--month", "0809", "--model-dir", str(tmp_path / "m"), *TINY]) == 2
    assert "no SSM corpus for 0809 (run tw-jax evolvingqa build)" in capsys.readouterr().err


# --- open book ------------------------------------------------------------------------------
OPEN_BOOK = ["--month", "0809", "--max-questions", "4", "--max-answer-tokens", "4",
             "--batch-size", "4", *MODEL]


@pytest.fixture(scope="module")
def world_reader(sample_world, tmp_path_factory, t5_vocab) -> tuple[Path, Path, str]:
    """(the world's build folder with its QA sets, a tiny T5 reader QA fine-tuned 2 steps on its
    Unchanged training questions, the vocabulary file)."""
    out = build_eqa_world(sample_world, tmp_path_factory.mktemp("eqa_world"))
    vocab = t5_vocab.sentencepiece_model_file
    reader = out / "reader"
    assert _cli(["evolvingqa", "train", "--stage", "qa", "--data", str(out), "--model-dir",
                 str(reader), "--t5-vocab", vocab, *TINY, "--gin.TRAIN_STEPS=2"]) == 0
    return out, reader, vocab


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_open_book_eval_with_bm25_beside_closed_book(world_reader, tmp_path, capsys):
    data, reader, vocab = world_reader
    out = tmp_path / "results"
    common = ["evolvingqa", "eval", "--data", str(data), "--checkpoint", str(reader), "--out",
              str(out), "--t5-vocab", vocab, *OPEN_BOOK]
    assert _cli([*common, "--method", "initial"]) == 0  # closed book, the QA sets of DATA/qa
    capsys.readouterr()
    assert _cli([*common, "--method", "bm25", "--k", "2", "--input-length", "2048"]) == 0
    printed = capsys.readouterr().out
    assert "open book: reader initial, top 2 bm25 passages of 0809's index, input cut to " \
           "2048 tokens" in printed
    assert "EvolvingQA bm25 trained through base, time step 0809:" in printed
    assert "multiple choice (" in printed and "inputs cut 0.000 (4 questions)" in printed

    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    metrics = ["em", "f1", "em", "f1", "em", "f1", "em_previous", "f1_previous", "rank_acc",
               "rank_acc_norm"]
    for method in ("initial", "bm25"):
        mine = [r for r in lines if r["method"] == method]
        assert [r["metric"] for r in mine] == metrics, method
        assert {(r["trained_through"], r["eval_month"]) for r in mine} == {("base", "0809")}

    # The index is the one `retrieve` builds, reused: the same passages for every question.
    index_folder = data / "0809" / "evolvingqa" / "index" / "bm25"
    texts = {p["id"]: p["text"] for p in _jsonl(index_folder / "passages.jsonl")}
    assert main(["evolvingqa", "retrieve", "--data", str(data), "--month", "0809", "--k", "2",
                 "--max-questions", "4", "--out", str(tmp_path / "retrieved")]) == 0
    assert "reused" in capsys.readouterr().out.splitlines()[0]
    hits = 0
    for name, column in (("unchanged", "answer"), ("new", "answer"), ("edited", "answer2")):
        given = _jsonl(out / "predictions" / "bm25.base.0809" / f"{name}.jsonl")
        retrieved = _jsonl(tmp_path / "retrieved" / f"retrieved_{name}.jsonl")
        assert [g["passage_ids"] for g in given] == [r["passage_ids"] for r in retrieved]
        for row in given:
            assert row["input"].startswith(f"question: {' '.join(row['question'].split())} ")
            assert 1 <= len(row["passage_ids"]) <= 2 and "prediction" in row
            passages = [texts[i] for i in row["passage_ids"]]
            if first_hit(passages, [row[column]]) is not None:  # recall@2 hits: the reader sees it
                hits += 1
                gold = next(p for p in passages if has_answer(p, [row[column]]))
                assert " ".join(gold.split()) in row["input"]
                assert has_answer(row["input"].split(" context: ", 1)[1], [row[column]])
    assert hits >= 4  # the check above ran
    figures = json.loads((out / "predictions" / "bm25.base.0809" / "open_book.json").read_text())
    assert figures["k"] == 2 and figures["index"]["folder"] == str(index_folder)
    for name, values in figures["sets"].items():
        assert values["answer_in_input"] == values["answer_recall@2"], name  # nothing was cut
    # Beside each recall: the questions the generator dropped for want of a source article.
    assert {n: v.get("no_source_article") for n, v in figures["sets"].items()} == {
        "unchanged": None, "new": 3, "edited_updated": 2, "edited_outdated": 2}
    assert "(4 questions, 3 dropped at generation: no source article)" in printed

    # The report puts the open-book row beside the closed-book one.
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    table = (tmp_path / "report" / "table_em.csv").read_text().splitlines()
    assert table[0].startswith("Method,Time,0809 Un,0809 Up,0809 New")
    assert [row.split(",")[0] for row in table[1:]] == ["INITIAL", "BM25"]
    ranks = (tmp_path / "report" / "table_rank_acc.md").read_text()
    assert "| INITIAL |" in ranks and "| BM25 |" in ranks
    assert ranks.startswith("### rank_acc on EvolvingQA\n")  # the run folder says which set


def test_eval_and_retrieve_are_python_functions_the_commands_call(world_reader, tmp_path,
                                                                 capsys):
    """A notebook or a sweep calls what ``eval`` runs: the same settings as a config give the
    command's results lines, predictions and printed table."""
    data, reader, vocab = world_reader
    config = EvalConfig(
        checkpoint=str(reader), month="0809", out=str(tmp_path / "py"), data=str(data),
        t5_vocab=vocab, max_questions=4, max_answer_tokens=4, batch_size=4,
        gin_files=("models/t5_tiny.gin", "runs/cpu_smoke.gin"),
        gin_bindings=("tw_jax.models.T5Config.num_layers=1",
                      "tw_jax.models.T5Config.vocab_size=1152"),
        open_book=OpenBook(data=str(data), k=2, input_length=2048))
    echoed: list[str] = []
    outcome = evaluate(config, echo=echoed.append)
    assert len(echoed) == 1 and echoed[0].startswith("bm25 index of 0809: ")
    assert [s.name for s in outcome.scored] == ["unchanged", "new", "edited"]
    assert [s.rows for s in outcome.scored] == [4, 4, 4]
    assert outcome.open_book is not None and outcome.open_book.budget == 2048
    assert outcome.predictions == str(tmp_path / "py" / "predictions" / "bm25.base.0809")

    assert _cli(["evolvingqa", "eval", "--data", str(data), "--checkpoint", str(reader),
                 "--out", str(tmp_path / "cli"), "--t5-vocab", vocab, *OPEN_BOOK,
                 "--method", "bm25", "--k", "2", "--input-length", "2048"]) == 0
    printed = capsys.readouterr().out.splitlines()
    # After the index line, before the paths: the same table and figures.
    assert printed[1:-1] == "\n".join(outcome.lines()[:-1]).splitlines()

    def lines(folder: str) -> list[tuple]:
        return [(r["method"], r["trained_through"], r["eval_month"], r["category"],
                 r["metric"], r["value"]) for r in _jsonl(tmp_path / folder / "results.jsonl")]
    assert lines("py") == lines("cli") and len(lines("py")) == outcome.results == 10
    for name in ("unchanged", "new", "edited"):
        assert (_jsonl(tmp_path / "py" / "predictions" / "bm25.base.0809" / f"{name}.jsonl")
                == _jsonl(tmp_path / "cli" / "predictions" / "bm25.base.0809" / f"{name}.jsonl"))

    report = retrieve(RetrieveConfig(data=str(data), month="0809", out=str(tmp_path / "r"),
                                     k=2, max_questions=4), echo=echoed.append)
    assert "reused" in echoed[1]
    assert list(report["sets"]) == ["unchanged", "new", "edited_updated", "edited_outdated"]
    assert report["questions"] == 12
    assert (tmp_path / "r" / "retrieval.json").is_file()

    with pytest.raises(UsageError, match=r"unknown set\(s\) \['bogus'\]; choose from unchanged"):
        evaluate(EvalConfig(checkpoint=str(reader), month="0809", out=str(tmp_path / "x"),
                            sets=("bogus",)))
    assert not (tmp_path / "x").exists()


def test_open_book_eval_with_dpr_encoders(world_reader, tmp_path, capsys):
    data, reader, vocab = world_reader
    question, ctx = tiny_dpr_encoders(tmp_path / "encoders", [
        "who", "what", "is", "the", "of", "population", "capital", "spouse", "?", "."])
    out = tmp_path / "results"
    assert _cli(["evolvingqa", "eval", "--data", str(data), "--checkpoint", str(reader), "--out",
                 str(out), "--t5-vocab", vocab, *OPEN_BOOK, "--method", "dpr", "--reader",
                 "full", "--question-encoder", str(question), "--ctx-encoder", str(ctx),
                 "--sets", "new"]) == 0
    printed = capsys.readouterr().out
    assert "dpr index of 0809:" in printed and "built" in printed
    assert "EvolvingQA full-dpr trained through 0809, time step 0809:" in printed
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["method"], r["trained_through"], r["category"], r["metric"]) for r in lines] == [
        ("full-dpr", "0809", "new", "em"), ("full-dpr", "0809", "new", "f1")]
    given = _jsonl(out / "predictions" / "full-dpr.0809.0809" / "new.jsonl")
    assert len(given) == 4 and all(len(g["passage_ids"]) == 5 for g in given)
    assert (data / "0809" / "evolvingqa" / "index" / "dpr" / "index.json").is_file()


def test_open_book_eval_refuses_bad_requests_in_one_line(world_reader, tmp_path, capsys):
    data, reader, vocab = world_reader
    common = ["evolvingqa", "eval", "--checkpoint", str(reader), "--month", "0809", "--out",
              str(tmp_path / "o"), "--t5-vocab", vocab, *MODEL]
    cases = [
        (["--method", "bm25"], "--method bm25 (open book) needs --data DATA"),
        (["--method", "bm25", "--data", str(data), "--k", "0"], "--k and --input-length must"),
        (["--method", "dpr", "--data", str(data)],
         "--retriever dpr needs --question-encoder DIR and --ctx-encoder DIR"),
        (["--method", "bm25", "--data", str(tmp_path)], "no QA folder"),
        (["--method", "initial"], "needs --qa QA (or --data DATA"),
    ]
    for extra, message in cases:
        assert _cli([*common, *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert err.startswith("tw-jax evolvingqa eval: error: ") and message in err, err
        assert "\n" not in err
    assert not (tmp_path / "o" / "results.jsonl").exists()
