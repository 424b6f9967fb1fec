"""A month's sets searched and scored on a hand-made snapshot whose hits are known."""

from __future__ import annotations

import json

import pytest

from tw_jax.retrieval.bm25 import BM25Retriever
from tw_jax.retrieval.index import month_index
from tw_jax.retrieval.run import REPORT, retrieve_month, summary_line

SETS = {
    "unchanged": [
        {"question": "What is the capital of Corvania?", "answer": "Rostport"},
        {"question": "What is the capital of Varnholt?", "answer": "Trurhollow"},
        {"question": "Who founded Veistdale Rovers?", "answer": "Buel Vosling"},  # no passage
    ],
    "new": [{"question": "Who is the spouse of Cien Bordling?", "answer": "Meel Dreirdstad"}],
    "edited": [{"question": "Who is the chief executive officer of Grol Textiles?",
                "answer1": "L. J. Kulric", "answer2": "Granette Naunsberg"}],
}


def test_recall_per_set_with_edited_scored_against_both_answers(data, tmp_path):
    index = month_index(str(data), "0809", BM25Retriever())
    report = retrieve_month(index, SETS, 2, str(tmp_path / "out"), details={"qa": "hand-made"})
    recalls = {name: {k: v for k, v in figures.items() if k.startswith("answer_recall@")}
               for name, figures in report["sets"].items()}
    assert recalls == {
        "unchanged": {"answer_recall@1": 2 / 3, "answer_recall@5": 2 / 3,
                      "answer_recall@20": 2 / 3},
        "new": {"answer_recall@1": 1.0, "answer_recall@5": 1.0, "answer_recall@20": 1.0},
        # the index holds the current side only: the updated CEO is found, the outdated one not
        "edited_updated": {"answer_recall@1": 1.0, "answer_recall@5": 1.0,
                           "answer_recall@20": 1.0},
        "edited_outdated": {"answer_recall@1": 0.0, "answer_recall@5": 0.0,
                            "answer_recall@20": 0.0},
    }
    assert report["questions"] == 5 and report["qa"] == "hand-made" and report["k"] == 2
    assert json.loads((tmp_path / "out" / REPORT).read_text()) == report
    retrieved = [json.loads(line) for line in
                 (tmp_path / "out" / "retrieved_unchanged.jsonl").read_text().splitlines()]
    assert [r["passage_ids"][:1] for r in retrieved] == [["unchanged/8:0"], ["unchanged/7:0"], []]
    assert all(len(r["passage_ids"]) <= 2 for r in retrieved)
    line = json.loads(summary_line(report))
    assert list(line) == ["unchanged", "new", "edited_updated", "edited_outdated",
                          "questions_per_second"]
    assert line["edited_outdated"] == recalls["edited_outdated"]


def test_an_empty_set_has_no_recall_rather_than_zero(data, tmp_path):
    index = month_index(str(data), "0910", BM25Retriever())
    report = retrieve_month(index, {"new": SETS["new"], "edited": []}, 20, str(tmp_path))
    edited = dict(report["sets"]["edited_updated"])
    seconds = edited.pop("seconds")  # measured: its type and sign, never its value
    assert isinstance(seconds, float) and seconds >= 0.0
    assert edited == {"answer_recall@1": None, "answer_recall@5": None,
                      "answer_recall@20": None, "questions": 0}
    assert (tmp_path / "retrieved_edited.jsonl").read_text() == ""
    assert report["sets"]["new"]["answer_recall@20"] == 0.0  # 0910's snapshot lacks 0809's New


class _Broken(BM25Retriever):
    def search(self, questions, k):
        raise OSError("lost the index's storage")


def test_a_rerun_never_leaves_an_earlier_report_beside_its_own_files(data, tmp_path):
    out = tmp_path / "out"
    index = month_index(str(data), "0809", BM25Retriever())
    retrieve_month(index, SETS, 2, str(out))
    assert (out / REPORT).exists() and (out / "retrieved_edited.jsonl").exists()

    retrieve_month(index, {"new": SETS["new"]}, 2, str(out))  # fewer sets: no stale files
    assert sorted(p.name for p in out.iterdir()) == [REPORT, "retrieved_new.jsonl"]

    broken = month_index(str(data), "0809", _Broken())
    with pytest.raises(OSError, match="lost the index's storage"):
        retrieve_month(broken, SETS, 2, str(out))
    assert not (out / REPORT).exists()  # unfinished: no report claims these files
