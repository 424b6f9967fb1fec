"""Answers as the papers compare them: SQuAD v1.1 normalisation, exact match and token F1, and
the answer text of a model's generation (T5's first sentinel span, GPT-2's first line, BART's
whole output).

Pure text, no TensorFlow: the probe builders (EvolvingQA's filters), the model families'
answer extraction and the seqio metrics of :mod:`tw_jax.tasks.metrics` all use these.
"""

from __future__ import annotations

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
SENTINEL_PATTERN = re.compile(r"<extra_id_\d+>")


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


def answer_from_t5(prediction: str) -> str:
    """The first span of a T5 sentinel answer: ``<extra_id_0> Paris <extra_id_1>`` → ``Paris``."""
    parts = [p.strip() for p in SENTINEL_PATTERN.split(prediction)]
    spans = [p for p in parts if p]
    return spans[0] if spans else ""


def answer_from_gpt2(prediction: str) -> str:
    """A GPT-2 continuation up to its first line break."""
    return prediction.strip().split("\n", 1)[0].strip()


def answer_from_bart(prediction: str) -> str:
    """A BART output as a whole: a sequence-to-sequence model writes the answer alone, no
    sentinels (a BART that was not fine-tuned to answer rewrites its whole input instead)."""
    return " ".join(prediction.split())
