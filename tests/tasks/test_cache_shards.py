"""A SeqIO cache is read only whole: a shard cut (inside a record or at a record's end) or
deleted under an existing ``COMPLETED`` marker is one line naming the shard and the command that
rebuilds the cache, not TensorFlow's DataLossError in the middle of a run nor a smaller dataset.

The cache here is laid out as seqio 0.0.20's ``cache_tasks_main`` writes it (``COMPLETED``,
``info.<split>.json`` with ``num_shards``, ``stats.<split>.json`` with ``examples``, shards
``<split>.tfrecord-0000k-of-0000N``), small enough to write by hand; seqio reads it back whole
first, so the layout is the job's. ``test_task_cache.py`` runs the job itself.
"""

from __future__ import annotations

import json
import uuid

import pytest
import seqio

from tw_jax.io.tfrecord import encode_example, frame
from tw_jax.runtime import task_data
from tw_jax.tasks.cache import TaskCacheError, check_cached, search_cache_dir

ROWS = [[1, 2, 3], [4, 5], [6], [7, 8, 9, 10], [11, 12], [13]]
LENGTHS = {"targets": 8}


@pytest.fixture()
def cached_task(tmp_path):
    """A registered task (TFRecords of ``targets``) and its cache under ``tmp_path/cache``:
    two shards of three examples each."""
    name = f"cache_shards_{uuid.uuid4().hex[:8]}"
    source = tmp_path / "source.tfrecord-00000-of-00001"
    source.write_bytes(b"".join(frame(encode_example({"targets": row})) for row in ROWS))
    seqio.TaskRegistry.add(
        name,
        source=seqio.TFExampleDataSource(
            {"train": str(source)},
            feature_description={"targets": seqio.tf.io.VarLenFeature(seqio.tf.int64)}),
        preprocessors=[_dense, seqio.CacheDatasetPlaceholder()],
        output_features={"targets": seqio.Feature(seqio.PassThroughVocabulary(100),
                                                  add_eos=False, dtype=seqio.tf.int32)},
    )
    root = tmp_path / "cache"
    folder = root / name
    folder.mkdir(parents=True)
    for k, rows in enumerate((ROWS[:3], ROWS[3:])):
        shard = folder / f"train.tfrecord-{k:05d}-of-00002"
        shard.write_bytes(b"".join(frame(encode_example({"targets": row})) for row in rows))
    (folder / "info.train.json").write_text(json.dumps({
        "num_shards": 2, "seqio_version": seqio.__version__,
        "features": {"targets": {"shape": [None], "dtype": "int32"}}}))
    (folder / "stats.train.json").write_text(json.dumps({"examples": len(ROWS)}))
    (folder / "COMPLETED").write_text("")
    search_cache_dir(str(root))
    try:
        yield name, folder
    finally:
        seqio.TaskRegistry.remove(name)
        search_cache_dir(None)


def _dense(dataset):
    return dataset.map(lambda ex: {"targets": seqio.tf.cast(
        seqio.tf.sparse.to_dense(ex["targets"]), seqio.tf.int32)})


def _read(name: str) -> list[list[int]]:
    dataset = task_data.task_dataset(name, LENGTHS, split="train", shuffle=False, num_epochs=1,
                                     use_cached=True)
    return sorted(ex["targets"].tolist() for ex in dataset.as_numpy_iterator())


def _rebuild(name: str, folder) -> str:
    return (f"the cache of {name} was cut or changed after it was built; rebuild it with "
            f"`TW_JAX_DATA_DIR=DATA python -m seqio.scripts.cache_tasks_main "
            f"--module_import=tw_jax.tasks --tasks={name} --output_cache_dir={folder.parent} "
            f"--overwrite`")


def test_a_whole_cache_is_read(cached_task):
    name, _ = cached_task
    assert _read(name) == sorted(ROWS)


def test_a_shard_cut_inside_a_record_is_one_line_naming_it(cached_task):
    name, folder = cached_task
    shard = folder / "train.tfrecord-00001-of-00002"
    shard.write_bytes(shard.read_bytes()[:-7])  # a copy that stopped inside the last record
    with pytest.raises(TaskCacheError) as error:
        _read(name)
    assert str(error.value) == f"{shard}: truncated record: {_rebuild(name, folder)}"


def test_a_shard_cut_at_a_record_boundary_is_counted_against_the_stats(cached_task):
    name, folder = cached_task
    shard = folder / "train.tfrecord-00000-of-00002"
    shard.write_bytes(frame(encode_example({"targets": ROWS[0]})))  # 1 of its 3 records
    with pytest.raises(TaskCacheError) as error:
        check_cached(name)
    assert str(error.value) == (
        f"{folder}/train.tfrecord-*-of-00002: 4 examples where {folder}/stats.train.json "
        f"records 6: {_rebuild(name, folder)}")


def test_a_missing_shard_or_an_unreadable_record_is_one_line(cached_task):
    name, folder = cached_task
    (folder / "info.train.json").write_text('{"num_shards": 2, "featu')
    with pytest.raises(TaskCacheError, match=rf"^{folder}/info\.train\.json: unreadable \("):
        check_cached(name)
    (folder / "info.train.json").write_text('{"num_shards": 2}')
    (folder / "train.tfrecord-00001-of-00002").unlink()
    with pytest.raises(TaskCacheError) as error:
        check_cached(name)
    assert str(error.value) == (f"{folder}/train.tfrecord-00001-of-00002: missing (2 shards "
                                f"recorded): {_rebuild(name, folder)}")
    assert "\n" not in str(error.value)
