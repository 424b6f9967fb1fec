"""The ``utils.py`` that ``tw-jax lm-eval-tasks`` writes beside its YAML files: the answer
scoring of the exported ``generate_until`` probe tasks (their ``process_results``).

lm-eval imports this file by path (``!function utils.process_generation``) in whatever Python
runs the harness, which need not have tw_jax installed (a vLLM host), so it imports nothing
but the standard library. Its normalisation, exact match and token F1 are copies of
:mod:`tw_jax.text.answers` (SQuAD v1.1; ``tests/lm_eval/test_export.py`` checks that the two
agree), and the answer is read as tw_jax reads a causal LM's generation: its first line.
Scores are in percent, as ``tw-jax eval`` reports ``em`` and ``f1``.

The sibling benchmarks' generation tasks (:mod:`tw_jax.lm_eval.siblings`: CKL's LAMA sets,
EvolvingQA's questions) score against a list of accepted answers, the best of them counting
(CKL accepts any of an id's answers, SQuAD's ``metric_max_over_ground_truths``):
:func:`process_answers`, and :func:`process_answers_previous` for the sets with an outdated
answer too (UpdatedLAMA, EvolvingQA's Edited: ``em_previous``/``f1_previous``).
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
PREVIOUS_SEPARATOR = " | "  # between an UPDATED probe's earlier objects


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 normalisation: lower-case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, answer: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(answer))


def token_f1(prediction: str, answer: str) -> float:
    """Harmonic mean of token precision and recall; two empty answers agree (1.0)."""
    predicted = normalize_answer(prediction).split()
    gold = normalize_answer(answer).split()
    if not predicted or not gold:
        return float(predicted == gold)
    common = collections.Counter(predicted) & collections.Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def answer_text(generation: str) -> str:
    """A causal LM's answer: its continuation up to the first line break."""
    return generation.strip().split("\n", 1)[0].strip()


def process_generation(doc: Mapping[str, Any], results: Sequence[str]) -> dict[str, float]:
    """``em`` and ``f1`` (percent) of the generated answer against the probe's object."""
    answer = answer_text(results[0])
    return {"em": 100.0 * exact_match(answer, doc["object"]),
            "f1": 100.0 * token_f1(answer, doc["object"])}


def _best(score: Any, prediction: str, answers: Sequence[str]) -> float:
    return max((score(prediction, a) for a in answers), default=0.0)


def process_answers(doc: Mapping[str, Any], results: Sequence[str]) -> dict[str, float]:
    """``em`` and ``f1`` (percent) of the generated answer against the best of
    ``doc["answers"]``."""
    answer = answer_text(results[0])
    return {"em": 100.0 * _best(exact_match, answer, doc["answers"]),
            "f1": 100.0 * _best(token_f1, answer, doc["answers"])}


def process_answers_previous(doc: Mapping[str, Any], results: Sequence[str]) -> dict[str, float]:
    """:func:`process_answers`, and ``em_previous``/``f1_previous`` against the outdated
    answers ``doc["previous_answers"]``."""
    scores = process_answers(doc, results)
    answer = answer_text(results[0])
    scores["em_previous"] = 100.0 * _best(exact_match, answer, doc["previous_answers"])
    scores["f1_previous"] = 100.0 * _best(token_f1, answer, doc["previous_answers"])
    return scores
