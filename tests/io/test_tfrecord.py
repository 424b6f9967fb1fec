"""Our TFRecord/Example encoder must be read back exactly by TensorFlow; shards appear whole
(renamed at commit, or with their folder), and a full disk is one error naming them."""


import pytest
from fault_helpers import file_size_limit

from tw_jax.errors import OutputError
from tw_jax.io.atomic import FolderCommit
from tw_jax.io.tfrecord import ShardedTFRecordWriter, encode_example, read_records

tf = pytest.importorskip("tensorflow")


def test_examples_parse_with_tensorflow(tmp_path):
    features = {
        "id": 12345678901,
        "title": "Zürich",
        "text": "Line one.\nLine two — with ünïcode.",
        "negative": [-1, 0, 2**40],
        "floats": [0.5, -2.25],
        "empty": [],
        "raw": b"\x00\xff",
    }
    example = tf.train.Example.FromString(encode_example(features))
    f = example.features.feature
    assert list(f["id"].int64_list.value) == [12345678901]
    assert f["title"].bytes_list.value[0].decode() == "Zürich"
    assert f["text"].bytes_list.value[0].decode() == features["text"]
    assert list(f["negative"].int64_list.value) == [-1, 0, 2**40]
    assert list(f["floats"].float_list.value) == [0.5, -2.25]
    assert list(f["empty"].bytes_list.value) == []
    assert f["raw"].bytes_list.value[0] == b"\x00\xff"
    # Same bytes as TensorFlow's own serialisation (keys sorted, deterministic).
    assert encode_example(features) == example.SerializeToString(deterministic=True)


def test_sharded_writer_round_trips_through_tf_data(tmp_path):
    writer = ShardedTFRecordWriter(tmp_path / "out.tfrecord", max_shard_bytes=200)
    records = [encode_example({"id": i, "text": f"record {i} " * 5}) for i in range(20)]
    for record in records:
        writer.write(record)
    shards = writer.commit()
    assert len(shards) > 1
    assert [s.name for s in shards][0] == f"out.tfrecord-00000-of-{len(shards):05d}"
    assert not list(tmp_path.glob(".*tmp*"))
    read_back = [r for shard in shards for r in read_records(shard)]
    assert read_back == records
    dataset = tf.data.TFRecordDataset([str(s) for s in shards])
    assert [bytes(r.numpy()) for r in dataset] == records


def test_commit_removes_stale_shards_and_empty_output_has_one_shard(tmp_path):
    stale = tmp_path / "out.tfrecord-00000-of-00007"
    stale.write_bytes(b"")
    writer = ShardedTFRecordWriter(tmp_path / "out.tfrecord")
    shards = writer.commit()
    assert [s.name for s in shards] == ["out.tfrecord-00000-of-00001"]
    assert not stale.exists()
    assert list(read_records(shards[0])) == []


def test_abort_leaves_nothing(tmp_path):
    writer = ShardedTFRecordWriter(tmp_path / "out.tfrecord")
    writer.write(b"x")
    writer.abort()
    assert list(tmp_path.iterdir()) == []


def test_corrupt_record_is_detected(tmp_path):
    writer = ShardedTFRecordWriter(tmp_path / "out.tfrecord")
    writer.write(b"hello world")
    (shard,) = writer.commit()
    data = bytearray(shard.read_bytes())
    data[14] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt record data"):
        list(read_records(shard))


def test_a_full_disk_names_the_shard_pattern_and_leaves_nothing(tmp_path):
    writer = ShardedTFRecordWriter(tmp_path / "out.tfrecord", max_shard_bytes=1000)
    with file_size_limit(2048), pytest.raises(OutputError) as raised:
        for _ in range(20):
            writer.write(b"x" * 100)  # shards of about 1000 bytes fit under the limit
        writer.write(b"x" * 3000)  # a shard of one big record does not
        writer.commit()
    assert raised.value.path == f"{tmp_path}/out.tfrecord-?????-of-?????"
    assert raised.value.message.startswith("file too large while writing it (the file-size "
                                           "limit, ulimit -f, is 2 KiB)")
    assert list(tmp_path.iterdir()) == []
    writer.abort()  # what a caller's except clause does: harmless now


def test_shards_committed_into_a_folder_appear_with_it(tmp_path):
    stale = tmp_path / "out.tfrecord-00000-of-00003"
    stale.write_bytes(b"")
    with FolderCommit(tmp_path) as folder:
        writer = ShardedTFRecordWriter(folder.path("out.tfrecord"), max_shard_bytes=10)
        for record in (b"a" * 8, b"b" * 8):
            writer.write(record)
        finals = writer.commit(into=folder)
        assert [f.name for f in finals] == ["out.tfrecord-00000-of-00002",
                                            "out.tfrecord-00001-of-00002"]
        assert not any(f.exists() for f in finals) and stale.exists()
        folder.write_json("stats.json", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "out.tfrecord-00000-of-00002", "out.tfrecord-00001-of-00002", "stats.json"]
    assert [r for f in finals for r in read_records(f)] == [b"a" * 8, b"b" * 8]


def test_a_folder_that_fails_takes_its_staged_shards_along(tmp_path):
    with pytest.raises(RuntimeError), FolderCommit(tmp_path) as folder:
        writer = ShardedTFRecordWriter(folder.path("out.tfrecord"))
        writer.write(b"a")
        writer.commit(into=folder)
        raise RuntimeError("a later file failed")
    assert list(tmp_path.iterdir()) == []
