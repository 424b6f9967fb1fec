"""DiffSet throughput, end to end from compressed dumps: article pairs per second per worker.

Generates (or reuses, with --dir) a snapshot pair of realistic articles (~3.5 KB of wikitext each;
5% edited, 5% new, as in real monthly dumps) as single-stream ``.xml.bz2`` dumps, repacks them as
multistream dumps with their index (enwiki's ``pages-articles-multistream`` layout), runs the local
DiffSet stage on each layout with 1 and 2 workers, and prints one JSON line of figures per run,
then a summary line. A single-stream dump is read by one process (bz2 cannot be split), so only
the comparison spreads over workers; a multistream dump is read by the workers themselves.
Target (issue 2): at least 500 article pairs/s per core, so a full English Wikipedia month (6.3M
articles) needs under 4 core-hours.

    python tools/bench_diffset.py [--articles 20000] [--workers 1,2] [--dir /tmp/bench_pair]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.multistream import repack_multistream
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
        layouts = json.loads(marker.read_text())
    else:
        started = time.perf_counter()
        old, new = write_bench_pair(work, n_articles=args.articles, seed=args.seed)
        generated = time.perf_counter() - started
        started = time.perf_counter()
        multi = []
        for dump in (old, new):
            target = dump.with_name(dump.name.replace(".xml.bz2", "-multistream.xml.bz2"))
            repack_multistream(dump, target)
            multi.append(str(target))
        print(
            json.dumps(
                {
                    "generated_seconds": round(generated, 1),
                    "repacked_seconds": round(time.perf_counter() - started, 1),
                }
            )
        )
        layouts = {"single-stream": [str(old), str(new)], "multistream": multi}
        marker.write_text(json.dumps(layouts))

    figures = []
    for (layout, (old, new)), workers in itertools.product(
        layouts.items(), (int(w) for w in args.workers.split(","))
    ):
        with tempfile.TemporaryDirectory(prefix="tw_jax_bench_out_") as out:
            started = time.perf_counter()
            stats = build_diffset(old, new, out, workers=workers, progress=False)
            seconds = time.perf_counter() - started
        pairs = stats["accounting"]["new_pages"]
        row = {
            "layout": layout,
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
                    f"{r['layout']}, {r['workers']} worker(s)": r["pairs_per_s_per_worker"]
                    for r in figures
                },
                "target_pairs_per_s_per_core": 500,
            }
        )
    )


if __name__ == "__main__":
    main()
