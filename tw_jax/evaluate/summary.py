"""The first screen of a report: one table that tells the story, and which tables say nothing.

The story of continual knowledge learning is two numbers per method against the model it
started from: did it learn what changed (perplexity on CHANGED, or NEW, falls) and did it keep
what stayed (perplexity on UNCHANGED does not rise)? :func:`summary_table` puts them side by
side for the latest month, with the change relative to INITIAL, so a reader sees the trade-off
(TemporalWiki Fig. 4's stability-plasticity average is its one-number form) before the
per-paper tables.

A table whose every score is next to nothing carries no signal: a small model that answers
no probe exactly gives EM tables of zeros. :func:`without_signal` names the tables whose best
score stays under :data:`FLOOR_PERCENT` so the report lists them, with their best value,
instead of printing them (their Markdown and CSV files are still written).
"""

from __future__ import annotations

from tw_jax.evaluate.noise import MARK, noise_note
from tw_jax.evaluate.report import (
    MISSING,
    ResultIndex,
    Table,
    fmt,
    fmt_count,
    probe_average,
    with_n,
)
from tw_jax.evaluate.results import METRICS
from tw_jax.time import Period

FLOOR_PERCENT = 1.0  # below 1% right on every probe set, an accuracy table says nothing
_PERCENT_METRICS = ("em", "f1", "em_previous", "f1_previous", "lt_em", "lt_f1")
_BASELINE = "initial"


def _relative(value: float | None, baseline: float | None) -> str:
    change = percent_change(value, baseline)
    return MISSING if change is None else f"{change:+.0f}%"


def percent_change(value: float | None, baseline: float | None) -> float | None:
    """``value`` relative to ``baseline`` in percent (+7.0 = 7% higher); None when unknown."""
    if value is None or not baseline:
        return None
    return (value / baseline - 1.0) * 100


def learned_category(index: ResultIndex, metric: str = "ppl") -> str:
    """Where learning shows: CHANGED (UPDATED and NEW) when scored, else NEW."""
    return "changed" if "changed" in index.categories(metric) else "new"


def learned_kept(index: ResultIndex,
                 metric: str = "ppl") -> list[tuple[str, Period, float, float]]:
    """``(method, period, learned %, kept %)`` of every trained method and period: the change of
    ``metric`` on CHANGED (NEW) and on UNCHANGED against INITIAL's on the same probes, the two
    axes of the report's opening figure."""
    learned = learned_category(index, metric)
    points = []
    for method in index.methods():
        if method == _BASELINE:
            continue
        for month in index.eval_months(metric):
            x, y = (percent_change(index.aligned(method, month, c, metric),
                                   index.aligned(_BASELINE, month, c, metric))
                    for c in (learned, "unchanged"))
            if x is not None and y is not None:
                points.append((method, month, x, y))
    return points


def summary_table(index: ResultIndex, metric: str = "ppl") -> Table | None:
    """Methods × (kept, learned, average) of ``metric`` on the latest month (module docstring);
    None when no month has it for at least two methods."""
    months = [m for m in index.eval_months(metric)
              if sum(index.aligned(method, m, "unchanged", metric) is not None
                     for method in index.methods()) >= 2]
    if not months:
        return None
    month = months[-1]
    learned = learned_category(index, metric)
    label = {"changed": "Chg", "new": "New"}[learned]
    baseline = {c: index.aligned(_BASELINE, month, c, metric) for c in ("unchanged", learned)}
    costs = any(index.per_update(m, "train_tokens") is not None for m in index.methods())
    rows = []
    for method in index.methods():
        kept = index.aligned(method, month, "unchanged", metric)
        gained = index.aligned(method, month, learned, metric)
        if kept is None and gained is None:
            continue
        marks = [MARK if index.noisy(method, month, c, metric) else ""
                 for c in ("unchanged", learned)]
        rows.append([
            method.upper(), index.time_cell(method), fmt(kept) + marks[0], fmt(gained) + marks[1],
            fmt(probe_average(index, method, month, metric)),
            MISSING if method == _BASELINE else _relative(kept, baseline["unchanged"]),
            MISSING if method == _BASELINE else _relative(gained, baseline[learned]),
        ] + ([fmt_count(index.per_update(method, "train_tokens")),
              fmt_count(index.per_update(method, "train_flops"))] if costs else []))
    better = "lower" if METRICS[metric].lower_is_better else "higher"
    kept_n, learned_n = (index.probes(month, c) for c in ("unchanged", learned))
    headers = ["Method", "Time", with_n("Un (kept)", kept_n),
               with_n(f"{label} (learned)", learned_n), "Avg", "Un vs INITIAL",
               f"{label} vs INITIAL"] + (["Tokens", "FLOPs"] if costs else [])
    comparison = diff_against_full(index, metric)
    notes = [*([comparison] if comparison else []),
        f"{metric} on month {month.label}'s probes of each method's model after its update "
        f"through {month.label} ({better} is better). Un: facts that stayed, where forgetting shows; "
        f"{label}: {'updated and new' if learned == 'changed' else 'new'} facts, where "
        "learning shows; Avg as in the tables below.",
        "vs INITIAL: the change from the model every update starts from."
        + (" Tokens and FLOPs: what one update trained on (unmasked inputs and targets) and "
           "its model FLOPs (forward and backward), per update." if costs else ""),
        noise_note(metric, "n_probes" in index.metrics(), index.has_probes(metric)),
    ]
    return Table(f"summary_{metric}",
                 f"Summary: what each update learned and kept ({month.label})",
                 headers, rows, notes)


def diff_against_full(index: ResultIndex, metric: str = "ppl") -> str | None:
    """TemporalWiki's headline, measured: DIFF against FULL on the learned facts and on the
    kept ones, at what share of FULL's tokens (its Section 5: DIFF about as good as FULL on
    changed facts at about 1/12 of the compute). None without both methods' scores."""
    learned = learned_category(index, metric)
    months = [m for m in index.eval_months(metric)
              if all(index.aligned(x, m, c, metric) is not None
                     for x in ("diff", "full") for c in ("unchanged", learned))]
    if not months:
        return None
    month = months[-1]
    lower = METRICS[metric].lower_is_better
    label = {"changed": "CHANGED", "new": "NEW"}[learned]
    parts = []
    for category, name in ((learned, label), ("unchanged", "UNCHANGED")):
        diff, full = (index.aligned(x, month, category, metric) for x in ("diff", "full"))
        parts.append(f"on {name} {fmt(diff)} against {fmt(full)} "
                     f"({_relative(diff, full)})")
    diff_tokens, full_tokens = (index.per_update(x, "train_tokens") for x in ("diff", "full"))
    cost = ""
    if diff_tokens and full_tokens:
        cost = (f", training on {diff_tokens / full_tokens:.1%} of FULL's tokens "
                f"({fmt_count(diff_tokens)} against {fmt_count(full_tokens)} per update)")
    diff_learned, full_learned = (index.aligned(x, month, learned, metric) for x in ("diff", "full"))
    ratio = diff_learned / full_learned if full_learned else 1.0
    better, within = (ratio < 0.95, ratio <= 1.05) if lower else (ratio > 1.05, ratio >= 0.95)
    if better:
        verdict = ("so here DIFF learns what changed better than FULL: TemporalWiki's finding "
                   "(DIFF about as good as FULL on what changed) holds, and more")
    elif within:
        verdict = ("so here, as in TemporalWiki, DIFF is about as good as FULL (within 5%) on "
                   "what changed")
    else:
        verdict = ("so at this scale TemporalWiki's finding (DIFF about as good as FULL on what "
                   "changed) does not hold")
    return (f"DIFF against FULL ({metric}, {month.label}): {'; '.join(parts)}{cost}; "
            f"{verdict}.")


def _scores(table: Table) -> list[float]:
    first = 2 if table.headers[:2] == ["Method", "Time"] else 1
    values = []
    for row in table.rows:
        for cell in row[first:]:
            try:
                values.append(float(cell.removesuffix(MARK)))
            except ValueError:
                continue
    return values


def without_signal(tables: list[Table]) -> dict[str, float]:
    """Accuracy-type tables (EM/F1, CKL's EM) whose best score is under :data:`FLOOR_PERCENT`,
    by name, with that best score."""
    quiet = {}
    for table in tables:
        metric = table.name.removeprefix("table_ckl_").removeprefix("table_")
        if metric not in _PERCENT_METRICS:
            continue
        scores = _scores(table)
        best = max(scores, default=0.0)
        if best < FLOOR_PERCENT:
            quiet[table.name] = best
    return quiet
