#!/usr/bin/env python3
"""Write the synthetic sample world (or a large benchmark pair of dumps) to a folder.

    python tools/make_sample_world.py --out /tmp/world [--seed 0] [--entities 180]
    python tools/make_sample_world.py --bench-pair --out /tmp/bench [--articles 20000]

Same function as ``tw-jax sample-world``; kept as a script so the data can be regenerated
without installing the console entry point.
"""

from __future__ import annotations

import argparse
import sys
import time

from bench_pair import write_bench_pair

from tw_jax.sample_world.build import DEFAULT_ENTITIES, build_sample_world
from tw_jax.sample_world.cli import summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--entities", type=int, default=DEFAULT_ENTITIES)
    parser.add_argument("--bench-pair", action="store_true", help="write the two-dump DiffSet benchmark instead")
    parser.add_argument("--articles", type=int, default=20000, help="articles in the old benchmark dump")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.bench_pair:
        old, new = write_bench_pair(args.out, n_articles=args.articles, seed=args.seed)
        print(f"wrote {old} and {new} in {time.perf_counter() - start:.1f}s")
    else:
        world = build_sample_world(args.out, seed=args.seed, n_entities=args.entities)
        print(summary(world, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
