"""``tw-jax diffset``: build a TWiki-DiffSet folder from two Wikipedia dumps."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from tw_jax.io.cli_paths import input_folder, output_folder
from tw_jax.preprocess.runners.cli_options import add_runner_arguments


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "diffset",
        help="TWiki-DiffSet: the text of NEW_DUMP that OLD_DUMP lacked (TemporalWiki Algorithm 1)",
        description=(
            "Compares two Wikipedia snapshots (MediaWiki XML .xml/.xml.bz2/multistream/.gz, or "
            "WikiExtractor JSON lines) and writes DIR/diffset.jsonl, full.jsonl, unchanged.jsonl, "
            "TFRecord shards of each, and stats.json (written last: the folder is complete when "
            "it exists)."
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
    parser.add_argument("--out", required=True, type=output_folder,
                        help="output folder, e.g. DATA_DIR/0809/diffset (local or gs://)")
    parser.add_argument(
        "--min-changed-chars",
        type=int,
        default=0,
        help="keep an article only if its new text has at least this many characters "
        "(EvolvingQA's Changed set uses 500)",
    )
    add_runner_arguments(parser, "local worker processes (0: one per core)")
    parser.add_argument(
        "--splits",
        type=int,
        default=64,
        help="Beam: readers per dump when it is a multistream .bz2 with its index beside it",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.old is None and args.runner == "beam":
        print("tw-jax diffset: error: --runner beam needs --old", file=sys.stderr)
        return 2
    if args.min_changed_chars < 0:
        print("tw-jax diffset: error: --min-changed-chars must be >= 0", file=sys.stderr)
        return 2
    started = time.perf_counter()
    if args.runner == "beam":
        from tw_jax.preprocess.diffset.beam import build_diffset_beam

        stats = build_diffset_beam(
            args.old,
            args.new,
            args.out,
            min_changed_chars=args.min_changed_chars,
            beam_options=args.beam_options,
            splits=args.splits,
        )
    else:
        from tw_jax.preprocess.diffset.local import build_diffset

        stats = build_diffset(
            args.old,
            args.new,
            args.out,
            min_changed_chars=args.min_changed_chars,
            workers=args.workers or os.cpu_count() or 1,
            progress=args.progress,
        )
    elapsed = time.perf_counter() - started
    summary = {
        "out": args.out,
        "seconds": round(elapsed, 2),
        "articles": stats["articles"],
        "diffset_tokens": stats["diffset"]["tokens"],
        "skipped_new": stats["new_dump"]["skipped"]["by_reason"],
    }
    print(json.dumps(summary))
    return 0
