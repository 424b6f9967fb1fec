"""A SeqIO cache is reused only for what it was made from: seqio's own job (with
``--module_import=tw_jax.tasks``) records the size and SHA-256 of the task's source files, its
vocabularies' fingerprints and its settings (``tw_jax_fingerprint.json``), and a run that asks for
the cache refuses, in one line naming the file or vocabulary and the command that rebuilds it, a
source replaced by other data with an older modification time (``cp -p``, ``tar``,
``rsync -a``), a changed probes CSV and a replaced vocabulary. A cache without a fingerprint (an
older one) is still read, by modification times, with a warning.

One job, on a copy of the session's data folder (the tests change its files), caches the SSM
DiffSet task and one probe task."""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import pytest
import seqio
import tensorflow as tf
from test_task_cache import SSM, SSM_LENGTHS, cache_tasks, examples, register

from tw_jax.tasks.cache import FINGERPRINT, TaskCacheError, check_cached, fingerprint_new_caches

UPDATED = "twiki_probes_0809_updated"


@pytest.fixture(scope="module")
def world(task_data, tmp_path_factory) -> dict:
    """A copy of the data folder and its vocabularies, and the cache of SSM and UPDATED."""
    root = tmp_path_factory.mktemp("fingerprint")
    data = {"data_dir": root / "data", "t5": root / "t5" / "spiece.model", "gpt2": root / "gpt2"}
    shutil.copytree(task_data["data_dir"], data["data_dir"],
                    ignore=shutil.ignore_patterns("seqio_cache"))
    data["t5"].parent.mkdir()
    shutil.copy2(task_data["t5"], data["t5"])
    shutil.copytree(task_data["gpt2"], data["gpt2"])
    cache = root / "cache"
    cache_tasks(data, f"{SSM},{UPDATED}", str(cache))
    return {**data, "cache": cache}


def _rebuild(names: str, cache) -> str:
    return (f"rebuild it with `TW_JAX_DATA_DIR=DATA python -m seqio.scripts.cache_tasks_main "
            f"--module_import=tw_jax.tasks --tasks={names} --output_cache_dir={cache} "
            f"--overwrite`")


def _refused(name: str) -> str:
    with pytest.raises(TaskCacheError) as refused:
        check_cached(name)
    message = str(refused.value)
    assert "\n" not in message
    return message


class _Restored:
    """A file changed by a test and put back, bytes and times, when it ends."""

    def __init__(self, path: Path) -> None:
        self.path, self.data, self.stat = path, path.read_bytes(), path.stat()

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *_: object) -> None:
        self.path.write_bytes(self.data)
        os.utime(self.path, ns=(self.stat.st_atime_ns, self.stat.st_mtime_ns))


def test_the_job_records_a_fingerprint_and_the_same_sources_are_reused(world, monkeypatch):
    register(world, str(world["cache"]), monkeypatch)
    for name in (SSM, UPDATED):
        assert (world["cache"] / name / FINGERPRINT).is_file()
        check_cached(name)
    # content, not dates: a source touched since (same bytes) keeps its cache
    shard = Path(seqio.get_mixture_or_task(SSM).source.list_shards("train")[0])
    with _Restored(shard):
        later = time.time() + 60
        os.utime(shard, (later, later))
        cached = examples(SSM, SSM_LENGTHS, use_cached=True)
    assert cached == examples(SSM, SSM_LENGTHS, use_cached=False)


def _other_records(shard: Path) -> bytes:
    """The shard's records with other text in each (as many records: the stage's stats.json
    still agrees)."""
    from tw_jax.io.tfrecord import frame

    out = []
    for record in tf.data.TFRecordDataset(str(shard)).as_numpy_iterator():
        example = tf.train.Example.FromString(record)
        for feature in example.features.feature.values():
            values = feature.bytes_list.value
            values[:] = [v[::-1] for v in values]
        out.append(frame(example.SerializeToString()))
    return b"".join(out)


def test_a_source_replaced_with_older_times_is_refused_naming_the_file(world, monkeypatch):
    register(world, str(world["cache"]), monkeypatch)
    shard = Path(seqio.get_mixture_or_task(SSM).source.list_shards("train")[0])
    with _Restored(shard):
        shard.write_bytes(_other_records(shard))
        earlier = time.time() - 10 * 86400  # `cp -p` of an older copy
        os.utime(shard, (earlier, earlier))
        message = _refused(SSM)
    assert message.startswith(f"USE_CACHED_TASKS: the cache of {SSM} was made from other data "
                              f"or settings ({SSM}: {shard} ")
    assert message.endswith(_rebuild(SSM, world["cache"]))
    check_cached(SSM)  # put back: reused


def test_a_changed_probes_csv_is_refused(world, monkeypatch):
    register(world, str(world["cache"]), monkeypatch)
    csv = world["data_dir"] / "0809" / "probes" / "updated.csv"
    with _Restored(csv):
        lines = csv.read_text(encoding="utf-8").splitlines(keepends=True)
        csv.write_text(lines[0] + "".join(line.upper() for line in lines[1:]), encoding="utf-8")
        message = _refused(UPDATED)
    assert message == (
        f"USE_CACHED_TASKS: the cache of {UPDATED} was made from other data or settings "
        f"({UPDATED}: {csv} does not match its checksum (its bytes changed after it was "
        f"cached)); {_rebuild(UPDATED, world['cache'])}")


def test_a_replaced_vocabulary_is_refused(world, monkeypatch):
    from tw_jax.data.vocab_training import write_demo_vocabularies

    other = write_demo_vocabularies([f"other words {n} " * 20 for n in range(200)],
                                    world["data_dir"].parent / "other_vocab")
    with _Restored(world["t5"]):
        shutil.copyfile(other["t5"], world["t5"])
        register(world, str(world["cache"]), monkeypatch)  # a new run loads the file anew
        message = _refused(SSM)
    assert f"({SSM}: the vocabulary of 'inputs', 'targets' ({world['t5']}) is another one " \
        "(sha256 " in message
    assert message.endswith(_rebuild(SSM, world["cache"]))


def test_a_cache_without_a_fingerprint_is_read_by_dates_with_a_warning(world, tmp_path,
                                                                        monkeypatch, caplog):
    cache = tmp_path / "old"
    shutil.copytree(world["cache"] / SSM, cache / SSM)  # copy2: the times stay
    (cache / SSM / FINGERPRINT).unlink()
    register(world, str(cache), monkeypatch)
    with caplog.at_level(logging.WARNING, logger="tw_jax.tasks.cache"):
        check_cached(SSM)
    assert [r.getMessage() for r in caplog.records if FINGERPRINT in r.getMessage()] == [
        f"{cache / SSM}: no {FINGERPRINT} (cached before tw_jax recorded what a cache is made "
        f"from, or by seqio's job without --module_import=tw_jax.tasks): its sources are "
        f"checked by modification time only, not by content; `TW_JAX_DATA_DIR=DATA python -m "
        f"seqio.scripts.cache_tasks_main --module_import=tw_jax.tasks --tasks={SSM} "
        f"--output_cache_dir={cache} --overwrite` rebuilds it with one"]
    shard = Path(seqio.get_mixture_or_task(SSM).source.list_shards("train")[0])
    with _Restored(shard):
        later = time.time() + 60
        os.utime(shard, (later, later))
        assert _refused(SSM) == (f"USE_CACHED_TASKS: the cache of {SSM} is older than {shard}; "
                                 f"{_rebuild(SSM, cache)}")
    # what `tw-jax cache` does after the job: a cache it completed gets its fingerprint, one
    # cached earlier is named as unchecked
    assert fingerprint_new_caches([SSM], str(cache), time.time_ns()) == ([], [SSM])
    assert fingerprint_new_caches([SSM], str(cache), 0) == ([SSM], [])
    assert (cache / SSM / FINGERPRINT).is_file()
    check_cached(SSM)
