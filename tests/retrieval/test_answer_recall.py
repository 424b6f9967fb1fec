"""Answer recall@k (DPR's top-k retrieval accuracy) on cases whose answers are known."""

from __future__ import annotations

import pytest

from tw_jax.retrieval.recall import first_hit, has_answer, recall_at


@pytest.mark.parametrize(("passage", "answers", "found"), [
    ("The capital of Varnholt is Trurhollow.", ["Trurhollow"], True),
    ("THE CAPITAL IS TRURHOLLOW", ["trurhollow."], True),  # case and punctuation
    ("Its head coach is Stano Wevton, since 2021.", ["The Stano Wevton"], True),  # articles
    ("He held the post of Mayor of Trurmouth.", ["Mayor of Trurmouth"], True),
    ("The party was held in Trurmouth.", ["art"], False),  # whole words only
    ("Population: 24,042 (2021).", ["24042"], True),  # the comma is punctuation, dropped
    ("Population: 24,042 (2021).", ["24 042"], False),
    ("A town in Varnholt.", ["The"], False),  # normalises to nothing: never found
    ("Groris Funley", ["Wiro Derncroft", "Groris Funley"], True),  # any gold answer
])
def test_has_answer_matches_whole_words_after_squad_normalisation(passage, answers, found):
    assert has_answer(passage, answers) is found


def test_first_hit_is_the_rank_of_the_first_passage_with_an_answer():
    passages = ["Nothing here.", "Still nothing.", "Founded by Cien Bordling.", "Cien Bordling"]
    assert first_hit(passages, ["Cien Bordling"]) == 2
    assert first_hit(passages, ["Meel Dreirdstad"]) is None
    assert first_hit([], ["x"]) is None


def test_recall_at_k_is_the_share_of_questions_with_a_hit_within_k():
    hits = [0, 3, None, 19, 20, 4, 1, None]  # 0-based ranks of the first hit
    assert recall_at(hits) == {"answer_recall@1": 1 / 8, "answer_recall@5": 4 / 8,
                               "answer_recall@20": 5 / 8}
    assert recall_at(hits, ks=(2, 100)) == {"answer_recall@2": 2 / 8, "answer_recall@100": 6 / 8}
    assert recall_at([]) == {"answer_recall@1": None, "answer_recall@5": None,
                             "answer_recall@20": None}
