"""PNG figures of the TemporalWiki paper from a :class:`~tw_jax.evaluate.report.ResultIndex`.

- :func:`plot_relative_propn` — Fig. 3: proper-noun perplexity relative to INITIAL per month,
  one panel for TWiki-DiffSets and one for NON-TWiki-DiffSets, a line per method.
- :func:`plot_probe_average` — Fig. 4: the stability-plasticity average of probe perplexity per
  month, grouped bars per method.
- :func:`plot_misalignment` — Fig. 5: for each trained method a heatmap of probe perplexity on
  NEW (CHANGED when scored) with the training month on one axis and the evaluation month on the
  other; each panel has its own colour scale, darker is better (lower).

matplotlib runs on the Agg backend (no display). Every figure has a title, axis labels and a
legend or colour bar; a figure without data is not written (the function returns None). A figure
is rendered into memory and written atomically, into a local folder or a bucket (``gs://``).
"""

from __future__ import annotations

import io
import math
import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from tw_jax.evaluate.report import ResultIndex, probe_average  # noqa: E402
from tw_jax.evaluate.results import BASE  # noqa: E402
from tw_jax.io import paths  # noqa: E402
from tw_jax.io.atomic import atomic_open  # noqa: E402

PathLike = str | os.PathLike[str]

DPI = 120
PROPN_PANELS = (("diffset", "propn_ppl_diffset", "TWiki-DiffSets"),
                ("nondiff", "propn_ppl_nondiff", "NON-TWiki-DiffSets"))


def _save(figure: plt.Figure, path: PathLike) -> paths.Path:
    figure.tight_layout()
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=DPI)
    plt.close(figure)
    with atomic_open(path, "wb") as handle:
        handle.write(png.getvalue())
    return paths.as_path(path)


def _initial(index: ResultIndex, month: str, category: str, metric: str) -> float | None:
    return index.get("initial", BASE, month, category, metric)


def plot_relative_propn(index: ResultIndex, path: PathLike) -> paths.Path | None:
    """Fig. 3: each method's proper-noun perplexity divided by INITIAL's, per month."""
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    drawn = False
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
                    xs.append(month)
                    ys.append(value / base)
            if ys:
                axis.plot(xs, ys, marker="o", label=method.upper())
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
    figure, axis = plt.subplots(figsize=(max(6.0, 1.6 * len(months) + 3), 4.2))
    width = 0.8 / len(bars)
    for k, (method, values) in enumerate(bars.items()):
        xs = [i + (k - (len(bars) - 1) / 2) * width for i in range(len(months))]
        heights = [math.nan if v is None else v for v in values]
        axis.bar(xs, heights, width=width, label=method.upper())
    axis.set_xticks(range(len(months)), months)
    axis.set_xlabel("month of the update and of its probes")
    axis.set_ylabel(f"average probe {metric} (lower is better)")
    axis.set_title("Stability-plasticity average of TWiki-Probes perplexity")
    axis.legend(fontsize="small", title="method", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(figure, path)


def plot_misalignment(
    index: ResultIndex, path: PathLike, metric: str = "ppl"
) -> paths.Path | None:
    """Fig. 5: probe perplexity by training month (rows) × evaluation month (columns)."""
    category = "changed" if "changed" in index.categories(metric) else "new"
    methods = [m for m in index.methods() if index.trained_months(m)]
    panels = []
    for method in methods:
        trained = index.trained_months(method)
        evaluated = index.eval_months(metric)
        grid = [[index.get(method, t, e, category, metric) for e in evaluated] for t in trained]
        if sum(v is not None for row in grid for v in row) >= 1:
            panels.append((method, trained, evaluated, grid))
    if not panels:
        return None
    figure, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0), squeeze=False)
    for axis, (method, trained, evaluated, grid) in zip(axes[0], panels, strict=True):
        values = [[math.nan if v is None else v for v in row] for row in grid]
        image = axis.imshow(values, cmap="Blues_r", aspect="auto")  # darker = lower = better
        for r, row in enumerate(grid):
            for c, value in enumerate(row):
                label = "n/a" if value is None else f"{value:.1f}"
                axis.text(c, r, label, ha="center", va="center", fontsize=8, color="black",
                          bbox={"facecolor": "white", "alpha": 0.6, "linewidth": 0, "pad": 1})
        axis.set_xticks(range(len(evaluated)), evaluated)
        axis.set_yticks(range(len(trained)), trained)
        axis.set_xlabel("evaluated on probes of")
        axis.set_ylabel("trained through")
        axis.set_title(method.upper())
        figure.colorbar(image, ax=axis, label=f"{metric} on {category.upper()}")
    figure.suptitle(f"Temporal misalignment: {metric} on {category.upper()} (darker is better)")
    return _save(figure, path)


def write_plots(index: ResultIndex, out_dir: PathLike) -> list[paths.Path]:
    """Every figure the results support, as ``fig3_relative_propn.png`` etc. in a local folder
    or a bucket; returns paths."""
    made = [
        plot_relative_propn(index, paths.join(out_dir, "fig3_relative_propn.png")),
        plot_probe_average(index, paths.join(out_dir, "fig4_probe_average.png")),
        plot_misalignment(index, paths.join(out_dir, "fig5_misalignment.png")),
    ]
    return [p for p in made if p is not None]
