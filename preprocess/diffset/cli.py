"""``tw-jax diffset``: build a TWiki-DiffSet folder from two Wikipedia dumps.

With ``--data DATA`` the folder is named from the dumps' dates, as ``tw-jax build`` names it
(:mod:`tw_jax.preprocess.dump_dates`): ``DATA/2024-12_2025-01/diffset``, or for one dump (no
``--old``) ``DATA/2024-12/full``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from tw_jax.cli_parser import period_argument, snapshot_argument
from tw_jax.errors import UsageError
from tw_jax.io.cli_paths import claimed_output, input_folder, output_folder, output_path
from tw_jax.preprocess.dump_dates import (
    NO_DATE,
    check_order,
    dump_date,
    period_of_dumps,
    snapshot_of_dump,
    stage_folder,
)
from tw_jax.preprocess.runners import whole
from tw_jax.preprocess.runners.cli_options import add_runner_arguments
from tw_jax.time import PERIOD_FORMS, SNAPSHOT_FORMS


def add_diffset_options(parser: argparse.ArgumentParser) -> None:
    """The options of the DiffSet itself (shared with ``tw-jax build``)."""
    parser.add_argument(
        "--min-changed-chars",
        type=int,
        default=0,
        help="keep an article only if its new text has at least this many characters "
        "(EvolvingQA's Changed set uses 500)",
    )
    parser.add_argument(
        "--splits",
        type=int,
        default=64,
        help="Beam: readers per dump when it is a multistream .bz2 with its index beside it",
    )


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "diffset",
        help="TWiki-DiffSet: the text of NEW_DUMP that OLD_DUMP lacked (TemporalWiki Algorithm 1)",
        description=(
            "Compares two Wikipedia snapshots (MediaWiki XML .xml/.xml.bz2/multistream/.gz, or "
            "WikiExtractor JSON lines) and writes DIR/diffset.jsonl, full.jsonl, unchanged.jsonl, "
            "TFRecord shards of each, and stats.json (written last: the folder is complete when "
            "it exists). A dump's date is read from its Wikimedia file name "
            "(enwiki-20241201-pages-articles-multistream.xml.bz2; the XML's siteinfo has none): "
            "an old dump not before the new one is refused, and --data names the folder from "
            "the dates (DATA/2024-12_2025-01/diffset; the 2021 dumps: DATA/0809/diffset)."
        ),
    )
    parser.add_argument(
        "--old",
        type=input_folder,
        help="the earlier snapshot's dump; omit it to export one snapshot (e.g. the initial month, "
        "DATA_DIR/08/full): every article is then new and full.* holds the whole snapshot",
    )
    parser.add_argument("--new", required=True, type=input_folder,
                        help="the later snapshot's dump (a local path or gs://)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=output_folder,
                       help="output folder, e.g. DATA_DIR/0809/diffset (local or gs://)")
    where.add_argument("--data", type=output_path,
                       help="the data folder instead of --out: writes DATA/<period>/diffset for "
                       "the period between the dumps' dates (DATA/<snapshot>/full without --old)")
    parser.add_argument("--period", type=period_argument, default=None,
                        help=f"with --data: the period that names the folder (as spelled), "
                        f"{PERIOD_FORMS}, when the dumps' names carry no date or to override "
                        "them")
    parser.add_argument("--snapshot", type=snapshot_argument, default=None,
                        help=f"with --data and no --old: the snapshot that names the folder (as "
                        f"spelled), {SNAPSHOT_FORMS}")
    add_diffset_options(parser)
    add_runner_arguments(parser, "local worker processes (0: one per core)")
    parser.set_defaults(func=run)


def output_of(args: argparse.Namespace) -> str:
    """The stage folder: ``--out``, or the one ``--data`` and the dates name."""
    if args.data is None:
        if args.period is not None or args.snapshot is not None:
            raise UsageError("--period and --snapshot name the folder under --data; with --out "
                             "the folder is named already")
        return args.out
    if args.old is None:
        if args.period is not None:
            raise UsageError("--period is for two dumps (--old and --new); one snapshot's date "
                             "is --snapshot")
        snapshot = args.snapshot or snapshot_of_dump(args.new)
        if snapshot is None:
            raise UsageError(f"--new {args.new} {NO_DATE}: give --snapshot YYYY-MM[-DD] "
                             "to name its folder under --data")
        return stage_folder(args.data, snapshot, "full")
    if args.snapshot is not None:
        raise UsageError("--snapshot is for one dump (no --old); two dumps' period is --period")
    period = args.period or period_of_dumps(args.old, args.new)
    if period is None:
        undated = args.old if dump_date(args.old) is None else args.new
        raise UsageError(f"{undated} {NO_DATE}: give --period OLD_NEW (e.g. 2024-12_2025-01) "
                         "to name its folder under --data")
    return stage_folder(args.data, period, "diffset")


def run(args: argparse.Namespace) -> int:
    if args.old is None and args.runner == "beam":
        print("tw-jax diffset: error: --runner beam needs --old", file=sys.stderr)
        return 2
    if args.min_changed_chars < 0:
        print("tw-jax diffset: error: --min-changed-chars must be >= 0", file=sys.stderr)
        return 2
    check_order(args.old, args.new)
    out = output_of(args)
    if args.data is None:
        return _run(args, out)
    with claimed_output(out, "tw-jax diffset", {"--old": args.old, "--new": args.new}):
        return _run(args, out)


def build(args: argparse.Namespace, old: str | None, new: str, out: str) -> dict:
    """Runs the stage on the runner ``args`` names (``tw-jax build`` passes its own dumps);
    returns its stats, with the dumps it read (:func:`whole.made_from`)."""
    made = whole.made_from(out, dumps=[d for d in (old, new) if d is not None])
    return whole.record_made_from(out, made, _build(args, old, new, out))


def _build(args: argparse.Namespace, old: str | None, new: str, out: str) -> dict:
    if args.runner == "beam":
        from tw_jax.preprocess.diffset.beam import build_diffset_beam

        return build_diffset_beam(
            old,
            new,
            out,
            min_changed_chars=args.min_changed_chars,
            beam_options=args.beam_options,
            splits=args.splits,
        )
    from tw_jax.preprocess.diffset.local import build_diffset

    return build_diffset(
        old,
        new,
        out,
        min_changed_chars=args.min_changed_chars,
        workers=args.workers or os.cpu_count() or 1,
        progress=args.progress,
    )


def _run(args: argparse.Namespace, out: str) -> int:
    started = time.perf_counter()
    stats = build(args, args.old, args.new, out)
    elapsed = time.perf_counter() - started
    summary = {
        "out": out,
        "seconds": round(elapsed, 2),
        "articles": stats["articles"],
        "diffset_tokens": stats["diffset"]["tokens"],
        "skipped_new": stats["new_dump"]["skipped"]["by_reason"],
    }
    print(json.dumps(summary))
    return 0
