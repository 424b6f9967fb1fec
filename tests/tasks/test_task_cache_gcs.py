"""SeqIO's cache job writing to ``gs://`` and the cached tasks read back from there, on the
local GCS server: Beam's GCS IO reaches it as STORAGE_EMULATOR_HOST, TensorFlow's own GCS file
system (SeqIO's ``info``/``stats``/``COMPLETED`` files and its cached reads) through the TLS
front of tests/gcs_tls_front.py. Each side runs in a process of its own, as users run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tw_jax.tasks.cache import CACHE_DIR_ENV

SSM = "twiki_diffset_0809_ssm"
PROBE = "twiki_probes_0809_updated"
TESTS = Path(__file__).resolve().parents[1]

# Reads the cached and the uncached examples of each task named in argv and prints, per task,
# how many there are and whether the two sorted lists are equal.
READ_BACK = r"""
import json, sys
import numpy as np
import tw_jax.tasks
from tw_jax.runtime import task_data
from tw_jax.tasks.cache import TaskCacheError

def key(example):
    return tuple((k, v.tobytes() if isinstance(v, np.ndarray) else v)
                 for k, v in sorted(example.items()))

def read(name, split, use_cached):
    dataset = task_data.task_dataset(name, {"inputs": 256, "targets": 64}, split=split,
                                     shuffle=False, num_epochs=1, use_cached=use_cached)
    return sorted(key(ex) for ex in dataset.as_numpy_iterator())

out = {}
for name, split in (arg.split(":") for arg in sys.argv[1:]):
    try:
        cached = read(name, split, True)
    except TaskCacheError as error:
        out[name] = {"error": str(error)}
        continue
    uncached = read(name, split, False)
    out[name] = {"examples": len(cached), "equal": cached == uncached}
print(json.dumps(out))
"""


@pytest.fixture
def tf_gcs_env(gcs_server, tmp_path) -> dict[str, str]:
    """The environment of a process whose Beam IO and TensorFlow both use the local server."""
    sys.path.insert(0, str(TESTS))
    from gcs_batch_front import GcsBatchFront
    from gcs_tls_front import GcsTlsFront

    batch = GcsBatchFront(gcs_server.url)
    tls = GcsTlsFront(("127.0.0.1", gcs_server.port), tmp_path / "certs")
    token = tmp_path / "adc.json"  # Beam's google.auth: a token that never expires, no look-up
    token.write_text(json.dumps({
        "type": "authorized_user", "client_id": "tw-jax-test", "client_secret": "-",
        "refresh_token": "-", "token": "local-test-token", "expiry": "2999-01-01T00:00:00Z",
        "token_uri": "http://127.0.0.1:9/token"}))
    yield {**os.environ, **gcs_server.env, **tls.env, "STORAGE_EMULATOR_HOST": batch.url,
           "GOOGLE_APPLICATION_CREDENTIALS": str(token), "JAX_PLATFORMS": "cpu"}
    tls.close()
    batch.close()


def _data_env(env: dict[str, str], data: dict) -> dict[str, str]:
    return {**env, "TW_JAX_DATA_DIR": str(data["data_dir"]), "TW_JAX_T5_VOCAB": str(data["t5"]),
            "TW_JAX_GPT2_VOCAB": str(data["gpt2"])}


def test_the_cache_job_writes_to_a_bucket_and_the_tasks_read_it_back(
        task_data, gcs_server, tf_gcs_env):
    bucket = gcs_server.bucket("seqio-cache")
    cache = f"{bucket}/data/seqio_cache"
    env = _data_env(tf_gcs_env, task_data)
    env.pop(CACHE_DIR_ENV, None)
    job = subprocess.run(
        [sys.executable, "-m", "seqio.scripts.cache_tasks_main", "--module_import=tw_jax.tasks",
         f"--tasks={SSM},{PROBE}", f"--output_cache_dir={cache}", "--min_shards=2",
         "--pipeline_options=--runner=DirectRunner"],
        env=env, capture_output=True, text=True, timeout=900)
    assert job.returncode == 0, job.stderr[-3000:]
    objects = gcs_server.objects("seqio-cache", "data/seqio_cache/")
    for task in (SSM, PROBE):
        assert f"data/seqio_cache/{task}/COMPLETED" in objects
        assert any(name.startswith(f"data/seqio_cache/{task}/") and ".tfrecord-" in name
                   for name in objects)
    read = subprocess.run(
        [sys.executable, "-c", READ_BACK, f"{SSM}:train", f"{PROBE}:test"],
        env={**env, CACHE_DIR_ENV: cache}, capture_output=True, text=True, timeout=600)
    assert read.returncode == 0, read.stderr[-3000:]
    found = json.loads(read.stdout.strip().splitlines()[-1])
    assert found[SSM] == {"examples": len(task_data["ssm"]["0809"]), "equal": True}
    assert found[PROBE]["equal"] and found[PROBE]["examples"] > 0
    # a bucket without the cache: one line naming the command that builds it there
    empty = f"{bucket}/elsewhere"
    missing = subprocess.run(
        [sys.executable, "-c", READ_BACK, f"{SSM}:train"],
        env={**env, CACHE_DIR_ENV: empty}, capture_output=True, text=True, timeout=600)
    error = json.loads(missing.stdout.strip().splitlines()[-1])[SSM]["error"]
    assert f"{SSM} not cached" in error and (
        f"--tasks={SSM} --output_cache_dir={empty}") in error
