"""Is a score's difference to INITIAL more than sampling noise? And how many probes stand behind it.

A demo month has a handful of probes per category (DELETED one, UPDATED about twenty), so one
probe moves EM or F1 by several points. ``results.jsonl`` holds each set's mean and, since it
records ``n_probes``, its size, but not per-probe scores; so the test uses what a rate and its
``n`` allow: the Agresti–Caffo 95% interval of the difference of two proportions (each rate
taken as ``x/n`` with one success and one failure added; Agresti & Caffo 2000). A cell whose
interval holds 0 is within noise. For F1 (a mean of per-probe scores in [0, 1], not a count)
the binomial variance p(1-p) is the largest a mean p of such scores can have, so the test errs
towards calling a difference noise. Perplexity is a mean of unbounded per-probe values whose
spread the file does not hold: it is never marked, and the report says so.
"""

from __future__ import annotations

import math

from tw_jax.evaluate.results import METRICS

# Scores that are percentages of probes (or means of per-probe scores in [0, 1]).
RATE_METRICS: tuple[str, ...] = ("em", "f1", "em_previous", "f1_previous", "lt_em", "lt_f1",
                                 "rank_acc", "rank_acc_norm")
Z_95 = 1.959964
MARK = "~"


def within_noise(value: float, n: float, baseline: float, baseline_n: float) -> bool:
    """Whether ``value`` (%, of ``n`` probes) and ``baseline`` (%, of ``baseline_n``) differ by
    no more than the 95% Agresti–Caffo interval allows (module docstring)."""
    smoothed = [(v / 100.0 * k + 1.0) / (k + 2.0) for v, k in ((value, n), (baseline, baseline_n))]
    spread = math.sqrt(sum(p * (1.0 - p) / (k + 2.0)
                           for p, k in zip(smoothed, (n, baseline_n), strict=True)))
    return abs(smoothed[0] - smoothed[1]) <= Z_95 * spread


def can_test(metric: str) -> bool:
    """Whether :func:`within_noise` applies to ``metric`` (a rate, not a perplexity)."""
    return metric in RATE_METRICS and metric in METRICS


def noise_note(metric: str, counted: bool) -> str:
    """The table note that says how cells were (or why they were not) marked."""
    if not counted:
        return ("n: these results do not record how many probes each set had (written before "
                "n_probes), so no cell is tested against sampling noise.")
    if can_test(metric):
        return (f"n = probes behind each column. {MARK} marks a score whose difference to "
                "INITIAL's is within sampling noise: the 95% Agresti–Caffo interval of the "
                "difference of two rates over n probes holds 0 (for F1 it uses the largest "
                "variance a mean in [0, 1] can have, so it leans towards noise).")
    return ("n = probes behind each column. Perplexity cells are not tested against sampling "
            "noise: results.jsonl holds each set's mean perplexity, not the per-probe values "
            "an interval needs; with n this small, read differences of a few percent as "
            "unproven.")
