"""``tw-jax evolvingqa retrieve`` end to end on the sample world, built offline: the EvolvingQA
build (passages), the Probes stage (facts), offline QA generation from those probes, then BM25
retrieval for a month's sets."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from eqa_world import build_eqa_world, tiny_dpr_encoders

from tw_jax.cli import main
from tw_jax.retrieval import base

REPORTED = ("unchanged", "new", "edited_updated", "edited_outdated")
RECALLS = ("answer_recall@1", "answer_recall@5", "answer_recall@20")


@pytest.fixture(scope="module")
def world_data(sample_world, tmp_path_factory) -> Path:
    return build_eqa_world(sample_world, tmp_path_factory.mktemp("eqa"))


def _rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_bm25_retrieval_reports_answer_recall_per_set(world_data, tmp_path, capsys):
    out = tmp_path / "r"
    argv = ["evolvingqa", "retrieve", "--data", str(world_data), "--month", "0809",
            "--retriever", "bm25", "--k", "5", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    line = json.loads(printed[-1])
    assert list(line) == [*REPORTED, "questions_per_second"]
    for name in REPORTED:
        recalls = line[name]
        assert list(recalls) == list(RECALLS)
        assert 0 <= recalls[RECALLS[0]] <= recalls[RECALLS[1]] <= recalls[RECALLS[2]] <= 1
    assert line["questions_per_second"] > 0
    # EvolvingQA's questions reuse their passage's words; the offline ones name the subject.
    assert line["unchanged"]["answer_recall@5"] >= 0.6
    assert line["new"]["answer_recall@5"] >= 0.6
    assert "built in" in printed[0]
    # Every New and Edited question comes from one of 0809's New articles or Edited pairs (the
    # generator dropped 3 and 2 probes without one), so the month's passages answer them.
    assert {n: line[n]["answer_recall@5"] for n in ("new", "edited_updated")} == {
        "new": 1.0, "edited_updated": 1.0}
    assert printed[2].startswith("new: 29 questions (3 dropped at generation: no source "
                                 "article), answer recall @1 0.966, @5 1.000, @20 1.000")
    assert printed[3].startswith("edited_updated: 5 questions (2 dropped at generation: no "
                                 "source article), answer recall @1 0.800, @5 1.000")

    report = json.loads((out / "retrieval.json").read_text())
    qa = world_data / "qa"
    sets = {"unchanged": _rows(qa / "unchanged_eval.csv"), "new": _rows(qa / "new_0809.csv"),
            "edited": _rows(qa / "edited_0809.csv")}
    assert {n: report["sets"][n]["questions"] for n in REPORTED} == {
        "unchanged": len(sets["unchanged"]), "new": len(sets["new"]),
        "edited_updated": len(sets["edited"]), "edited_outdated": len(sets["edited"])}
    assert {n: report["sets"][n].get("no_source_article") for n in REPORTED} == {
        "unchanged": None, "new": 3, "edited_updated": 2, "edited_outdated": 2}
    assert (len(sets["new"]), len(sets["edited"])) == (29, 5)
    assert report["questions"] == sum(map(len, sets.values())) > 0
    index_folder = world_data / "0809" / "evolvingqa" / "index" / "bm25"
    assert report["index"]["folder"] == str(index_folder) and not report["index"]["reused"]
    ids = {r["id"] for r in _jsonl(index_folder / "passages.jsonl")}
    assert len(ids) == report["index"]["passages"]
    for name, rows in sets.items():
        retrieved = _jsonl(out / f"retrieved_{name}.jsonl")
        assert [r["question"] for r in retrieved] == [r["question"] for r in rows]
        assert all(len(r["passage_ids"]) == len(r["scores"]) <= 5 for r in retrieved)
        assert all(set(r["passage_ids"]) <= ids for r in retrieved)
        assert all(r["scores"] == sorted(r["scores"], reverse=True) for r in retrieved)
    assert set(_jsonl(out / "retrieved_edited.jsonl")[0]) == {
        "question", "answer1", "answer2", "passage_ids", "scores"}

    # The same month again: the stored index is reused, the answers are the same.
    assert main([*argv[:-1], str(tmp_path / "again")]) == 0
    again = capsys.readouterr().out.splitlines()
    assert "reused" in again[0]
    assert {k: v for k, v in json.loads(again[-1]).items() if k != "questions_per_second"} == {
        k: v for k, v in line.items() if k != "questions_per_second"}
    assert (tmp_path / "again" / "retrieved_new.jsonl").read_text() == (
        out / "retrieved_new.jsonl").read_text()


def test_retrieve_refuses_bad_requests_in_one_line(world_data, tmp_path, capsys, monkeypatch):
    common = ["evolvingqa", "retrieve", "--data", str(world_data), "--out", str(tmp_path / "o")]
    monkeypatch.setitem(base._MODULES, "dpr", "tw_jax.retrieval.no_such_dense")
    monkeypatch.delitem(base._REGISTRY, "dpr", raising=False)
    cases = [
        (["--month", "0809", "--retriever", "dpr"], "dense retrieval is not available yet"),
        (["--month", "0809", "--retriever", "tfidf"], "unknown retriever 'tfidf'; known: bm25, dpr"),
        (["--month", "0809", "--sets", "new,old"], "unknown set(s) ['old']"),
        (["--month", "0809", "--k", "0"], "--k must be at least 1"),
        (["--month", "0809", "--label", "03"], "has no evolvingqa_new_03, evolvingqa_edited_03"),
        (["--month", "1112", "--sets", "unchanged"], "1112/evolvingqa: has no stats.json"),
    ]
    for extra, message in cases:
        assert main([*common, *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert err.startswith("tw-jax evolvingqa retrieve: error: ") and message in err, err
        assert "\n" not in err


def test_dense_retrieval_runs_end_to_end_with_tiny_random_encoders(world_data, tmp_path, capsys):
    """`--retriever dpr` with DPR encoder folders (tiny random ones, saved as Hugging Face DPR
    folders): the month's index is built with them and every set gets its recall line."""
    question, ctx = tiny_dpr_encoders(tmp_path / "encoders", [
        "the", "of", "is", "was", "in", "who", "what", "which", "born", "capital", "city", "?",
        ".", ","])
    out = tmp_path / "dense"
    assert main(["evolvingqa", "retrieve", "--data", str(world_data), "--month", "0809",
                 "--retriever", "dpr", "--question-encoder", str(question), "--ctx-encoder",
                 str(ctx), "--k", "5", "--out", str(out)]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert list(line) == [*REPORTED, "questions_per_second"]
    for name in REPORTED:
        recalls = line[name]
        assert 0 <= recalls[RECALLS[0]] <= recalls[RECALLS[1]] <= recalls[RECALLS[2]] <= 1
    index_folder = world_data / "0809" / "evolvingqa" / "index" / "dpr"
    assert (index_folder / "embeddings.npy").is_file()
    retrieved = _jsonl(out / "retrieved_new.jsonl")
    assert retrieved and all(len(r["passage_ids"]) == 5 for r in retrieved)

    # the two folders swapped: one line naming them (before: a ValueError traceback)
    assert main(["evolvingqa", "retrieve", "--data", str(world_data), "--month", "0809",
                 "--retriever", "dpr", "--question-encoder", str(ctx), "--ctx-encoder",
                 str(question), "--out", str(tmp_path / "swapped")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(
        f"tw-jax evolvingqa retrieve: error: --question-encoder {ctx} / --ctx-encoder {question}: ")
    assert err.endswith("(two DPR encoder folders, question first)")
