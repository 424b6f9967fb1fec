"""``tw-jax probe-contexts``: open-book contexts for a period's TemporalWiki probes.

    tw-jax probe-contexts --data DATA --month 2024-12_2025-01 --retriever bm25|dpr \\
        [--question-encoder Q --ctx-encoder C] [--k 5] [--context-words 100] [--chunk-words 100]

Indexes the period's new snapshot (``DATA/P/diffset/full.jsonl``, cut into passages of at most
``--chunk-words`` words; stored in ``DATA/P/probes_context/index/<retriever>/`` and reused
while its inputs are unchanged), retrieves the top ``--k`` passages for each probe of
``DATA/P/probes/<category>.csv`` ("subject relation") and writes
``DATA/P/probes_<retriever>/<category>.csv`` with a ``context`` column (cut to
``--context-words`` words from the end) and ``stats.json`` last; see
:mod:`tw_jax.evaluate.probe_contexts`. One line per category, then, as the last line of stdout,
one JSON object of the figures. Bad input is one line naming the file, exit status 2. ``DATA``
may be local or ``gs://``.
"""

from __future__ import annotations

import argparse
import json

from tw_jax.cli_parser import add_rebuild_flag, period_argument
from tw_jax.io.cli_paths import input_path
from tw_jax.retrieval.options import add_retriever_options, retriever_from_args

COMMAND = "tw-jax probe-contexts"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "probe-contexts", help="open-book contexts for a period's probes, retrieved from its "
                               "snapshot",
        description="Indexes the period's new snapshot (DATA/PERIOD/diffset/full.jsonl) under "
                    "DATA/PERIOD/probes_context/index/<retriever>/, rebuilt only when its inputs "
                    "change; retrieves the top --k passages for each probe ('subject relation') "
                    "and writes DATA/PERIOD/probes_<retriever>/<category>.csv with a context "
                    "column, then stats.json. The last line of stdout is one JSON object.")
    parser.add_argument("--data", required=True, type=input_path, metavar="DATA",
                        help="the data folder holding PERIOD/diffset and PERIOD/probes, local or "
                             "gs://")
    parser.add_argument("--month", required=True, metavar="PERIOD", type=period_argument,
                        help="the period whose probes and snapshot are used (2024-12_2025-01, "
                             "or 0809 in the 2021 layout)")
    parser.add_argument("--retriever", default="bm25", metavar="bm25|dpr",
                        help="retriever (default bm25)")
    add_retriever_options(parser)
    parser.add_argument("--k", type=int, default=5, help="passages per probe (default 5)")
    parser.add_argument("--context-words", type=int, default=100, metavar="N",
                        help="words of context kept, cut from the end (default 100)")
    parser.add_argument("--chunk-words", type=int, default=100, metavar="N",
                        help="words per passage of the index at most (default 100)")
    add_rebuild_flag(parser, "rebuild the month's index", old=["--rebuild-index"])
    parser.set_defaults(func=run)


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def run(args: argparse.Namespace) -> int:
    from tw_jax.errors import UsageError
    from tw_jax.evaluate import probe_contexts as pc
    from tw_jax.io import paths
    from tw_jax.io.output_claim import claimed
    from tw_jax.preprocess.runners.accounting import STATS_FILE
    from tw_jax.retrieval.snapshot import snapshot_file
    from tw_jax.tasks.layout import spelled

    for flag, value in (("--k", args.k), ("--context-words", args.context_words),
                        ("--chunk-words", args.chunk_words)):
        if value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}")
    options = pc.ContextOptions(args.k, args.context_words, args.chunk_words)
    retriever = retriever_from_args(args)
    period = spelled(args.data, args.month)
    pc.probe_files(args.data, period)  # both inputs checked before anything is written
    snapshot_file(args.data, period.name)
    with claimed(pc.output_dir(args.data, period, retriever.name), COMMAND):
        stats = pc.write_probe_contexts(args.data, period, retriever, options,
                                        force_index=args.rebuild)
    index = stats["index"]
    print(f"{retriever.name} index of {period.label}: {index['passages']} passages, "
          f"{'reused' if index['reused'] else 'built'} in {index['seconds']:.2f} s "
          f"({index['folder']})")
    for category, figures in stats["categories"].items():
        previous = (f", previous object in context {_rate(figures['previous_in_context'])}"
                    if "previous_in_context" in figures else "")
        print(f"{category}: {figures['rows']} probes, object in context "
              f"{_rate(figures['answer_in_context'])}{previous} "
              f"({paths.join(stats['out'], stats['files'][category])})")
    print(f"{stats['questions']} probes searched in {stats['search_seconds']:.3f} s; "
          f"{paths.join(stats['out'], STATS_FILE)}")
    print(json.dumps(pc.summary_line(stats)))
    return 0
