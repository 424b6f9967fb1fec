"""Is a score's difference to INITIAL more than sampling noise? And how many probes stand behind it.

A demo month has a handful of probes per category (DELETED one, UPDATED about twenty), so one
probe moves EM or F1 by several points. ``results.jsonl`` holds each set's mean and, since it
records ``n_probes``, its size, but not per-probe scores; so the test uses what a rate and its
``n`` allow: the Agresti–Caffo 95% interval of the difference of two proportions (each rate
taken as ``x/n`` with one success and one failure added; Agresti & Caffo 2000). A cell whose
interval holds 0 is within noise. For F1 (a mean of per-probe scores in [0, 1], not a count)
the binomial variance p(1-p) is the largest a mean p of such scores can have, so the test errs
towards calling a difference noise.

Perplexity is a mean of unbounded per-probe values, so no formula over the mean and ``n`` bounds
its spread; the lifelong runner keeps each probe's score (:mod:`tw_jax.evaluate.per_probe`) and
the test is a paired bootstrap over probes: draw ``n`` probe indices with replacement
(:data:`RESAMPLES` times, seed :data:`SEED`), recompute both models' mean perplexity on the same
draw, and take the 2.5th and 97.5th percentiles of the differences (method − INITIAL). A cell
whose interval holds 0 is within noise; so is a set of one probe, which has no spread to
resample. Runs written before per-probe scores were kept have no
such test, and the report says so.
"""

from __future__ import annotations

import math

import numpy as np

from tw_jax.evaluate.per_probe import PERPLEXITY_METRICS
from tw_jax.evaluate.results import METRICS

# Scores that are percentages of probes (or means of per-probe scores in [0, 1]).
RATE_METRICS: tuple[str, ...] = ("em", "f1", "em_previous", "f1_previous", "lt_em", "lt_f1",
                                 "rank_acc", "rank_acc_norm")
Z_95 = 1.959964
MARK = "~"
RESAMPLES = 1000
SEED = 0
_CHUNK = 4_000_000  # resampled indices held at once (32 MB), whatever the number of probes


def within_noise(value: float, n: float, baseline: float, baseline_n: float) -> bool:
    """Whether ``value`` (%, of ``n`` probes) and ``baseline`` (%, of ``baseline_n``) differ by
    no more than the 95% Agresti–Caffo interval allows (module docstring)."""
    smoothed = [(v / 100.0 * k + 1.0) / (k + 2.0) for v, k in ((value, n), (baseline, baseline_n))]
    spread = math.sqrt(sum(p * (1.0 - p) / (k + 2.0)
                           for p, k in zip(smoothed, (n, baseline_n), strict=True)))
    return abs(smoothed[0] - smoothed[1]) <= Z_95 * spread


def paired_bootstrap(values: np.ndarray, baseline: np.ndarray, *, resamples: int = RESAMPLES,
                     seed: int = SEED) -> tuple[float, float]:
    """The 95% percentile interval of ``mean(values) - mean(baseline)`` over ``resamples``
    draws of the probes with replacement, the same draw for both (``values[i]`` and
    ``baseline[i]`` are one probe's per-probe perplexities under the two models)."""
    values, baseline = (np.asarray(a, np.float64).reshape(-1) for a in (values, baseline))
    n = len(values)
    if n == 0 or len(baseline) != n:
        raise ValueError(f"a paired bootstrap needs two equal, non-empty sets ({n} and "
                         f"{len(baseline)} probes)")
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK // n)
    differences = []
    for start in range(0, resamples, rows):
        draw = rng.integers(0, n, size=(min(rows, resamples - start), n))
        differences.append(values[draw].mean(axis=1) - baseline[draw].mean(axis=1))
    low, high = np.percentile(np.concatenate(differences), [2.5, 97.5])
    return float(low), float(high)


def bootstrap_within_noise(values: np.ndarray, baseline: np.ndarray) -> bool:
    """Whether the paired bootstrap interval of the difference holds 0 (module docstring). One
    probe has no spread to resample (every draw is that probe): its difference is no evidence,
    so it counts as noise."""
    if len(values) < 2:
        return True
    low, high = paired_bootstrap(values, baseline)
    return low <= 0.0 <= high


def can_test(metric: str) -> bool:
    """Whether :func:`within_noise` applies to ``metric`` (a rate, not a perplexity)."""
    return metric in RATE_METRICS and metric in METRICS


def noise_note(metric: str, counted: bool, per_probe: bool = False) -> str:
    """The table note that says how cells were (or why they were not) marked; ``per_probe``:
    whether per-probe scores of ``metric`` were found (perplexities)."""
    if not counted:
        return ("n: these results do not record how many probes each set had (written before "
                "n_probes), so no cell is tested against sampling noise.")
    if can_test(metric):
        return (f"n = probes behind each column. {MARK} marks a score whose difference to "
                "INITIAL's is within sampling noise: the 95% Agresti–Caffo interval of the "
                "difference of two rates over n probes holds 0 (for F1 it uses the largest "
                "variance a mean in [0, 1] can have, so it leans towards noise).")
    if metric in PERPLEXITY_METRICS and per_probe:
        return (f"n = probes behind each column. {MARK} marks a perplexity whose difference to "
                "INITIAL's is within sampling noise: a paired bootstrap over the n probes "
                f"({RESAMPLES} resamples with replacement, seed {SEED}; both means recomputed on "
                "each) gives a 95% percentile interval of the difference that holds 0, or n is 1. "
                "A cell without per-probe scores of both models on the same probes is not tested.")
    return ("n = probes behind each column. Perplexity cells are not tested against sampling "
            "noise: these results come without per-probe scores (runs written before "
            "per_probe/ files were kept), which the test needs; with n this small, read "
            "differences of a few percent as unproven.")
