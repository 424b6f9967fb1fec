"""ArticleDiff joins its paragraphs once (the outputs and the stats both read the text) and is
pickled without that text; new_sentences, which splits only the paragraphs not found verbatim
in the old version, keeps what splitting them all keeps."""

from __future__ import annotations

import pickle
import random

from tw_jax.preprocess.diffset.algorithm import CHANGED, ArticleDiff, new_sentences
from tw_jax.preprocess.plaintext.sentences import split_sentences


def test_the_text_is_joined_once_and_not_pickled():
    result = ArticleDiff(7, "T", CHANGED, ("alpha one", "beta two"), ("beta two",), 1, True)
    assert result.text == "alpha one\nbeta two"
    assert result.diff_text == "beta two"
    data = pickle.dumps(result)
    assert b"alpha one\nbeta two" not in data
    again = pickle.loads(data)
    assert again == result and again.text == result.text


def naive_new_sentences(new: list[str], old: list[str]) -> tuple[list[str], int]:
    old_sentences = {s for p in old for s in split_sentences(p)}
    kept, count = [], 0
    for paragraph in new:
        sentences = split_sentences(paragraph)
        added = [s for s in sentences if s not in old_sentences]
        if added:
            count += len(added)
            kept.append(paragraph if len(added) == len(sentences) else " ".join(added))
    return kept, count


def test_new_sentences_keeps_what_splitting_every_paragraph_keeps():
    rnd = random.Random(0)
    pool = ["It rained.", "Then it snowed!", "Dr. Smith came.", "Was it so?", "Yes.", "No. 5 won."]

    def paragraph() -> str:
        return " ".join(rnd.choice(pool) for _ in range(rnd.randint(1, 3)))

    for _ in range(2000):
        old = [paragraph() for _ in range(rnd.randint(0, 4))]
        new = [rnd.choice(old) if old and rnd.random() < 0.5 else paragraph()
               for _ in range(rnd.randint(0, 4))]
        assert new_sentences(new, old) == naive_new_sentences(new, old), (new, old)
    assert new_sentences(["It rained."], ["It rained."]) == ([], 0)
    assert new_sentences(["It rained. Yes."], ["Yes."]) == (["It rained."], 1)
