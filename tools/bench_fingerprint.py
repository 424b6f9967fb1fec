"""What checking a SeqIO cache's fingerprint costs: the size and SHA-256 of every source file
(:func:`tw_jax.tasks.cache.changes`, what every ``USE_CACHED_TASKS`` run does once per process
before it reads a cache).

Writes a synthetic TFRecord source of ``--gb`` gigabytes (shards of random text, as a stage
writes them), registers a task on it, records its fingerprint (the cache job's side) and then
verifies it in a fresh process state (every file hashed: the cost of a run's first check) and
again (the in-process memo: one ``stat`` per file). The files were just written, so they are
read from the page cache: the figure is hashing, an upper bound for a cold disk or a bucket,
which read slower. Prints one JSON line, with the seconds extrapolated to TemporalWiki's
monthly DiffSet (~1.5 GB of text) and a full snapshot (~20 GB)::

    python tools/bench_fingerprint.py --gb 1 --out /tmp/bench_fingerprint
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
import uuid

import numpy as np

MONTH_GB = 1.5  # TemporalWiki's monthly DiffSet, ~347M tokens of text
SNAPSHOT_GB = 20.0  # a full English snapshot


def write_source(out: str, total_bytes: int, shards: int) -> list[str]:
    """``shards`` TFRecord files of random-text records, ``total_bytes`` in all."""
    from tw_jax.io.tfrecord import encode_example, frame

    rng = np.random.default_rng(0)
    files, per_shard = [], total_bytes // shards
    for k in range(shards):
        path = os.path.join(out, f"diffset.tfrecord-{k:05d}-of-{shards:05d}")
        with open(path, "wb") as handle:
            written = 0
            while written < per_shard:
                text = rng.integers(97, 123, size=64 << 10, dtype=np.uint8).tobytes()
                record = frame(encode_example({"text": [text]}))
                handle.write(record)
                written += len(record)
        files.append(path)
    return files


def register(files: list[str]) -> str:
    import seqio
    import tensorflow as tf

    name = f"bench_fingerprint_{uuid.uuid4().hex[:8]}"
    seqio.TaskRegistry.add(
        name,
        source=seqio.TFExampleDataSource(
            {"train": files}, feature_description={"text": tf.io.FixedLenFeature([], tf.string)}),
        preprocessors=[seqio.CacheDatasetPlaceholder()],
        output_features={"text": seqio.Feature(seqio.PassThroughVocabulary(256), dtype=tf.string,
                                               rank=0)})
    return name


def measure(name: str) -> dict[str, float]:
    """Seconds to record, to verify with nothing hashed yet, and to verify again."""
    import seqio

    from tw_jax.io import manifest
    from tw_jax.tasks.cache import changes, fingerprint

    task = seqio.get_mixture_or_task(name)
    start = time.perf_counter()
    recorded = fingerprint(task)
    record_s = time.perf_counter() - start
    manifest._hashed.clear()  # noqa: SLF001 -- a new process's first check
    start = time.perf_counter()
    assert changes(task, recorded) == []
    verify_s = time.perf_counter() - start
    start = time.perf_counter()
    assert changes(task, recorded) == []
    return {"record_s": record_s, "verify_s": verify_s, "verify_again_s": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="source size in GB (1e9 bytes)")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--out", default="/tmp/bench_fingerprint", help="scratch folder (removed)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    try:
        files = write_source(args.out, int(args.gb * 1e9), args.shards)
        size = sum(os.path.getsize(f) for f in files)
        seconds = measure(register(files))
    finally:
        shutil.rmtree(args.out, ignore_errors=True)
    per_gb = seconds["verify_s"] / (size / 1e9)
    result = {"bytes": size, "files": len(files), **{k: round(v, 3) for k, v in seconds.items()},
              "mb_per_s": round(size / 1e6 / seconds["verify_s"], 1),
              "s_per_gb": round(per_gb, 2), "month_diffset_s": round(per_gb * MONTH_GB, 1),
              "full_snapshot_s": round(per_gb * SNAPSHOT_GB, 1), "cpus": os.cpu_count()}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
