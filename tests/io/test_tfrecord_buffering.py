"""The sharded TFRecord writer holds framed records back and writes them about 1 MiB at a time,
yet cuts shards where it cut them record by record and writes the same bytes; frame_ends, given
to several writers of one record, frames it as frame does."""

from __future__ import annotations

import random

from tw_jax.io import tfrecord
from tw_jax.io.tfrecord import (
    ShardedTFRecordWriter,
    frame,
    frame_ends,
    masked_crc32c,
    read_records,
)


def test_frame_ends_are_frames_ends():
    for record in (b"", b"x", bytes(range(256)) * 40):
        head, tail = frame_ends(record)
        assert head + record + tail == frame(record)
        assert (len(head), len(tail)) == (12, 4)
    header = bytes(8)  # length 0
    assert frame(b"") == header + masked_crc32c(header).to_bytes(4, "little") + bytes.fromhex(
        "d8ea82a2")  # the masked CRC32C of no bytes: 0 rotated, plus 0xA282EAD8


def test_records_are_held_until_a_mebibyte_then_written(tmp_path):
    writer = ShardedTFRecordWriter(tmp_path / "out.tfrecord")
    record = b"r" * 1000  # 1016 bytes framed
    held_back = tfrecord._WRITE_BYTES // 1016  # records held before the first write
    for _ in range(held_back):
        writer.write(record)
    (temporary,) = [p for p in tmp_path.iterdir()]
    assert temporary.stat().st_size == 0
    writer.write(record)
    assert temporary.stat().st_size == (held_back + 1) * 1016
    writer.write(record, frame_ends(record))
    writer.flush()
    assert temporary.stat().st_size == (held_back + 2) * 1016
    (shard,) = writer.commit()
    assert list(read_records(shard)) == [record] * (held_back + 2)


def test_shards_are_cut_where_record_by_record_writing_cut_them(tmp_path):
    rnd = random.Random(0)
    records = [bytes([i % 256]) * rnd.randint(0, 300_000) for i in range(60)]
    writer = ShardedTFRecordWriter(tmp_path / "out.tfrecord", max_shard_bytes=1 << 20)
    for record in records:
        writer.write(record)
    shards = writer.commit()
    # Record by record: a new shard once the current one holds max_shard_bytes or more.
    expected: list[list[bytes]] = []
    size = 0
    for record in records:
        if not expected or size >= 1 << 20:
            expected.append([])
            size = 0
        expected[-1].append(record)
        size += len(record) + 16
    assert [list(read_records(shard)) for shard in shards] == expected
    assert [shard.read_bytes() for shard in shards] == [
        b"".join(map(frame, group)) for group in expected]
