"""``tw-jax report OUT_DIR [OUT_DIR ...]``: tables and figures from the runs' ``results.jsonl``.

Runs of several methods (one OUT_DIR each, or one with everything) are combined; a later file's
number replaces an earlier one with the same key. Writes, into ``--out`` (default: the first
OUT_DIR's ``report/``): ``report.md`` (every table, figures linked), ``table_*.md`` and
``table_*.csv``, and ``fig1_learned_kept.png`` (what each update learned against what it kept,
the report's first figure), ``fig3_relative_propn.png``, ``fig4_probe_average.png``,
``fig5_misalignment.png`` where the results have their numbers, each introduced in report.md by
a sentence saying what to read from it. Run folders and ``--out`` may be
local or in a bucket (``gs://``). Lines of another benchmark in the same ``results.jsonl``
(Entity Cloze By Date's) are not tabulated here; report.md says how many there are and which
command tabulates them (``tw-jax ecbd report``).
"""

from __future__ import annotations

import argparse
import os

from tw_jax.evaluate.results import read_benchmark, read_results, results_path
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.io.cli_paths import input_path, output_path


def build_report(
    run_dirs: list[str], out: str | os.PathLike[str]
) -> dict[str, list[paths.Path]]:
    """Read the runs, write tables, figures and ``report.md`` into ``out`` (a local folder or a
    bucket; ``report.md`` last, so its presence means the report is complete); returns the
    paths."""
    from tw_jax.evaluate.per_probe import read_runs
    from tw_jax.evaluate.plots import CAPTIONS, write_plots
    from tw_jax.evaluate.report import (
        ResultIndex,
        all_tables,
        tabulated,
        tabulated_elsewhere,
        write_tables,
    )
    from tw_jax.evaluate.summary import diff_against_full, summary_table, without_signal

    everything = read_results(run_dirs)
    results = [r for r in everything if tabulated(r)]
    out = os.fspath(out)
    paths.makedirs(out)
    index = ResultIndex(results, read_runs(run_dirs, results))
    sets = sorted({read_benchmark(d) for d in run_dirs})
    tables = all_tables(index, " and ".join(sets))
    summary = summary_table(index)
    table_paths = write_tables([*([summary] if summary else []), *tables], out)
    figures = write_plots(index, out)
    sources = ", ".join(f"`{results_path(d)}`" for d in run_dirs)
    by_stem = {p.stem: p for p in figures}

    def figure(stem: str) -> list[str]:
        path = by_stem.pop(stem, None)
        return [] if path is None else [f"{CAPTIONS[stem]}\n\n![{stem}]({path.name})\n"]

    elsewhere = "".join(f" {count} more are tabulated by `{command}`."
                        for command, count in sorted(tabulated_elsewhere(everything).items()))
    parts = [f"# Evaluation report\n\n{len(results)} results from {sources}.{elsewhere}\n"]
    headline = diff_against_full(index)
    if headline:
        parts.append(f"{headline}\n")
    parts += figure("fig1_learned_kept")
    parts += figure("fig6_learned_cost")
    if summary:
        parts.append(summary.markdown())
        parts += figure("fig4_probe_average")
    quiet = without_signal(tables)
    if quiet:
        listed = ", ".join(f"`{name}.md` (best {best:.2f}%)" for name, best in quiet.items())
        parts.append(
            f"Not shown here, because no model reaches 1% on any probe set, so they tell "
            f"nothing (their files are written): {listed}. A model this small answers almost "
            "no probe exactly; perplexity and rank classification show its learning.\n")
    parts += [table.markdown() for table in tables if table.name not in quiet]
    for stem in list(by_stem):
        parts += figure(stem)
    summary = paths.join(out, "report.md")
    with atomic_open(summary, "w", encoding="utf-8") as handle:
        handle.write("\n".join(parts))
    return {"tables": table_paths, "figures": figures, "report": [paths.as_path(summary)]}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="tables (Markdown, CSV) and figures (PNG) from evaluation results",
        description=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("run_dirs", nargs="+", metavar="OUT_DIR", type=input_path,
                        help="a run folder holding results.jsonl (or the .jsonl file itself), "
                             "local or gs://")
    parser.add_argument("--out", default=None, type=output_path,
                        help="where to write the report, local or gs:// "
                             "(default: FIRST_OUT_DIR/report)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    first = os.fspath(results_path(args.run_dirs[0]).parent)
    out = args.out or paths.join(first, "report")
    written = build_report(args.run_dirs, out)
    figures = len(written["figures"])
    print(f"report: {written['report'][0]} ({len(written['tables']) // 2} tables, "
          f"{figures} figures)")
    return 0
