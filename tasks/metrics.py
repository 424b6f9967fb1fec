"""Metrics of the probe and corpus tasks, as seqio metric functions.

- :func:`squad` — exact match and token F1 after SQuAD normalisation (lower-case, punctuation
  and the articles a/an/the removed, whitespace collapsed), the best over a probe's answers,
  in percent. TemporalWiki, CKL and EvolvingQA all score generated objects this way.
- :func:`perplexity` — from per-example scores (summed natural-log likelihoods of the scored
  target tokens, what a scorer returns): ``perplexity``, the mean of per-example perplexities
  (:func:`instance_perplexities`, :func:`mean_perplexity`; TemporalWiki footnote 6: "per-instance
  perplexity averaged over instances"), and ``token_perplexity``, ``exp(-Σ score / Σ tokens)``.
  These two functions are the only place the probe perplexity's formula is written:
  ``tw-jax eval`` and the lifelong runner's report (both through this metric) call them, on
  the tokens that :func:`tw_jax.tasks.probes.probe_spec` marks as scored (``docs/metrics.md``).

The tasks' postprocessor (:func:`probe_postprocessor`, :func:`token_count_postprocessor`) turns
each target into a :class:`Target` carrying the answers and the target's token count, so both
kinds of metric read what they need from seqio's ``targets`` argument.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tw_jax.text.answers import (
    SENTINEL_PATTERN,
    answer_from_gpt2,
    answer_from_t5,
    exact_match,
    normalize_answer,
    token_f1,
)

__all__ = [
    "TARGETS_WEIGHTS", "Target", "answer_from_gpt2", "answer_from_t5", "exact_match",
    "instance_perplexities", "mean_perplexity", "mean_token_loss", "normalize_answer",
    "perplexity", "probe_postprocessor", "squad", "token_count_postprocessor", "token_f1",
]

# Between a probe's previous objects in ``previous_object`` (the probes CSV's convention).
PREVIOUS_SEPARATOR = " | "
# The per-token 0/1 weights a task example may carry beside ``targets``: which target tokens its
# score counts (the probe tasks' perplexity tokens; tw_jax.tasks.probes).
TARGETS_WEIGHTS = "targets_weights"


class Target(dict):
    """A postprocessed target: ``answers`` (list of strings), ``num_tokens`` (int or None) and,
    for UPDATED probes, ``previous`` (the outdated answers)."""

    @property
    def answers(self) -> list[str]:
        return self["answers"]

    @property
    def num_tokens(self) -> int | None:
        return self["num_tokens"]


def _answers(target: Any) -> list[str]:
    if isinstance(target, Mapping):
        return list(target["answers"])
    if isinstance(target, str):
        return [target]
    return list(target)


def _previous(target: Any) -> list[str]:
    return list(target.get("previous") or []) if isinstance(target, Mapping) else []


def _best(targets: Sequence[Any], predictions: Sequence[str], answers_of: Any) -> tuple[float, float]:
    em = f1 = 0.0
    for target, prediction in zip(targets, predictions, strict=True):
        answers = answers_of(target)
        em += max((exact_match(prediction, a) for a in answers), default=0.0)
        f1 += max((token_f1(prediction, a) for a in answers), default=0.0)
    return 100 * em / len(targets), 100 * f1 / len(targets)


def squad(targets: Sequence[Any], predictions: Sequence[str]) -> dict[str, float]:
    """``{"em": …, "f1": …}`` in percent, each the best over the target's answers; with
    ``em_previous``/``f1_previous`` over the targets that carry ``previous`` answers (UPDATED
    probes' earlier objects: how often the model still gives the outdated answer).

    A target is a string, a list of acceptable strings, or a :class:`Target`.
    """
    if len(targets) != len(predictions):
        raise ValueError(f"{len(targets)} targets but {len(predictions)} predictions")
    if not targets:
        return {"em": 0.0, "f1": 0.0}
    em, f1 = _best(targets, predictions, _answers)
    scores = {"em": em, "f1": f1}
    kept = [(t, p) for t, p in zip(targets, predictions, strict=True) if _previous(t)]
    if kept:
        scores["em_previous"], scores["f1_previous"] = _best(
            [t for t, _ in kept], [p for _, p in kept], _previous)
    return scores


def instance_perplexities(
    log_likelihoods: Sequence[float] | np.ndarray, num_tokens: Sequence[float] | np.ndarray
) -> np.ndarray:
    """``ppl_i = exp(-(1/|y_i|) Σ_j log p(y_ij | context))`` per instance, in float64; NaN where an
    instance has no scored token.

    TemporalWiki (Jang et al. 2022), footnote 6: "per-instance perplexity averaged over
    instances" — ``log_likelihoods[i]`` is the sum over instance ``i``'s scored tokens,
    ``num_tokens[i]`` their count.
    """
    sums = np.asarray(log_likelihoods, np.float64)
    counts = np.asarray(num_tokens, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(counts > 0, np.exp(-sums / np.maximum(counts, 1.0)), np.nan)


def mean_perplexity(perplexities: Sequence[float] | np.ndarray) -> float:
    """A category's number: the mean of per-instance perplexities over its instances (NaN-free
    input required), not the token-level perplexity."""
    values = np.asarray(perplexities, np.float64)
    if values.size == 0:
        raise ValueError("no instances to average")
    if np.isnan(values).any():
        raise ValueError(f"{int(np.isnan(values).sum())} instances had no scored token")
    return float(values.mean())


def _scored(target: Any, score: Any) -> tuple[float, int]:
    """``(summed log-likelihood, scored tokens)`` of one example: a score ``[ll, tokens]`` (what
    tw_jax's score functions return: the tokens the model itself scored) or a plain ``ll``
    with the target's token count."""
    values = np.asarray(score, np.float64).reshape(-1)
    if values.size == 2:
        return float(values[0]), int(values[1])
    if values.size != 1:
        raise ValueError(f"a score is a log-likelihood or [log-likelihood, tokens], got {score!r}")
    return float(values[0]), int(target["num_tokens"] if isinstance(target, Mapping) else target)


def perplexity(targets: Sequence[Any], scores: Sequence[Any]) -> dict[str, float]:
    """``perplexity`` (mean of per-example perplexities), ``token_perplexity`` (exp of the mean
    loss over all scored tokens), and the ``examples`` and scored ``tokens`` they average.

    A score is a summed log-likelihood, with the token count from its target (an ``int``, or a
    :class:`Target`/mapping with ``num_tokens``), or ``[log-likelihood, tokens]``.
    """
    if len(targets) != len(scores):
        raise ValueError(f"{len(targets)} targets but {len(scores)} scores")
    sums, counts = _score_arrays(targets, scores)
    if (counts <= 0).any():
        raise ValueError("every scored target needs at least one token")
    if not counts.size:
        return {"perplexity": math.nan, "token_perplexity": math.nan, "examples": 0.0,
                "tokens": 0.0}
    return {
        "perplexity": mean_perplexity(instance_perplexities(sums, counts)),
        "token_perplexity": math.exp(mean_token_loss(sums, counts)),
        "examples": float(counts.size),
        "tokens": float(counts.sum()),
    }


def _score_arrays(targets: Sequence[Any], scores: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(summed log-likelihoods, token counts)`` of every example, float64 and int64 arrays:
    one array operation when every score is ``[ll, tokens]`` (tw_jax's score functions), else
    example by example (:func:`_scored`)."""
    if len(scores) and all(np.shape(s) == (2,) for s in scores):
        pairs = np.asarray(scores, np.float64).reshape(-1, 2)
        return pairs[:, 0], pairs[:, 1].astype(np.int64)
    pairs = [_scored(t, s) for t, s in zip(targets, scores, strict=True)]
    return (np.asarray([s for s, _ in pairs], np.float64),
            np.asarray([n for _, n in pairs], np.int64))


def mean_token_loss(scores: Sequence[float] | np.ndarray, counts: Sequence[float] | np.ndarray
                    ) -> float:
    """``-Σ score / Σ tokens``: the mean negative log-likelihood per scored token."""
    return -math.fsum(np.asarray(scores, np.float64).tolist()) / float(np.sum(counts))


# --- postprocessors (seqio calls them with example=…, is_target=…) --------------------------


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _token_count(example: Mapping[str, Any] | None) -> int | None:
    """The target's scored tokens: the ``targets_weights`` a probe task marks (its perplexity's
    tokens), else every target token."""
    if example is None or "targets" not in example:
        return None
    if TARGETS_WEIGHTS in example:
        return int(np.sum(np.asarray(example[TARGETS_WEIGHTS]) > 0))
    return len(example["targets"])


def probe_postprocessor(
    output: Any, example: Mapping[str, Any] | None = None, is_target: bool = False
) -> Any:
    """Targets → :class:`Target` (the probe's object, its token count); predictions → the
    answer text (sentinels stripped)."""
    if is_target:
        answer = _text(example["object"]) if example and "object" in example else _text(output)
        previous = _text(example.get("previous_object", b"")) if example else ""
        return Target(answers=[answer], num_tokens=_token_count(example),
                      previous=[p for p in previous.split(PREVIOUS_SEPARATOR) if p.strip()])
    prediction = _text(output)
    if SENTINEL_PATTERN.search(prediction):
        return answer_from_t5(prediction)
    return answer_from_gpt2(prediction)


def token_count_postprocessor(
    output: Any, example: Mapping[str, Any] | None = None, is_target: bool = False
) -> Any:
    """Targets of a corpus task → :class:`Target` with the block's token count."""
    if is_target:
        return Target(answers=[_text(output)], num_tokens=_token_count(example))
    return output
