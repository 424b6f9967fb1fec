"""The Beam path's shard assembly cuts shards exactly where the local writer does."""

import io
import random

import pytest

from tw_jax.io.tfrecord import ShardedTFRecordWriter, frame, read_records
from tw_jax.preprocess.ssm.beam import iter_frames, plan_shards, write_planned_shards


def records(n: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes([i % 256]) * rng.randint(1, 300) for i in range(n)]


@pytest.mark.parametrize(("n", "max_bytes"), [(0, 100), (1, 100), (50, 100), (50, 1000), (7, 1)])
def test_plan_matches_the_local_writer(tmp_path, n, max_bytes):
    data = records(n)
    writer = ShardedTFRecordWriter(tmp_path / "local" / "x.tfrecord", max_bytes)
    for record in data:
        writer.write(record)
    shards = writer.commit()
    plan = plan_shards([len(frame(r)) for r in data], max_bytes)
    assert plan == [len(list(read_records(s))) for s in shards]

    pytest.importorskip("apache_beam")
    planned = tmp_path / "planned"
    planned.mkdir()
    write_planned_shards(str(planned / "x.tfrecord"), iter(data), plan)
    assert sorted(p.name for p in planned.iterdir()) == [s.name for s in shards]
    for shard in shards:
        assert (planned / shard.name).read_bytes() == shard.read_bytes()


def test_iter_frames_reads_back_and_checks_crcs():
    data = records(20, seed=1)
    blob = b"".join(frame(r) for r in data)
    assert list(iter_frames(io.BytesIO(blob), "part")) == data
    corrupt = bytearray(blob)
    corrupt[20] ^= 0xFF
    with pytest.raises(ValueError, match="part"):
        list(iter_frames(io.BytesIO(bytes(corrupt)), "part"))
    for cut in (3, len(frame(data[-1])) - 5):  # inside the last record, inside its header
        with pytest.raises(ValueError, match="part"):
            list(iter_frames(io.BytesIO(blob[:-cut]), "part"))
