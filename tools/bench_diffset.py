"""DiffSet throughput, end to end from compressed dumps: article pairs per second per worker.

Generates (or reuses, with --dir) a snapshot pair of realistic articles (~3.5 KB of wikitext each;
5% edited, 5% new, as in real monthly dumps), runs the local DiffSet stage with 1 and 2 workers,
and prints one JSON line of figures per run, then a summary line. Target (issue 2): at least 500
article pairs/s per core, so a full English Wikipedia month (6.3M articles) needs under 4
core-hours.

    python tools/bench_diffset.py [--articles 20000] [--workers 1,2] [--dir /tmp/bench_pair]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.sample_world.bench_pair import write_bench_pair


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=20_000)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--dir", default=None, help="keep the generated dumps here and reuse them")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    work = Path(args.dir or tempfile.mkdtemp(prefix="tw_jax_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    marker = work / f"pair-{args.articles}-{args.seed}.json"
    if marker.exists():
        old, new = (Path(p) for p in json.loads(marker.read_text()))
    else:
        started = time.perf_counter()
        old, new = write_bench_pair(work, n_articles=args.articles, seed=args.seed)
        print(json.dumps({"generated_seconds": round(time.perf_counter() - started, 1)}))
        marker.write_text(json.dumps([str(old), str(new)]))

    figures = []
    for workers in (int(w) for w in args.workers.split(",")):
        with tempfile.TemporaryDirectory(prefix="tw_jax_bench_out_") as out:
            started = time.perf_counter()
            stats = build_diffset(old, new, out, workers=workers, progress=False)
            seconds = time.perf_counter() - started
        pairs = stats["accounting"]["new_pages"]
        row = {
            "workers": workers,
            "article_pairs": pairs,
            "seconds": round(seconds, 2),
            "pairs_per_s": round(pairs / seconds, 1),
            "pairs_per_s_per_worker": round(pairs / seconds / workers, 1),
            "old_dump_mb": round(os.path.getsize(old) / 2**20, 1),
            "new_dump_mb": round(os.path.getsize(new) / 2**20, 1),
            "articles": stats["articles"],
        }
        figures.append(row)
        print(json.dumps(row))
    print(
        json.dumps(
            {
                "bench": "diffset",
                "cpu": platform.processor() or platform.machine(),
                "cores": os.cpu_count(),
                "pairs_per_s_per_worker": {
                    r["workers"]: r["pairs_per_s_per_worker"] for r in figures
                },
                "target_pairs_per_s_per_core": 500,
            }
        )
    )


if __name__ == "__main__":
    main()
