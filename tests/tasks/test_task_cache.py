"""SeqIO's own offline cache job (``python -m seqio.scripts.cache_tasks_main``, DirectRunner) on
a data folder's tasks, locally and in a bucket, and the cached examples read back: exactly the
uncached ones. A run that asks for a cache that is missing or older than its files gets one line
naming the command that builds it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import seqio

import tw_jax.tasks
from tw_jax.runtime import task_data as runtime_data
from tw_jax.tasks.cache import CACHE_DIR_ENV, TaskCacheError

SSM, LM = "twiki_diffset_0809_ssm", "twiki_diffset_0809_lm"
PROBES = "twiki_probes_0809"  # the evaluation mixture of the month's probe categories
PROBE_TASKS = r"twiki_probes_0809_(unchanged|updated|new|changed)"
SSM_LENGTHS = {"inputs": 256, "targets": 64}
LM_LENGTHS = {"targets": 32}


def cache_tasks(data: dict, tasks: str, out: str) -> subprocess.CompletedProcess:
    """SeqIO's cache job as a user runs it, on the data folder's registered tasks."""
    env = {**os.environ, "TW_JAX_DATA_DIR": str(data["data_dir"]),
           "TW_JAX_T5_VOCAB": str(data["t5"]), "TW_JAX_GPT2_VOCAB": str(data["gpt2"]),
           "JAX_PLATFORMS": "cpu"}
    env.pop(CACHE_DIR_ENV, None)
    command = [sys.executable, "-m", "seqio.scripts.cache_tasks_main",
               "--module_import=tw_jax.tasks", f"--tasks={tasks}",
               f"--output_cache_dir={out}", "--min_shards=2",
               "--pipeline_options=--runner=DirectRunner"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def register(data: dict, cache_dir: str, monkeypatch) -> list[str]:
    monkeypatch.setenv(CACHE_DIR_ENV, cache_dir)
    return tw_jax.tasks.register_all(data["data_dir"], t5_vocab=str(data["t5"]),
                                     gpt2_vocab=str(data["gpt2"]))


def _key(example: dict) -> tuple:
    return tuple((k, v.tobytes() if isinstance(v, np.ndarray) else v)
                 for k, v in sorted(example.items()))


def examples(name: str, lengths: dict, *, use_cached: bool, split: str = "train") -> list[tuple]:
    dataset = runtime_data.task_dataset(name, lengths, split=split, shuffle=False, num_epochs=1,
                                        use_cached=use_cached)
    return sorted(_key(ex) for ex in dataset.as_numpy_iterator())


def documents(name: str, *, use_cached: bool) -> list[tuple]:
    """An LM task's tokenised documents: what the cache holds, before packing."""
    task = seqio.get_mixture_or_task(name)
    if use_cached:
        dataset = task._get_cached_source("train").get_dataset("train", shuffle=False)  # noqa: SLF001
    else:
        dataset = task.preprocess_precache(task.source.get_dataset("train", shuffle=False))
    return sorted(_key(ex) for ex in dataset.as_numpy_iterator())


@pytest.fixture(scope="module")
def local_cache(task_data, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("seqio_cache"))
    cache_tasks(task_data, f"{SSM},{LM},{PROBE_TASKS}", out)
    return out


def test_every_task_supports_caching_and_nothing_requires_it(twiki):
    tasks = [seqio.TaskRegistry.get(n) for n in twiki["names"] if n in seqio.TaskRegistry.names()]
    assert len(tasks) == 3 * (5 + 2 * 5 * 5 + 3) + 4 * 2
    assert all(task.supports_caching and not task.requires_caching for task in tasks)


def test_the_cache_job_writes_each_task_and_the_cached_examples_are_the_uncached(
        task_data, local_cache, monkeypatch):
    cached = sorted(p.name for p in Path(local_cache).iterdir())
    assert cached == sorted([SSM, LM] + [f"twiki_probes_0809_{c}"
                                         for c in ("changed", "new", "unchanged", "updated")])
    assert (Path(local_cache) / SSM / "COMPLETED").exists()
    register(task_data, local_cache, monkeypatch)
    ssm = examples(SSM, SSM_LENGTHS, use_cached=False)
    assert len(ssm) == len(task_data["ssm"]["0809"])
    assert examples(SSM, SSM_LENGTHS, use_cached=True) == ssm
    for task in seqio.get_mixture_or_task(PROBES).tasks:  # the mixture's tasks, all cached
        probes = examples(task.name, SSM_LENGTHS, use_cached=False, split="test")
        assert len(probes) == task.get_cached_stats("test")["examples"] > 0
        assert examples(task.name, SSM_LENGTHS, use_cached=True, split="test") == probes
    # the mixture reads them (seqio samples until one task runs out: as many either way)
    mixed = examples(PROBES, SSM_LENGTHS, use_cached=True, split="test")
    assert len(mixed) == len(examples(PROBES, SSM_LENGTHS, use_cached=False, split="test")) > 0
    # LM: the same documents; packing follows reading order (as a new seed's does), so the
    # blocks hold the same tokens in other cuts: as many blocks, each the full length
    assert documents(LM, use_cached=True) == documents(LM, use_cached=False)
    blocks = examples(LM, LM_LENGTHS, use_cached=False)
    cached_blocks = examples(LM, LM_LENGTHS, use_cached=True)
    assert len(cached_blocks) == len(blocks) > 0
    assert {len(dict(b)["targets"]) for b in cached_blocks} == {32 * 4}  # int32 bytes


def test_a_missing_cache_names_the_command_that_builds_it(task_data, local_cache, tmp_path,
                                                          monkeypatch):
    register(task_data, str(tmp_path / "empty"), monkeypatch)
    with pytest.raises(TaskCacheError) as missing:
        examples(SSM, SSM_LENGTHS, use_cached=True)
    message = str(missing.value)
    assert "\n" not in message
    assert f"{SSM} not cached" in message
    assert (f"python -m seqio.scripts.cache_tasks_main --module_import=tw_jax.tasks "
            f"--tasks={SSM} --output_cache_dir={tmp_path / 'empty'}") in message


def test_a_cache_older_than_its_files_is_stale(task_data, local_cache, tmp_path, monkeypatch):
    """A cache without a fingerprint (built before tw_jax recorded one) is checked by dates."""
    cache = tmp_path / "old"
    shutil.copytree(Path(local_cache) / SSM, cache / SSM)  # copy2: the mtimes stay
    (cache / SSM / "tw_jax_fingerprint.json").unlink()
    register(task_data, str(cache), monkeypatch)
    shard = Path(seqio.get_mixture_or_task(SSM).source.list_shards("train")[0])
    completed = cache / SSM / "COMPLETED"
    before = completed.stat().st_mtime
    later = time.time() + 60
    os.utime(shard, (later, later))
    try:
        with pytest.raises(TaskCacheError) as stale:
            examples(SSM, SSM_LENGTHS, use_cached=True)
    finally:
        os.utime(shard, (before - 60, before - 60))
    assert str(stale.value) == (
        f"USE_CACHED_TASKS: the cache of {SSM} is older than {shard}; rebuild it with "
        f"`TW_JAX_DATA_DIR=DATA python -m seqio.scripts.cache_tasks_main "
        f"--module_import=tw_jax.tasks --tasks={SSM} --output_cache_dir={cache} "
        f"--overwrite`")


def _train(data: dict, model_dir, cache_dir: str, monkeypatch) -> int:
    from tw_jax.cli import main

    register(data, cache_dir, monkeypatch)  # as a new process finds them
    return main(["train", "--gin_file=diff.gin", "--gin_file=models/t5_tiny.gin",
                 "--gin_file=runs/cpu_smoke.gin", f"--gin.MODEL_DIR='{model_dir}'",
                 f"--gin.DATA_DIR='{data['data_dir']}'",
                 f"--gin.tw_jax.tasks.register_all.t5_vocab='{data['t5']}'",
                 f"--gin.tw_jax.tasks.register_all.gpt2_vocab='{data['gpt2']}'",
                 "--gin.TRAIN_STEPS=2", "--gin.tw_jax.train.train.progress=False",
                 "--gin.USE_CACHED_TASKS=True"])


def test_tw_jax_train_reads_the_cache_or_names_the_command_that_builds_it(
        task_data, local_cache, tmp_path, monkeypatch, capsys):
    assert _train(task_data, tmp_path / "cached", local_cache, monkeypatch) == 0
    assert (tmp_path / "cached" / "checkpoints" / "2").is_dir()
    capsys.readouterr()
    assert _train(task_data, tmp_path / "uncached", str(tmp_path / "none"), monkeypatch) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"tw-jax train: error: USE_CACHED_TASKS: {SSM} not cached (searched "
        f"{tmp_path / 'none'}); build the cache with `TW_JAX_DATA_DIR=DATA python -m "
        f"seqio.scripts.cache_tasks_main --module_import=tw_jax.tasks --tasks={SSM} "
        f"--output_cache_dir={tmp_path / 'none'}`"]


def test_a_shard_cut_under_the_completed_marker_is_one_line_naming_it(
        task_data, local_cache, tmp_path, monkeypatch, capsys):
    """The job's own cache, its last shard cut by a copy that stopped (COMPLETED still there):
    tw-jax train names the shard and the command that rebuilds the cache, exit 2, before a step
    (before: TensorFlow's DataLossError traceback from inside the input pipeline)."""
    cache = tmp_path / "cache"
    shutil.copytree(Path(local_cache) / SSM, cache / SSM)  # copy2: the mtimes stay
    shard = sorted((cache / SSM).glob("train.tfrecord-*"))[-1]
    shard.write_bytes(shard.read_bytes()[:-9])
    capsys.readouterr()
    assert _train(task_data, tmp_path / "run", str(cache), monkeypatch) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"tw-jax train: error: {shard}: truncated record: the cache of {SSM} was cut or changed "
        f"after it was built; rebuild it with `TW_JAX_DATA_DIR=DATA python -m "
        f"seqio.scripts.cache_tasks_main --module_import=tw_jax.tasks --tasks={SSM} "
        f"--output_cache_dir={cache} --overwrite`"]
    assert not list((tmp_path / "run").glob("checkpoints/[0-9]*"))


def _t5x_train(data: dict, model_dir, cache_dir: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TW_JAX_DATA_DIR": str(data["data_dir"]),
           "TW_JAX_T5_VOCAB": str(data["t5"]), "TW_JAX_GPT2_VOCAB": str(data["gpt2"]),
           CACHE_DIR_ENV: cache_dir, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1"}
    command = [sys.executable, "-m", "t5x.train", "--gin_search_paths=gin",
               "--gin_file=t5x/diff.gin", "--gin_file=models/t5_tiny.gin",
               "--gin_file=runs/cpu_smoke.gin", f"--gin.MODEL_DIR='{model_dir}'",
               f"--gin.MIXTURE_OR_TASK_NAME='{SSM}'", "--gin.TRAIN_STEPS=1",
               "--gin.USE_CACHED_TASKS=True"]
    return subprocess.run(command, cwd=Path(__file__).resolve().parents[2], env=env,
                          capture_output=True, text=True, timeout=900)


def test_t5x_train_reads_the_cache_or_names_the_command_that_builds_it(
        task_data, local_cache, tmp_path):
    done = _t5x_train(task_data, tmp_path / "cached", local_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "cached" / "checkpoint_1").is_dir()
    missing = _t5x_train(task_data, tmp_path / "uncached", str(tmp_path / "none"))
    assert missing.returncode != 0
    assert (f"USE_CACHED_TASKS: {SSM} not cached (searched {tmp_path / 'none'}); build the "
            f"cache with `TW_JAX_DATA_DIR=DATA python -m seqio.scripts.cache_tasks_main "
            f"--module_import=tw_jax.tasks --tasks={SSM} --output_cache_dir={tmp_path / 'none'}`"
            ) in missing.stderr
