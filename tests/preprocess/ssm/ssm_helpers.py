"""Reading an SSM folder back: TensorFlow parses the examples, as SeqIO will."""

import json
from pathlib import Path

FIELDS = ("id", "title", "chunk", "inputs", "targets", "labels")


def read_examples(folder: Path, name: str) -> list[dict]:
    import tensorflow as tf

    shards = sorted(str(p) for p in folder.glob(f"{name}.tfrecord-*-of-*"))
    assert shards, f"no {name} shards in {folder}"
    examples = []
    for record in tf.data.TFRecordDataset(shards):
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        assert set(feature) == set(FIELDS)
        examples.append(
            {
                "id": feature["id"].int64_list.value[0],
                "title": feature["title"].bytes_list.value[0].decode(),
                "chunk": feature["chunk"].int64_list.value[0],
                "inputs": feature["inputs"].bytes_list.value[0].decode(),
                "targets": feature["targets"].bytes_list.value[0].decode(),
                "labels": [v.decode() for v in feature["labels"].bytes_list.value],
            }
        )
    return examples


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """Every shard's bytes, by file name (stats.json apart: it holds the run's seconds)."""
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.tfrecord-*"))}


def stats_without_time(folder: Path) -> dict:
    stats = json.loads((folder / "stats.json").read_text())
    seconds = stats.pop("seconds")  # measured: its type and sign, never its value
    assert isinstance(seconds, float) and seconds >= 0, seconds
    return stats
