"""Tables of the papers from ``results.jsonl`` files: Markdown for reading, CSV for tools.

- :func:`probe_table` — TemporalWiki Tables 3/4/6: methods × months × Un/Up/New/Del (plus Chg
  and Avg when CHANGED was scored), with each method's mean training time per update. Which
  table depends on the metric: ``ppl`` (Table 3, zero-shot), ``lt_ppl`` (Table 4, light-tuned),
  ``lt_f1`` (Table 6), and likewise any other probe metric.
- :func:`ckl_table` — CKL Table 2: EM on IL/UL/NL/NLE (``unchanged``/``updated``/``new``/
  ``new_easy``) of each method's latest model, and FUAR over all its phases.

A month column shows each method's model *aligned* with it: trained through that period and
evaluated on its probes; a method without period-trained models (INITIAL) shows its ``base``
model. Missing numbers print as ``-``. Periods are columns in date order, headed by their label
(:attr:`tw_jax.time.Period.label`: ``2024-12→2025-01``; ``0809`` in the 2021 layout).

FUAR tasks from TemporalWiki-style months ``m_1 < … < m_n`` (phase ``i`` = trained through
``m_i``, phase 0 = ``base``): ``T^U_i`` = UPDATED of ``m_i``, ``T^A_i`` = NEW of ``m_i``,
``T^F_j`` = UNCHANGED of ``m_{j+1}`` (facts of snapshot ``j`` that still hold). Phase-0 scores
come from the method's own ``base`` results, else from ``initial``'s (every method starts from
INITIAL). A task lacking any needed score is left undefined, as CKL eq. 1 allows.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tw_jax.evaluate.fuar import (
    Fuar,
    fuar,
    stability_plasticity_final,
    stability_plasticity_preprint,
)
from tw_jax.evaluate.groups import OPEN_BOOK
from tw_jax.evaluate.noise import (
    MARK,
    bootstrap_within_noise,
    can_test,
    noise_note,
    within_noise,
)
from tw_jax.evaluate.per_probe import PERPLEXITY_METRICS, ProbeIndex, ProbeScores
from tw_jax.evaluate.results import (
    BASE,
    METHODS,
    METRICS,
    NO_MONTH,
    REPORT,
    TWIKI_PROBES,
    Result,
    metric_spec,
)
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.time import Evaluated, Period, Trained

CATEGORY_LABELS = {"unchanged": "Un", "updated": "Up", "new": "New", "deleted": "Del",
                   "changed": "Chg"}
CKL_LABELS = {"unchanged": "IL", "updated": "UL", "new": "NL", "new_easy": "NLE"}
TABLE_TITLES = {
    "ppl": "Zero-shot perplexity on TWiki-Probes (TemporalWiki Table 3)",
    "lt_ppl": "Light-tuning perplexity on TWiki-Probes (TemporalWiki Table 4)",
    "lt_f1": "F1 on TWiki-Probes after light-tuning (TemporalWiki Table 6)",
}
MISSING = "-"
# Results that are no probe scores: counts and times, shown inside other tables.
NOT_SCORES: tuple[str, ...] = ("train_seconds", "train_steps", "compile_seconds", "train_tokens",
                               "train_flops", "n_probes")


def tabulated(result: Result) -> bool:
    """Whether these tables show a result: another benchmark's lines in the same results.jsonl
    (ECBD's, whose cells have a slice and no month) are left to its own report."""
    spec = metric_spec(result.metric)
    return spec is not None and spec.tables == REPORT and not result.slice


def tabulated_elsewhere(results: Iterable[Result]) -> dict[str, int]:
    """How many results each other command tabulates (``{"tw-jax ecbd report": 24}``)."""
    counts: dict[str, int] = {}
    for result in results:
        if not tabulated(result):
            spec = metric_spec(result.metric)
            command = spec.tables if spec is not None else "no command"
            counts[command] = counts.get(command, 0) + 1
    return counts


class ResultIndex:
    """Results looked up by (method, trained_through, eval_month, category, metric); those
    another command tabulates (:func:`tabulated`) are left out."""

    def __init__(self, results: Iterable[Result], probes: ProbeIndex | None = None) -> None:
        self.values = {r.key: r.value for r in results if tabulated(r)}
        self.per_probe = dict(probes or {})  # per-probe perplexity scores, where runs kept them

    def get(self, method: str, trained: Trained, month: Evaluated, category: str,
            metric: str) -> float | None:
        return self.values.get((method, trained, month, category, metric))

    def methods(self) -> list[str]:
        found = {k[0] for k in self.values}
        return [m for m in METHODS if m in found] + sorted(found - set(METHODS))

    def eval_months(self, metric: str | None = None) -> list[Period]:
        """The evaluated periods (with results for ``metric``), in date order."""
        return sorted({k[2] for k in self.values if k[2] != NO_MONTH
                       and (metric is None or k[4] == metric)})

    def trained_months(self, method: str, metric: str | None = None) -> list[Period]:
        """Periods the method's models were trained through (with results for ``metric``), in
        date order."""
        return sorted({k[1] for k in self.values if k[0] == method and k[1] != BASE
                       and (metric is None or k[4] == metric)})

    def metrics(self) -> set[str]:
        return {k[4] for k in self.values}

    def categories(self, metric: str) -> set[str]:
        return {k[3] for k in self.values if k[4] == metric}

    def aligned(self, method: str, month: Period, category: str, metric: str) -> float | None:
        """The method's model trained through ``month`` on ``month``'s set, else its base model."""
        key = self.aligned_key(method, month, category, metric)
        return None if key is None else self.values[key]

    def aligned_key(self, method: str, month: Period, category: str,
                    metric: str) -> tuple[str, Trained, Period, str, str] | None:
        """The key of :meth:`aligned`'s number (None: there is none)."""
        key = (method, month, month, category, metric)
        if key not in self.values and not self.trained_months(method):
            key = (method, BASE, month, category, metric)
        return key if key in self.values else None

    def train_hours(self, method: str) -> float | None:
        """Mean wall-clock hours of one update (0 for a method never trained)."""
        seconds = self._mean(method, "train_seconds")
        if seconds is not None:
            return seconds / 3600.0
        return 0.0 if not self.trained_months(method) else None

    def per_update(self, method: str, metric: str) -> float | None:
        """Mean of a cost metric (``train_tokens``, ``train_flops``, ...) over the method's
        updates; None when not recorded."""
        return self._mean(method, metric)

    def _mean(self, method: str, metric: str) -> float | None:
        """Mean of ``metric`` over the method's results (its updates, for the time metrics)."""
        values = [v for k, v in self.values.items() if k[0] == method and k[4] == metric]
        return sum(values) / len(values) if values else None

    def time_cell(self, method: str) -> str:
        """The Time column: mean time of one update; where recorded, split into training and
        the compiling first step, with the steps trained, so methods with different step
        counts compare ("5 s train + 29 s compile (27 steps)")."""
        hours = self.train_hours(method)
        steps, compiled = self._mean(method, "train_steps"), self._mean(method, "compile_seconds")
        if steps is None or hours is None:
            return fmt_hours(hours)
        if compiled is None:
            return f"{fmt_hours(hours)} ({steps:.0f} steps)"
        trained = max(0.0, hours - compiled / 3600.0)
        return (f"{fmt_hours(trained)} train + {fmt_hours(compiled / 3600.0)} compile "
                f"({steps:.0f} steps)")

    def probes(self, month: Period, category: str) -> str | None:
        """``n=21`` (``n=20-21`` when methods saw different counts) of a month's category, from
        ``n_probes``; None when not recorded."""
        counts = sorted({int(v) for k, v in self.values.items()
                         if k[2] == month and k[3] == category and k[4] == "n_probes"})
        if not counts:
            return None
        return f"n={counts[0]}" if len(counts) == 1 else f"n={counts[0]}-{counts[-1]}"

    def noisy(self, method: str, month: Period, category: str, metric: str) -> bool:
        """Whether the method's aligned score differs from INITIAL's by no more than sampling
        noise (:mod:`tw_jax.evaluate.noise`); False when it cannot be told."""
        if method == "initial":
            return False
        if metric in PERPLEXITY_METRICS:
            return self._paired_noise(method, month, category, metric)
        if not can_test(metric):
            return False
        pairs = [(self.aligned(m, month, category, metric),
                  self.aligned(m, month, category, "n_probes")) for m in (method, "initial")]
        if any(v is None or not k for v, k in pairs):
            return False
        (value, n), (base, base_n) = pairs
        return within_noise(value, n, base, base_n)

    def _paired_noise(self, method: str, month: Period, category: str, metric: str) -> bool:
        """The paired bootstrap over probes of a perplexity, where both models kept per-probe
        scores of the same probes that give the numbers shown."""
        scores = [self._shown_scores(self.aligned_key(m, month, category, metric))
                  for m in (method, "initial")]
        if scores[0] is None or scores[1] is None or not scores[0].pairs_with(scores[1]):
            return False
        return bootstrap_within_noise(scores[0].perplexities(), scores[1].perplexities())

    def _shown_scores(self, key: tuple[str, Trained, Period, str, str] | None
                      ) -> ProbeScores | None:
        """Per-probe scores whose mean is the number shown for ``key`` (a per-probe file left
        by another evaluation than the results line's is not used)."""
        scores = self.per_probe.get(key) if key is not None else None
        if scores is None or not math.isclose(scores.mean(), self.values[key], rel_tol=1e-9):
            return None
        return scores

    def has_probes(self, metric: str) -> bool:
        """Whether any per-probe scores of ``metric`` were kept."""
        return any(key[4] == metric for key in self.per_probe)


@dataclass
class Table:
    """A rendered-to-be table: ``headers`` and rows of cells (already formatted strings)."""

    name: str
    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.headers) + " |",
                 "|" + "|".join("---" if i == 0 else "---:" for i in range(len(self.headers))) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.notes:
            lines += [""] + [f"- {note}" for note in self.notes]
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.headers)
        writer.writerows(self.rows)
        return out.getvalue()


def fmt(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def with_n(label: str, count: str | None) -> str:
    """A column header with its number of probes: ``0809 Up (n=21)``, ``Un (kept, n=400)``."""
    if count is None:
        return label
    return f"{label[:-1]}, {count})" if label.endswith(")") else f"{label} ({count})"


def fmt_count(value: float | None) -> str:
    """A token or FLOP count as people write it: ``41.2K``, ``3.10M``, ``2.4e+15``."""
    if value is None:
        return MISSING
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.0f}"


def fmt_hours(hours: float | None) -> str:
    """Hours as the papers print them; short updates (a demo's) in minutes or seconds."""
    if hours is None:
        return MISSING
    if hours == 0:
        return "0 h"
    if hours >= 0.1:
        return f"{hours:.2f} h"
    seconds = hours * 3600.0
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def probe_average(index: ResultIndex, method: str, month: Period, metric: str) -> float | None:
    """Stability-plasticity average: mean(Un, Chg) when CHANGED was scored (final paper), else
    0.5·Un + 0.25·Up + 0.25·New (preprint)."""
    get = lambda c: index.aligned(method, month, c, metric)  # noqa: E731
    un, chg = get("unchanged"), get("changed")
    if un is not None and chg is not None:
        return stability_plasticity_final(un, chg)
    up, new = get("updated"), get("new")
    if None in (un, up, new):
        return None
    return stability_plasticity_preprint(un, up, new)


def probe_table(index: ResultIndex, metric: str, probe_set: str = TWIKI_PROBES) -> Table:
    """Methods × months × categories of one probe metric, with training time."""
    months = index.eval_months(metric)
    present = index.categories(metric)
    categories = [c for c in CATEGORY_LABELS if c in present]
    with_avg = "unchanged" in present and (
        "changed" in present or {"updated", "new"} <= present
    )
    headers = ["Method", "Time"]
    for month in months:
        headers += [with_n(f"{month.label} {CATEGORY_LABELS[c]}", index.probes(month, c))
                    for c in categories]
        headers += [f"{month.label} Avg"] if with_avg else []
    rows = []
    for method in index.methods():
        cells = [method.upper(), index.time_cell(method)]
        for month in months:
            cells += [fmt(index.aligned(method, month, c, metric))
                      + (MARK if index.noisy(method, month, c, metric) else "")
                      for c in categories]
            if with_avg:
                cells.append(fmt(probe_average(index, method, month, metric)))
        if any(c != MISSING for c in cells[2:]):
            rows.append(cells)
    spec = METRICS[metric]
    notes = [f"{metric}: {spec.description}; {'lower' if spec.lower_is_better else 'higher'} "
             "is better.",
             "Each month shows the model trained through that month on that month's probes; "
             "Time is the mean wall-clock time of one update; where recorded, split into "
             "training and the first step (which compiles the training step), with the steps "
             "trained: compare methods by training time and steps, not by the total.",
             noise_note(metric, "n_probes" in index.metrics(), index.has_probes(metric))]
    if with_avg:
        notes.append("Avg = mean of Un and Chg when CHANGED was scored (final TemporalWiki), "
                     "else 0.5 Un + 0.25 Up + 0.25 New (preprint).")
    book = [m.upper() for m in index.methods() if m in OPEN_BOOK]
    if book and any(row[0] in book for row in rows):
        notes.append(f"{', '.join(book)}: open book, INITIAL reading each probe after the "
                     "passages that retriever found for it in that month's snapshot; its Time "
                     "is building that month's index.")
    title = f"{metric} on {probe_set}"
    if probe_set == TWIKI_PROBES:
        title = TABLE_TITLES.get(metric, title)
    return Table(f"table_{metric}", title, headers, rows, notes)


def _phase_score(
    index: ResultIndex, method: str, phase: Trained, month: Period, category: str, metric: str
) -> float | None:
    value = index.get(method, phase, month, category, metric)
    if value is None and phase == BASE:
        value = index.get("initial", BASE, month, category, metric)
    return value


def method_fuar(index: ResultIndex, method: str, metric: str = "em") -> Fuar | None:
    """FUAR of a method over its phases (tasks as in the module docstring); None if no phase
    was trained or no task is defined."""
    months = index.trained_months(method, metric)
    if not months:
        return None
    phases: list[Trained] = [BASE, *months]
    evaluated = index.eval_months(metric)

    def series(category: str, month: Period) -> list[float | None]:
        return [_phase_score(index, method, p, month, category, metric) for p in phases]

    scores: dict[str, list[float | None]] = {}
    forget: list[str | None] = []
    update: list[str | None] = [None]
    acquire: list[str | None] = [None]

    def define(category: str, month: Period | None, needed: Sequence[int]) -> str | None:
        if month is None or month not in evaluated:
            return None
        name = f"{category}@{month}"
        values = scores.setdefault(name, series(category, month))
        return name if all(values[p] is not None for p in needed) else None

    last = len(phases) - 1
    for j in range(len(phases)):
        next_month = months[j] if j < len(months) else None
        forget.append(define("unchanged", next_month, range(j, last + 1)) if j < last else None)
    for i in range(1, len(phases)):
        update.append(define("updated", months[i - 1], (i - 1, i)))
        acquire.append(define("new", months[i - 1], (i - 1, i)))
    used = {t for t in forget + update + acquire if t is not None}
    if not used:
        return None
    filled = {k: [0.0 if v is None else v for v in vals] for k, vals in scores.items() if k in used}
    return fuar(filled, forget, update, acquire)


def ckl_table(index: ResultIndex, metric: str = "em") -> Table:
    """CKL Table 2: each method's latest model on IL/UL/NL/NLE, and FUAR over its phases."""
    categories = [c for c in CKL_LABELS if c in index.categories(metric)]
    headers = ["Method", *[f"{CKL_LABELS[c]} {metric.upper()}" for c in categories], "FUAR"]
    months = index.eval_months(metric)
    rows = []
    for method in index.methods():
        trained = index.trained_months(method, metric)
        phase = trained[-1] if trained else BASE
        month = trained[-1] if trained else (months[-1] if months else None)
        if month is None:
            continue
        cells = [fmt(_phase_score(index, method, phase, month, c, metric)) for c in categories]
        if all(c == MISSING for c in cells):
            continue
        result = method_fuar(index, method, metric)
        rows.append([method.upper(), *cells, MISSING if result is None else str(result)])
    notes = [
        f"Scores of each method's latest model on its last month's sets ({metric}); INITIAL "
        "is the base model.",
        "FUAR (CKL eq. 1): forgotten UNCHANGED over gained UPDATED + NEW, over all phases; "
        "'no gain' when nothing was gained (the worst case); lower is better.",
    ]
    return Table(f"table_ckl_{metric}", f"CKL benchmark with FUAR ({metric})", headers, rows,
                 notes)


def all_tables(index: ResultIndex, probe_set: str = TWIKI_PROBES) -> list[Table]:
    """Every table the results support: one per probe metric present (titled by the probe
    sets they are on), and CKL's for EM."""
    present = index.metrics()
    tables = []
    for metric in METRICS:
        if metric in present and not metric.startswith("propn") and metric not in NOT_SCORES:
            tables.append(probe_table(index, metric, probe_set))
    if "em" in present:
        tables.append(ckl_table(index, "em"))
    return tables


def write_tables(tables: Sequence[Table], out_dir: str | os.PathLike[str]) -> list[paths.Path]:
    """``{name}.md`` and ``{name}.csv`` per table, written atomically into a local folder or a
    bucket; returns the paths."""
    written = []
    for table in tables:
        for suffix, text in ((".md", table.markdown()), (".csv", table.csv())):
            path = paths.join(out_dir, f"{table.name}{suffix}")
            with atomic_open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
            written.append(paths.as_path(path))
    return written
