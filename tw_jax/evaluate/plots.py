"""PNG figures of the TemporalWiki paper from a :class:`~tw_jax.evaluate.report.ResultIndex`.

- :func:`plot_learned_kept` — the report's opening figure: per trained method and month, the
  change of probe perplexity on CHANGED (learning, x) against the change on UNCHANGED
  (forgetting, y), both relative to INITIAL, so the stability-plasticity trade-off shows at a
  glance (lower left: learned and kept).
- :func:`plot_relative_propn` — Fig. 3: proper-noun perplexity relative to INITIAL per month,
  one panel for TWiki-DiffSets and one for NON-TWiki-DiffSets, a line per method.
- :func:`plot_probe_average` — Fig. 4: the stability-plasticity average of probe perplexity per
  month, a line of points per method (the axis spans the data, not from 0, so bars would lie).
- :func:`plot_misalignment` — Fig. 5: for each trained method a heatmap of probe perplexity on
  NEW (CHANGED when scored) with the training month on one axis and the evaluation month on the
  other; all panels share one colour scale, so equal shades are equal numbers; darker is better
  (lower).

Every figure draws a method in its colour from :mod:`tw_jax.evaluate.colours`, the same in all
of them. matplotlib runs on the Agg backend (no display). Every figure has a title, axis labels and a
legend or colour bar; a figure without data is not written (the function returns None). A figure
is rendered into memory and written atomically, into a local folder or a bucket (``gs://``).
"""

from __future__ import annotations

import io
import math
import os
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from tw_jax.evaluate.colours import method_colours  # noqa: E402
from tw_jax.evaluate.report import ResultIndex, probe_average  # noqa: E402
from tw_jax.evaluate.results import BASE, NO_MONTH  # noqa: E402
from tw_jax.evaluate.summary import learned_category, learned_kept  # noqa: E402
from tw_jax.io import paths  # noqa: E402
from tw_jax.io.atomic import atomic_open  # noqa: E402
from tw_jax.time import Period  # noqa: E402

PathLike = str | os.PathLike[str]

DPI = 120
LEARNED_KEPT = "fig1_learned_kept.png"
LEARNED_COST = "fig6_learned_cost.png"
# What to read from each figure: report.md puts the sentence above it.
CAPTIONS = {
    "fig1_learned_kept": (
        "Each point is one method's model after its update through a month, against INITIAL "
        "on that month's probes: left of 0 it learned what changed (perplexity on CHANGED "
        "fell), above 0 it forgot what stayed (perplexity on UNCHANGED rose). The shaded lower "
        "left is the goal; a point far left but high trades forgetting for learning; points "
        "at 0, 0 did nothing."),
    "fig6_learned_cost": (
        "What each update learned against what it cost: per method and month, the change of "
        "perplexity on CHANGED against INITIAL (down: learned) over the tokens the update "
        "trained on (log scale). Lower and further left is more learning for less training; "
        "TemporalWiki's DIFF sits far left of FULL at about the same height."),
    "fig4_probe_average": (
        "The one-number form of the trade-off (TemporalWiki Fig. 4): the mean of UNCHANGED "
        "and CHANGED perplexity per month, lower is better. Its axis does not start at 0; "
        "read the gaps between methods, and the figure above for what they are made of."),
    "fig3_relative_propn": (
        "Proper-noun perplexity relative to INITIAL (dashed line at 1) on the month's changed "
        "articles (left) and on articles that did not change (right): below 1 the update "
        "made the model better at names there, above 1 worse."),
    "fig5_misalignment": (
        "Each panel is one method: a row is the model trained through a month, a column the "
        "month whose probes it answers; all panels share one colour scale, darker is lower "
        "perplexity. A model is usually best on its own month (the diagonal); a lighter cell "
        "left of it shows the update forgot the earlier month's facts."),
}
MONTH_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
PROPN_PANELS = (("diffset", "propn_ppl_diffset", "TWiki-DiffSets"),
                ("nondiff", "propn_ppl_nondiff", "NON-TWiki-DiffSets"))


def _save(figure: plt.Figure, path: PathLike, layout: bool = True) -> paths.Path:
    if layout:
        figure.tight_layout()
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=DPI)
    plt.close(figure)
    with atomic_open(path, "wb") as handle:
        handle.write(png.getvalue())
    return paths.as_path(path)


def _initial(index: ResultIndex, month: Period, category: str, metric: str) -> float | None:
    return index.get("initial", BASE, month, category, metric)


def plot_learned_kept(
    index: ResultIndex, path: PathLike, metric: str = "ppl"
) -> paths.Path | None:
    """The opening figure: learning (x) against forgetting (y) per method and month."""
    points = learned_kept(index, metric)
    if not points:
        return None
    colours = method_colours(index.methods())
    months = sorted({month for _, month, _, _ in points})
    marker = {m: MONTH_MARKERS[i % len(MONTH_MARKERS)] for i, m in enumerate(months)}
    figure, axis = plt.subplots(figsize=(7.6, 5.4))
    xs, ys = [p[2] for p in points], [p[3] for p in points]
    pad = max(2.0, 0.12 * max(map(abs, xs + ys)))
    left, right = min(0.0, *xs) - pad, max(0.0, *xs) + pad
    bottom, top = min(0.0, *ys) - pad, max(0.0, *ys) + pad
    axis.axvspan(left, 0.0, ymin=0.0, ymax=(0.0 - bottom) / (top - bottom), color="#2ca02c",
                 alpha=0.08, linewidth=0)
    for (x, y, text) in ((left, bottom, "learned and kept"), (left, top, "learned, forgot"),
                         (right, bottom, "kept, did not learn"), (right, top, "neither")):
        axis.text(x, y, text, ha="left" if x < 0 else "right", va="bottom" if y < 0 else "top",
                  fontsize=8, color="grey")
    axis.axhline(0.0, color="grey", linewidth=1)
    axis.axvline(0.0, color="grey", linewidth=1)
    methods = list(dict.fromkeys(p[0] for p in points))
    for method in methods:
        mine = [p for p in points if p[0] == method]
        axis.plot([p[2] for p in mine], [p[3] for p in mine], color=colours[method],
                  linewidth=0.8, alpha=0.6)
        for _, month, x, y in mine:
            axis.scatter(x, y, color=colours[method], marker=marker[month], s=55, zorder=3)
        axis.annotate(method.upper(), (mine[-1][2], mine[-1][3]), xytext=(7, 7),
                      textcoords="offset points", fontsize=8, color=colours[method])
    axis.set_xlim(left, right)
    axis.set_ylim(bottom, top)
    learned = learned_category(index, metric).upper()
    axis.set_xlabel(f"{metric} on {learned} vs INITIAL (%) — left: learned what changed")
    axis.set_ylabel(f"{metric} on UNCHANGED vs INITIAL (%) — up: forgot what stayed")
    axis.set_title("What each update learned and kept (0 = INITIAL)")
    _method_month_legend(axis, colours, methods, marker, months)
    return _save(figure, path)


def _method_month_legend(axis: Any, colours: dict[str, str], methods: list[str],
                         marker: dict[Period, str], months: list[Period]) -> None:
    """The legend of a per-method, per-month scatter: a colour per method, a marker per month."""
    handles = [plt.Line2D([], [], color=colours[m], marker="o", linestyle="", label=m.upper())
               for m in methods]
    handles += [plt.Line2D([], [], color="grey", marker=marker[m], linestyle="",
                           label=f"month {m.label}") for m in months]
    axis.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))


def plot_learned_cost(
    index: ResultIndex, path: PathLike, metric: str = "ppl"
) -> paths.Path | None:
    """Learning (y) against the tokens each update trained on (x, log scale); None unless
    some update recorded its tokens."""
    points = []
    for method, month, learned, _ in learned_kept(index, metric):
        tokens = index.get(method, month, NO_MONTH, "all", "train_tokens")
        if tokens:
            points.append((method, month, learned, tokens))
    if not points:
        return None
    colours = method_colours(index.methods())
    months = sorted({month for _, month, _, _ in points})
    marker = {m: MONTH_MARKERS[i % len(MONTH_MARKERS)] for i, m in enumerate(months)}
    figure, axis = plt.subplots(figsize=(7.6, 4.6))
    axis.axhline(0.0, color="grey", linewidth=1)
    methods = list(dict.fromkeys(p[0] for p in points))
    for method in methods:
        mine = [p for p in points if p[0] == method]
        for _, month, learned, tokens in mine:
            axis.scatter(tokens, learned, color=colours[method], marker=marker[month], s=55,
                         zorder=3)
        axis.annotate(method.upper(), (mine[-1][3], mine[-1][2]), xytext=(7, 7),
                      textcoords="offset points", fontsize=8, color=colours[method])
    axis.set_xscale("log")
    learned = learned_category(index, metric).upper()
    axis.set_xlabel("tokens the update trained on (log scale)")
    axis.set_ylabel(f"{metric} on {learned} vs INITIAL (%) — down: learned")
    axis.set_title("What each update learned for what it cost")
    _method_month_legend(axis, colours, methods, marker, months)
    return _save(figure, path)


def plot_relative_propn(index: ResultIndex, path: PathLike) -> paths.Path | None:
    """Fig. 3: each method's proper-noun perplexity divided by INITIAL's, per month."""
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    drawn = False
    colours = method_colours(index.methods())
    for axis, (category, metric, label) in zip(axes, PROPN_PANELS, strict=True):
        months = index.eval_months(metric)
        for method in index.methods():
            if method == "initial":
                continue
            xs, ys = [], []
            for month in months:
                value, base = index.aligned(method, month, category, metric), _initial(
                    index, month, category, metric)
                if value is not None and base:
                    xs.append(month.label)
                    ys.append(value / base)
            if ys:
                axis.plot(xs, ys, marker="o", label=method.upper(), color=colours[method])
                drawn = True
        axis.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="INITIAL")
        axis.set_title(label)
        axis.set_xlabel("month (trained through = evaluated)")
        axis.set_ylabel("proper-noun perplexity / INITIAL")
        axis.legend(fontsize="small")
    if not drawn:
        plt.close(figure)
        return None
    figure.suptitle("Relative proper-noun perplexity (lower is better)")
    return _save(figure, path)


def plot_probe_average(
    index: ResultIndex, path: PathLike, metric: str = "ppl"
) -> paths.Path | None:
    """Fig. 4: stability-plasticity average probe perplexity per month and method."""
    months = index.eval_months(metric)
    methods = index.methods()
    bars = {m: [probe_average(index, m, month, metric) for month in months] for m in methods}
    bars = {m: v for m, v in bars.items() if any(x is not None for x in v)}
    if not bars:
        return None
    colours = method_colours(index.methods())
    figure, axis = plt.subplots(figsize=(max(6.0, 1.6 * len(months) + 3), 4.2))
    for method, values in bars.items():
        ys = [math.nan if v is None else v for v in values]
        axis.plot(range(len(months)), ys, marker="o", label=method.upper(),
                  color=colours[method])
    labels, style = _tick_labels(months)
    axis.set_xticks(range(len(months)), labels, **style)
    axis.set_xlabel("month of the update and of its probes")
    axis.set_ylabel(f"average probe {metric} (lower is better; axis not from 0)")
    axis.set_title("Stability-plasticity average of TWiki-Probes perplexity")
    axis.legend(fontsize="small", title="method", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(figure, path)


Panel = tuple[str, list[Period], list[Period], list[list[float | None]]]


def _tick_labels(periods: list[Period]) -> tuple[list[str], dict[str, object]]:
    """Tick labels of periods, and how to draw them: slanted when they carry years
    (``2024-12→2025-01`` would overlap its neighbours), level for the 2021 layout's ``0809``."""
    labels = [p.label for p in periods]
    if all(p.legacy for p in periods):
        return labels, {}
    return labels, {"rotation": 30, "ha": "right"}


def misalignment_panels(index: ResultIndex, category: str, metric: str = "ppl") -> list[Panel]:
    """Fig. 5's panels: ``(method, trained months, evaluated months, grid)`` of every trained
    method with at least one number."""
    panels = []
    for method in [m for m in index.methods() if index.trained_months(m)]:
        trained = index.trained_months(method)
        evaluated = index.eval_months(metric)
        grid = [[index.get(method, t, e, category, metric) for e in evaluated] for t in trained]
        if any(v is not None for row in grid for v in row):
            panels.append((method, trained, evaluated, grid))
    return panels


def shared_scale(panels: list[Panel]) -> tuple[float, float]:
    """The one colour scale of all panels: the lowest and highest number any of them holds."""
    known = [v for _, _, _, grid in panels for row in grid for v in row if v is not None]
    return min(known), max(known)


def plot_misalignment(
    index: ResultIndex, path: PathLike, metric: str = "ppl"
) -> paths.Path | None:
    """Fig. 5: probe perplexity by training month (rows) × evaluation month (columns)."""
    category = learned_category(index, metric)
    panels = misalignment_panels(index, category, metric)
    if not panels:
        return None
    low, high = shared_scale(panels)
    scale = {"vmin": low, "vmax": high}  # one scale: equal shade, equal number
    figure, axes = plt.subplots(1, len(panels), figsize=(3.8 * len(panels) + 1.2, 4.0),
                                squeeze=False)
    for axis, (method, trained, evaluated, grid) in zip(axes[0], panels, strict=True):
        values = [[math.nan if v is None else v for v in row] for row in grid]
        image = axis.imshow(values, cmap="Blues_r", aspect="auto", **scale)  # darker = better
        for r, row in enumerate(grid):
            for c, value in enumerate(row):
                label = "n/a" if value is None else f"{value:.1f}"
                axis.text(c, r, label, ha="center", va="center", fontsize=8, color="black",
                          bbox={"facecolor": "white", "alpha": 0.6, "linewidth": 0, "pad": 1})
        labels, style = _tick_labels(evaluated)
        axis.set_xticks(range(len(evaluated)), labels, **style)
        axis.set_yticks(range(len(trained)), [p.label for p in trained])
        axis.set_xlabel("evaluated on probes of")
        if axis is axes[0][0]:
            axis.set_ylabel("trained through")
        axis.set_title(method.upper())
    figure.suptitle(f"Temporal misalignment: {metric} on {category.upper()} (darker is better)")
    right = 1.0 - 1.1 / figure.get_figwidth()  # room for one colour bar and its label
    figure.tight_layout(rect=(0.0, 0.0, right, 1.0))
    bar = figure.add_axes((right + 0.15 / figure.get_figwidth(), 0.15,
                           0.15 / figure.get_figwidth(), 0.7))
    figure.colorbar(image, cax=bar, label=f"{metric} on {category.upper()} (one scale for all)")
    return _save(figure, path, layout=False)


def write_plots(index: ResultIndex, out_dir: PathLike) -> list[paths.Path]:
    """Every figure the results support, as ``fig1_learned_kept.png``,
    ``fig3_relative_propn.png`` etc. in a local folder
    or a bucket; returns paths."""
    made = [
        plot_learned_kept(index, paths.join(out_dir, LEARNED_KEPT)),
        plot_learned_cost(index, paths.join(out_dir, LEARNED_COST)),
        plot_relative_propn(index, paths.join(out_dir, "fig3_relative_propn.png")),
        plot_probe_average(index, paths.join(out_dir, "fig4_probe_average.png")),
        plot_misalignment(index, paths.join(out_dir, "fig5_misalignment.png")),
    ]
    return [p for p in made if p is not None]
