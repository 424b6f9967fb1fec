"""Input-pipeline throughput of an SSM DiffSet task, read from its TFRecords (tokenised on every
read) against read from SeqIO's offline cache (tokenised once), on one host.

For each ``--scale`` (1: the data folder's month as it is; 100: a synthetic month of its SSM
shards repeated 100 times), builds the cache with SeqIO's own job
(``seqio.scripts.cache_tasks_main``, DirectRunner, timed) and then reads one shuffled pass of
the ``train`` split both ways through the trainer's input pipeline
(:func:`tw_jax.runtime.task_data.task_dataset`), the best of ``--repeat``; prints one JSON line
per measure: examples/s and tokens/s (inputs + targets) per host.

    python tools/bench_cache.py --data DATA --t5-vocab SPIECE.model [--pair 0809] \\
        [--scale 1 --scale 100] [--repeat 2]

DATA needs ``<pair>/ssm/diffset.tfrecord-*`` (``tw-jax ssm``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from tw_jax.tasks import names
from tw_jax.time import Period

LENGTHS = {"inputs": 512, "targets": 128}


def synthetic_month(data: str, pair: str, scale: int, out: str) -> str:
    """A data folder whose ``<pair>/ssm`` holds the month's shards ``scale`` times."""
    shards = sorted(glob.glob(os.path.join(data, pair, "ssm", "diffset.tfrecord-*")))
    if not shards:
        sys.exit(f"bench_cache: no {data}/{pair}/ssm/diffset.tfrecord-* (run tw-jax ssm first)")
    folder = os.path.join(out, pair, "ssm")
    os.makedirs(folder)
    total = len(shards) * scale
    for index in range(total):
        shutil.copyfile(shards[index % len(shards)],
                        os.path.join(folder, f"diffset.tfrecord-{index:05d}-of-{total:05d}"))
    return out


def build_cache(data: str, vocab: str, task: str, cache: str) -> float:
    env = {**os.environ, "TW_JAX_DATA_DIR": data, "TW_JAX_T5_VOCAB": vocab}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "seqio.scripts.cache_tasks_main",
                    "--module_import=tw_jax.tasks", f"--tasks={task}",
                    f"--output_cache_dir={cache}", "--min_shards=16"],
                   env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def read_pass(task: str, use_cached: bool) -> tuple[int, int, float]:
    from tw_jax.runtime.task_data import task_dataset

    started = time.perf_counter()
    dataset = task_dataset(task, LENGTHS, shuffle=True, seed=0, num_epochs=1,
                           use_cached=use_cached)
    examples = tokens = 0
    for example in dataset.as_numpy_iterator():
        examples += 1
        tokens += len(example["inputs"]) + len(example["targets"])
    return examples, tokens, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--t5-vocab", required=True)
    parser.add_argument("--pair", default="0809")
    parser.add_argument("--scale", type=int, action="append")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    import tw_jax.tasks
    from tw_jax.tasks.cache import CACHE_DIR_ENV

    task = names.diffset(Period.parse(args.pair), "ssm")
    for scale in args.scale or [1, 100]:
        with tempfile.TemporaryDirectory() as work:
            data = synthetic_month(args.data, args.pair, scale, os.path.join(work, "data"))
            cache = os.path.join(work, "cache")
            cache_seconds = build_cache(data, args.t5_vocab, task, cache)
            os.environ[CACHE_DIR_ENV] = cache
            tw_jax.tasks.register_all(data, t5_vocab=args.t5_vocab)
            for use_cached in (False, True):
                runs = [read_pass(task, use_cached) for _ in range(args.repeat)]
                examples, tokens, seconds = min(runs, key=lambda run: run[2])
                print(json.dumps({
                    "task": task, "scale": scale, "cached": use_cached, "examples": examples,
                    "tokens": tokens, "seconds": round(seconds, 3),
                    "examples_per_s": round(examples / seconds, 1),
                    "tokens_per_s": round(tokens / seconds),
                    "cache_job_seconds": round(cache_seconds, 1),
                    "cpus": os.cpu_count(), "python": platform.python_version(),
                }), flush=True)


if __name__ == "__main__":
    main()
