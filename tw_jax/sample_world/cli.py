"""``tw-jax sample-world``: build the embedded sample world (dumps and ground truth) into a folder."""

from __future__ import annotations

import argparse
import time

from tw_jax.io.cli_paths import output_path

from .build import DEFAULT_ENTITIES, MIN_ENTITIES, build_sample_world
from .span import DEFAULT_MONTHS, DEFAULT_START, MIN_MONTHS, Span, SpanError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "sample-world",
        help="write the synthetic sample world: monthly Wikipedia/Wikidata dumps plus ground truth",
        description="Write a small, seeded synthetic world that changes month by month (by default "
                    "over 2021-08..2021-11) as MediaWiki XML and Wikidata JSON dumps, with the ground "
                    "truth every stage is tested against.",
    )
    parser.add_argument("--out", required=True, type=output_path,
                        help="output folder (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    parser.add_argument("--entities", type=int, default=DEFAULT_ENTITIES,
                        help=f"number of main entities (at least {MIN_ENTITIES}; default {DEFAULT_ENTITIES})")
    parser.add_argument("--start", default=DEFAULT_START.iso, metavar="YYYY-MM",
                        help=f"the first snapshot's month (default {DEFAULT_START.iso}); every date "
                             "the world writes follows from it")
    parser.add_argument("--months", default=DEFAULT_MONTHS, metavar="N",
                        help=f"number of monthly snapshots (at least {MIN_MONTHS}; default "
                             f"{DEFAULT_MONTHS})")
    parser.set_defaults(func=run)
    return parser


def summary(world: dict, seconds: float) -> str:
    lines = [f"sample world (seed {world['seed']}, {world['n_entities']} main entities) in {seconds:.1f}s"]
    for month, c in world["counts"].items():
        lines.append(f"  {month}: {c['articles']} articles, {c['redirects']} redirects, "
                     f"{c['other_namespace_pages']} other pages, {c['entities']} entities, {c['facts']} facts")
    for pair, c in world["pair_counts"].items():
        d, f = c["diffset_articles"], c["facts"]
        lines.append(f"  {pair}: DiffSet {d['new']} new + {d['changed']} changed articles "
                     f"({c['diffset_sentences']} sentences); facts {f['new']} new, {f['updated']} updated, "
                     f"{f['unchanged']} unchanged, {f['deleted']} deleted; "
                     f"{c['deleted_articles']} deleted, {c['renamed_articles']} renamed")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.entities < MIN_ENTITIES:
        raise SystemExit(f"tw-jax sample-world: error: --entities must be at least {MIN_ENTITIES}")
    try:
        span = Span.parse(args.start, args.months)
    except SpanError as error:
        raise SystemExit(f"tw-jax sample-world: error: {error}") from None
    start = time.perf_counter()
    world = build_sample_world(args.out, seed=args.seed, n_entities=args.entities, span=span)
    print(summary(world, time.perf_counter() - start))
    print(f"  written to {args.out} (see {args.out}/world.json)")
    return 0
