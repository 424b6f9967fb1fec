"""Sentence-level precision and recall of a DiffSet against a known answer.

The sample world's generator writes which sentences of which article are new
(``truth/diffset-MMMM.jsonl``); scoring a DiffSet folder against it is how the tests and the demo
show that the stage keeps every changed sentence and nothing else.
"""

from __future__ import annotations

import os
from typing import Any

from tw_jax.io import jsonl
from tw_jax.preprocess.plaintext.sentences import split_sentences


def diffset_sentences(diffset_jsonl: str | os.PathLike[str]) -> set[tuple[int, str]]:
    return {
        (record["id"], sentence)
        for record in jsonl.records(diffset_jsonl)
        for paragraph in record["text"].split("\n")
        for sentence in split_sentences(paragraph)
    }


def truth_sentences(truth_jsonl: str | os.PathLike[str]) -> set[tuple[int, str]]:
    return {(r["id"], s) for r in jsonl.records(truth_jsonl) for s in r["sentences"]}


def score(
    diffset_jsonl: str | os.PathLike[str], truth_jsonl: str | os.PathLike[str]
) -> dict[str, Any]:
    """Precision and recall of (article id, sentence) pairs, with a few misses of each kind."""
    predicted = diffset_sentences(diffset_jsonl)
    expected = truth_sentences(truth_jsonl)
    hits = len(predicted & expected)
    return {
        "precision": hits / len(predicted) if predicted else 1.0,
        "recall": hits / len(expected) if expected else 1.0,
        "sentences": len(expected),
        "extra": sorted(predicted - expected)[:5],
        "missing": sorted(expected - predicted)[:5],
    }
