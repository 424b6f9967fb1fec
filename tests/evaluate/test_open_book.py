"""Open-book inputs: the exact format, truncation from the end of the passages (the question is
never cut), token budgets, retrieval from a month's index, and the recall / oracle figures."""

from __future__ import annotations

import pytest

from tw_jax.evaluate import open_book as ob
from tw_jax.retrieval.base import Passage
from tw_jax.retrieval.bm25 import BM25Retriever
from tw_jax.retrieval.index import MonthIndex

PASSAGES = [
    Passage("unchanged/7:0", "Varnholt", "Varnholt is a country.\nIts capital   is Trurhollow."),
    Passage("new/21:0", "", "Cien Bordling married Meel Dreirdstad."),
]
FULL = ("question: What is the capital of Varnholt? title: Varnholt context: Varnholt is a "
        "country. Its capital is Trurhollow. context: Cien Bordling married Meel Dreirdstad.")


def words(text: str) -> int:
    """A token counter whose counts are easy to check by hand: one token per word."""
    return len(text.split())


def test_the_input_is_the_question_then_titled_passages_best_first():
    made = ob.open_book_input("What is the  capital of Varnholt?", PASSAGES, scores=[2.5, 1])
    assert made.text == FULL
    assert made.context == FULL.split("? ", 1)[1]
    assert made.passage_ids == ("unchanged/7:0", "new/21:0") and made.scores == (2.5, 1.0)
    assert (made.context_words, made.total_words, made.tokens) == (17, 17, 0)
    assert not made.truncated and not made.over_budget
    # No passages: the question alone; a budget it fits changes nothing.
    assert ob.open_book_input("Who?", []).text == "question: Who?"
    assert ob.open_book_input("What is the capital of Varnholt?", PASSAGES, count_tokens=words,
                              max_tokens=24).text == FULL


def test_truncation_drops_words_from_the_end_of_the_context():
    made = ob.open_book_input("What is the capital of Varnholt?", PASSAGES, count_tokens=words,
                              max_tokens=13)  # 7 words of question, 6 of context
    assert made.text == ("question: What is the capital of Varnholt? title: Varnholt context: "
                         "Varnholt is a")
    assert (made.context_words, made.total_words, made.tokens) == (6, 17, 13)
    assert made.truncated and not made.over_budget
    # Exactly the question: no context; shorter than the question: the question still whole.
    for budget in (7, 3):
        made = ob.open_book_input("What is the capital of Varnholt?", PASSAGES,
                                  count_tokens=words, max_tokens=budget)
        assert made.text == "question: What is the capital of Varnholt?" and made.context == ""
        assert made.context_words == 0 and made.over_budget is (budget < 7)


def test_truncation_with_the_t5_vocabulary_keeps_the_longest_run_that_fits(random_t5, t5_vocab):
    model, _ = random_t5
    count = ob.token_counter(model, t5_vocab)
    assert count("Varnholt is a country.") == len(t5_vocab.encode("Varnholt is a country.")) + 1
    passages = [Passage(f"p{i}", f"Title {i}", "The river flows quietly through the valley "
                        f"towards the sea near Trurhollow number {i}. " * 3) for i in range(4)]
    question = "Which river flows through the valley?"
    total = count(ob.open_book_input(question, passages).text)
    head = count(ob.question_part(question))
    for budget in (head, head + 1, head + 17, (head + total) // 2, total - 1):
        made = ob.open_book_input(question, passages, count_tokens=count, max_tokens=budget)
        assert made.text.startswith(f"question: {question}")
        assert made.tokens == count(made.text) <= budget
        every = ob.context_word_list(passages)
        longer = " ".join(["question:", *question.split(), *every[: made.context_words + 1]])
        assert count(longer) > budget  # one word more would not fit
    assert ob.open_book_input(question, passages, count_tokens=count, max_tokens=total).text \
        == ob.open_book_input(question, passages).text


def test_budgets_and_bad_arguments(random_t5, random_gpt2):
    t5, _ = random_t5
    gpt2, _ = random_gpt2  # n_positions = 128
    assert ob.input_budget(t5, 512, 25) == 512
    assert ob.input_budget(gpt2, 512, 25) == 103 and ob.input_budget(gpt2, 64, 25) == 64
    with pytest.raises(ValueError, match="no room for an input"):
        ob.input_budget(gpt2, 512, 128)
    with pytest.raises(ValueError, match="2 scores for 1 passages"):
        ob.open_book_input("q", PASSAGES[:1], scores=[1.0, 2.0])
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        ob.open_book_input("q", PASSAGES, count_tokens=words, max_tokens=0)


def test_result_method_names_the_retriever_and_a_trained_reader():
    assert ob.result_method("bm25") == "bm25" and ob.result_method("dpr", "initial") == "dpr"
    assert ob.result_method("bm25", "full") == "full-bm25"
    assert ob.result_method("dpr", "kadapter") == "kadapter-dpr"


def _month(passages: list[Passage]) -> MonthIndex:
    retriever = BM25Retriever()
    retriever.build(passages)
    return MonthIndex("0809", "unused", retriever, passages, "f", False, 0.0)


def test_retrieval_inputs_and_figures_on_a_small_index():
    passages = [
        Passage("unchanged/7:0", "Varnholt", "Varnholt is a country. Its capital is Trurhollow."),
        Passage("unchanged/8:0", "Corvania", "Corvania is a country. Its capital is Rostport."),
        Passage("new/21:0", "Cien Bordling", "Cien Bordling married Meel Dreirdstad."),
        Passage("edited/30:2:0", "Grol Textiles",
                "Its chief executive officer is Granette Naunsberg."),
    ]
    sets = {
        "unchanged": [{"question": "What is the capital of Varnholt?", "answer": "Trurhollow"},
                      {"question": "What is the capital of Corvania?", "answer": "Lake Oster"}],
        "edited": [{"question": "Who is the chief executive officer of Grol Textiles?",
                    "answer1": "L. J. Kulric", "answer2": "Granette Naunsberg"}],
    }
    found = ob.retrieve(_month(passages), sets, 1)
    assert [p.id for (p,) in found["unchanged"].passages] == ["unchanged/7:0", "unchanged/8:0"]
    assert [p.id for (p,) in found["edited"].passages] == ["edited/30:2:0"]
    inputs = {name: ob.reader_inputs(done, count_tokens=None, max_tokens=None)
              for name, done in found.items()}
    assert inputs["unchanged"][0].text == (
        "question: What is the capital of Varnholt? title: Varnholt context: Varnholt is a "
        "country. Its capital is Trurhollow.")
    assert ob.figures(found, inputs, 1) == {
        "unchanged": {"answer_recall@1": 0.5, "answer_in_input": 0.5, "truncated": 0.0,
                      "questions": 2},
        "edited_updated": {"answer_recall@1": 1.0, "answer_in_input": 1.0, "truncated": 0.0,
                           "questions": 1},
        "edited_outdated": {"answer_recall@1": 0.0, "answer_in_input": 0.0, "truncated": 0.0,
                            "questions": 1},
    }
    # Cut to the question and 3 context words: the answer was retrieved but is not read.
    short = {name: ob.reader_inputs(done, count_tokens=words, max_tokens=10)
             for name, done in found.items()}
    assert short["unchanged"][0].text == ("question: What is the capital of Varnholt? title: "
                                          "Varnholt context:")
    figures = ob.figures(found, short, 1)
    assert figures["unchanged"] == {"answer_recall@1": 0.5, "answer_in_input": 0.0,
                                    "truncated": 1.0, "questions": 2}
    rows = ob.prediction_rows(sets["edited"], inputs["edited"])
    assert rows[0]["passage_ids"] == ["edited/30:2:0"] and rows[0]["input"].startswith(
        "question: Who is the chief executive officer of Grol Textiles? title: Grol Textiles")
    assert len(rows[0]["scores"]) == 1
    with pytest.raises(ValueError, match="k must be at least 1"):
        ob.retrieve(_month(passages), sets, 0)
    empty = ob.retrieve(_month(passages), {"new": []}, 3)
    assert ob.figures(empty, {"new": []}, 3) == {"new": {
        "answer_recall@3": None, "answer_in_input": None, "truncated": None, "questions": 0}}
