"""``tw-jax probes``: build a TWiki-Probes folder from two Wikidata dumps and the month's DiffSet."""

from __future__ import annotations

import argparse
import json
import sys
import time

from tw_jax.io.cli_paths import input_folder, input_path, output_folder
from tw_jax.preprocess.dumps.wikidata import DEFAULT_MAX_SKIPPED_SHARE
from tw_jax.preprocess.runners.cli_options import add_runner_arguments


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "probes",
        help="TWiki-Probes: UNCHANGED/UPDATED/NEW/DELETED facts aligned with Wikipedia "
        "(TemporalWiki Algorithm 2 + quality control)",
        description=(
            "Categorises the facts of NEW_WIKIDATA against OLD_WIKIDATA, aligns them with the "
            "Wikipedia snapshot and its DiffSet, and writes DIR/{unchanged,updated,new,deleted}"
            ".csv, TFRecord shards of each, lighttuning_{category}.csv and stats.json (written "
            "last: the folder is complete when it exists)."
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
    parser.add_argument("--diffset", required=True, type=input_folder,
                        help="the month's DiffSet folder")
    parser.add_argument("--out", required=True, type=output_folder,
                        help="output folder, e.g. DATA_DIR/0809/probes (local or gs://)")
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
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--max-skipped-share",
        type=float,
        default=DEFAULT_MAX_SKIPPED_SHARE,
        metavar="SHARE",
        help="fail when more than this share (0..1) of either Wikidata dump's records are "
        "malformed lines (bad_json, bad_entity), naming the file, the counts and the first bad "
        "line; below it they are skipped and counted in stats.json (default: %(default)s, 1%%)",
    )
    add_runner_arguments(
        parser,
        "processes for the local runner: the main one reads the dumps, N forked workers "
        "parse, categorise, align and check (1: all in one process; the output is the same)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tw_jax.preprocess.probes.finish import ProbeOptions

    if args.workers < 1:
        print("tw-jax probes: error: --workers must be >= 1", file=sys.stderr)
        return 2
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
        print(f"tw-jax probes: error: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    if args.runner == "beam":
        from tw_jax.preprocess.probes.beam import build_probes_beam

        stats = build_probes_beam(
            args.old,
            args.new,
            args.wikipedia,
            args.diffset,
            args.out,
            options=options,
            old_wikipedia=args.old_wikipedia,
            beam_options=args.beam_options,
        )
    else:
        from tw_jax.preprocess.probes.local import build_probes

        stats = build_probes(
            args.old,
            args.new,
            args.wikipedia,
            args.diffset,
            args.out,
            options=options,
            old_wikipedia=args.old_wikipedia,
            progress=args.progress,
            workers=args.workers,
        )
    summary = {
        "out": args.out,
        "seconds": round(time.perf_counter() - started, 2),
        "probes": {c: v["final"] for c, v in stats["categories"].items()},
        "categorised": {c: v["categorised"] for c, v in stats["categories"].items()},
        "lighttuning": stats["lighttuning"],
    }
    print(json.dumps(summary))
    return 0
