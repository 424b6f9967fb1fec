"""``tw-jax probes``: build a TWiki-Probes folder from two Wikidata dumps and the month's DiffSet.

The dumps' dates come from their Wikimedia file names (:mod:`tw_jax.preprocess.dump_dates`): each
Wikidata dump must be at most ``--max-date-gap`` days from its Wikipedia dump and the old ones
before the new ones; names without dates are not checked. With ``--data DATA`` the folder is
``DATA/<period>/probes`` and the DiffSet ``DATA/<period>/diffset`` unless ``--diffset`` says
otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import TYPE_CHECKING, Any

from tw_jax.cli_parser import period_argument
from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.io.cli_paths import (
    InputFolder,
    claimed_output,
    input_folder,
    input_path,
    output_folder,
    output_path,
)
from tw_jax.preprocess.dump_dates import (
    DEFAULT_MAX_DATE_GAP,
    NO_DATE,
    check_order,
    check_same_snapshot,
    dump_date,
    period_of_dumps,
    stage_folder,
)
from tw_jax.preprocess.dumps.wikidata import DEFAULT_MAX_SKIPPED_SHARE
from tw_jax.preprocess.runners import whole
from tw_jax.preprocess.runners.cli_options import add_runner_arguments
from tw_jax.time import PERIOD_FORMS, Period, TimeError

if TYPE_CHECKING:
    from tw_jax.preprocess.probes.finish import ProbeOptions


def add_probe_options(parser: argparse.ArgumentParser) -> None:
    """The options of the probes themselves (shared with ``tw-jax build``; ``--seed`` is the
    caller's, which ``tw-jax build`` shares with SSM)."""
    parser.add_argument(
        "--max-date-gap",
        type=int,
        default=DEFAULT_MAX_DATE_GAP,
        metavar="DAYS",
        help="most days between a Wikidata dump's date and its Wikipedia dump's, both read "
        "from their file names (default %(default)s: Wikidata dumps weekly)",
    )
    parser.add_argument(
        "--unchanged-rate",
        type=float,
        default=0.001,
        help="share of UNCHANGED facts kept before alignment (paper: 0.1%%)",
    )
    parser.add_argument("--max-subject-frac", type=float, default=0.01)
    parser.add_argument("--max-object-frac", type=float, default=0.05)
    parser.add_argument("--max-relation-frac", type=float, default=0.05)
    parser.add_argument(
        "--lighttuning-size",
        type=int,
        default=500,
        help="light-tuning instances per category (TemporalWiki Appendix D)",
    )
    parser.add_argument(
        "--max-skipped-share",
        type=float,
        default=DEFAULT_MAX_SKIPPED_SHARE,
        metavar="SHARE",
        help="fail when more than this share (0..1) of either Wikidata dump's records are "
        "malformed lines (bad_json, bad_entity), naming the file, the counts and the first bad "
        "line; below it they are skipped and counted in stats.json (default: %(default)s, 1%%)",
    )


def probe_options(args: argparse.Namespace) -> ProbeOptions:
    """The checked options of ``add_probe_options`` (and ``--seed``); a bad one is a
    one-line :class:`UsageError`."""
    from tw_jax.preprocess.probes.finish import ProbeOptions

    if args.max_date_gap < 0:
        raise UsageError("--max-date-gap must be >= 0")
    options = ProbeOptions(
        unchanged_rate=args.unchanged_rate,
        max_subject_frac=args.max_subject_frac,
        max_object_frac=args.max_object_frac,
        max_relation_frac=args.max_relation_frac,
        seed=args.seed,
        lighttuning_size=args.lighttuning_size,
        max_skipped_share=args.max_skipped_share,
    )
    try:
        options.check()
    except ValueError as error:
        raise UsageError(str(error)) from None
    return options


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "probes",
        help="TWiki-Probes: UNCHANGED/UPDATED/NEW/DELETED facts aligned with Wikipedia "
        "(TemporalWiki Algorithm 2 + quality control)",
        description=(
            "Categorises the facts of NEW_WIKIDATA against OLD_WIKIDATA, aligns them with the "
            "Wikipedia snapshot and its DiffSet, and writes DIR/{unchanged,updated,new,deleted}"
            ".csv, TFRecord shards of each, lighttuning_{category}.csv and stats.json (written "
            "last: the folder is complete when it exists). The dumps' dates are read from "
            "their Wikimedia file names: each Wikidata dump must be within --max-date-gap days "
            "of its Wikipedia dump, and the old ones before the new ones."
        ),
    )
    parser.add_argument("--old", required=True, type=input_path,
                        help="the earlier Wikidata JSON dump (a local path or gs://)")
    parser.add_argument("--new", required=True, type=input_path,
                        help="the later Wikidata JSON dump")
    parser.add_argument("--wikipedia", required=True, type=input_path,
                        help="the later Wikipedia dump")
    parser.add_argument(
        "--old-wikipedia",
        default=None,
        type=input_path,
        help="the earlier Wikipedia dump: DELETED facts must appear in its article (without "
        "it, they need only be absent from the new article)",
    )
    parser.add_argument("--diffset", type=input_folder, default=None,
                        help="the month's DiffSet folder (with --data: DATA/<period>/diffset "
                        "by default)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=output_folder,
                       help="output folder, e.g. DATA_DIR/0809/probes (local or gs://)")
    where.add_argument("--data", type=output_path,
                       help="the data folder instead of --out: writes DATA/<period>/probes, the "
                       "period read from the Wikipedia dumps' dates, --period or the --diffset "
                       "folder's name")
    parser.add_argument("--period", type=period_argument, default=None,
                        help=f"with --data: the period that names the folder (as spelled), "
                        f"{PERIOD_FORMS}")
    add_probe_options(parser)
    parser.add_argument("--seed", type=int, default=0)
    add_runner_arguments(
        parser,
        "processes for the local runner: the main one reads the dumps, N forked workers "
        "parse, categorise, align and check (1: all in one process; the output is the same)",
    )
    parser.set_defaults(func=run)


def check_dates(old_wikidata: str, new_wikidata: str, wikipedia: str | None,
                old_wikipedia: str | None, max_gap: int) -> None:
    """The Wikidata dumps' dates against the Wikipedia dumps' (old with old, new with new) and
    the old pair before the new, from the file names; a name without a date is not checked."""
    check_order(old_wikidata, new_wikidata, "Wikidata dump")
    check_order(old_wikipedia, wikipedia, "Wikipedia dump")
    check_same_snapshot(old_wikidata, old_wikipedia, max_gap)
    check_same_snapshot(new_wikidata, wikipedia, max_gap)


def _period_from_folder(diffset: str | None) -> Period | None:
    """The period a ``DATA/<period>/diffset`` folder's parent names, if it names one."""
    if diffset is None:
        return None
    name = os.path.basename(os.path.dirname(diffset.rstrip("/")))
    try:
        period = Period.parse(name)
    except TimeError:
        return None
    return period if period.name == name else None


def folders_of(args: argparse.Namespace) -> tuple[str, str]:
    """(DiffSet folder, output folder): as given, or named under ``--data``."""
    if args.data is None:
        if args.period is not None:
            raise UsageError("--period names the folder under --data; with --out the folder "
                             "is named already")
        if args.diffset is None:
            raise UsageError("--diffset is required with --out (with --data it defaults to "
                             "DATA/<period>/diffset)")
        return args.diffset, args.out
    period = args.period
    if period is None and args.old_wikipedia is not None:
        period = period_of_dumps(args.old_wikipedia, args.wikipedia)
    period = period or _period_from_folder(args.diffset)
    if period is None:
        undated = [p for p in (args.old_wikipedia, args.wikipedia)
                   if p is not None and dump_date(p) is None]
        why = (f"{undated[0]} {NO_DATE}" if undated else
               "the old Wikipedia snapshot is unknown without --old-wikipedia")
        raise UsageError(f"{why}: give --period OLD_NEW (e.g. 2024-12_2025-01) to name the "
                         "folder under --data")
    diffset = args.diffset or stage_folder(args.data, period, "diffset")
    return diffset, stage_folder(args.data, period, "probes")


def run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise UsageError("--workers must be >= 1")
    options = probe_options(args)
    check_dates(args.old, args.new, args.wikipedia, args.old_wikipedia, args.max_date_gap)
    diffset, out = folders_of(args)
    if args.data is None:
        return _run(args, options, diffset, out)
    if args.diffset is None and not paths.isdir(diffset):
        raise UsageError(f"{diffset}: no such folder; build it first (tw-jax diffset --data "
                         f"{args.data} ...) or give --diffset")
    inputs = {"--old": args.old, "--new": args.new, "--wikipedia": args.wikipedia,
              "--old-wikipedia": args.old_wikipedia, "--diffset": InputFolder(diffset)}
    with claimed_output(out, "tw-jax probes", inputs):
        return _run(args, options, diffset, out)


def build(args: argparse.Namespace, options: ProbeOptions, wikidata: tuple[str, str],
          wikipedia: str, old_wikipedia: str | None, diffset: str, out: str) -> dict[str, Any]:
    """Runs the stage on the runner ``args`` names (``tw-jax build`` passes its own dumps:
    ``wikidata`` is (old, new)); returns its stats, with the dumps and DiffSet files it read
    (:func:`whole.made_from`)."""
    dumps = [d for d in (*wikidata, wikipedia, old_wikipedia) if d is not None]
    read = [paths.join(diffset, name) for name in ("diffset.jsonl", "full.jsonl")]
    made = whole.made_from(out, beside=[f for f in read if paths.isfile(f)], dumps=dumps)
    return whole.record_made_from(out, made, _build(args, options, wikidata, wikipedia,
                                                    old_wikipedia, diffset, out))


def _build(args: argparse.Namespace, options: ProbeOptions, wikidata: tuple[str, str],
           wikipedia: str, old_wikipedia: str | None, diffset: str, out: str) -> dict[str, Any]:
    old, new = wikidata
    if args.runner == "beam":
        from tw_jax.preprocess.probes.beam import build_probes_beam

        return build_probes_beam(old, new, wikipedia, diffset, out, options=options,
                                 old_wikipedia=old_wikipedia, beam_options=args.beam_options)
    from tw_jax.preprocess.probes.local import build_probes

    return build_probes(old, new, wikipedia, diffset, out, options=options,
                        old_wikipedia=old_wikipedia, progress=args.progress,
                        workers=args.workers)


def _run(args: argparse.Namespace, options: ProbeOptions, diffset: str, out: str) -> int:
    started = time.perf_counter()
    stats = build(args, options, (args.old, args.new), args.wikipedia, args.old_wikipedia,
                  diffset, out)
    summary = {
        "out": out,
        "seconds": round(time.perf_counter() - started, 2),
        "probes": {c: v["final"] for c, v in stats["categories"].items()},
        "categorised": {c: v["categorised"] for c, v in stats["categories"].items()},
        "lighttuning": stats["lighttuning"],
    }
    print(json.dumps(summary))
    return 0
