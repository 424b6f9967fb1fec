"""Builds a data folder for the task tests: the demo's pairs plus what the demo does not write.

The demo writes ``DATA/<MMMM>/{diffset,probes}``. The tests add the initial snapshot
``DATA/08/full`` (from the sample world's first dump, through the DiffSet stage itself), SSM
TFRecords in the SSM stage's format (``inputs``/``targets`` text with sentinel markers, ``id``,
``title``) for every pair and for 08, and tiny vocabularies trained on the snapshots.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tw_jax.io.tfrecord import ShardedTFRecordWriter, encode_example

SENTINEL = "<extra_id_0>"


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def ssm_example(record: dict) -> dict | None:
    """Masks the article's title (a salient span) where the text names it."""
    title, text = record["title"], record["text"]
    at = text.find(title)
    if at < 0:
        return None
    return {
        "inputs": text[:at] + SENTINEL + text[at + len(title) :],
        "targets": f"{SENTINEL} {title}",
        "id": int(record["id"]),
        "title": title,
    }


def write_ssm(records: list[dict], prefix: Path) -> list[dict]:
    examples = [e for e in (ssm_example(r) for r in records) if e is not None]
    writer = ShardedTFRecordWriter(prefix)
    for example in examples:
        writer.write(encode_example(example))
    writer.commit()
    _record_examples(prefix.parent, prefix.name.split(".")[0], len(examples))
    return examples


def _record_examples(folder: Path, name: str, count: int) -> None:
    """What the SSM stage records in ``stats.json`` for ``name``: the readers check a shard
    set's records against it (the demo's own SSM files are replaced here)."""
    path = folder / "stats.json"
    stats = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"inputs": []}
    stats["inputs"] = sorted({*stats["inputs"], name})
    stats[name] = {**stats.get(name, {}), "examples": count}
    path.write_text(json.dumps(stats), encoding="utf-8")


def write_initial_snapshot(world_dir: Path, data_dir: Path, month: str = "2021-08") -> Path:
    """``DATA/08/full/full.{jsonl,tfrecord-*}``: the DiffSet stage run on the same dump twice
    leaves the whole snapshot in ``full``."""
    from tw_jax.preprocess.diffset.local import build_diffset
    from tw_jax.sample_world.build import wikipedia_dump

    scratch = data_dir / "08" / "scratch"
    dump = wikipedia_dump(world_dir, month)
    build_diffset(dump, dump, scratch, workers=1, progress=False)
    target = data_dir / "08" / "full"
    target.mkdir(parents=True, exist_ok=True)
    for path in [*scratch.glob("full.*"), scratch / "stats.json"]:  # the stage's record too
        shutil.move(path, target / path.name)
    shutil.rmtree(scratch)
    return target


def build_task_data(root: Path, demo: Path | None = None) -> dict:
    """Runs the demo under ``root`` (or copies ``demo``, a folder it wrote) and completes its
    data folder; returns the paths."""
    from tw_jax.data.vocab_training import write_demo_vocabularies
    from tw_jax.demo import run_demo

    if demo is None:
        run_demo(root)
    else:
        shutil.copytree(demo, root, dirs_exist_ok=True)
    data_dir, world_dir = root / "data", root / "sample_world"
    if not (data_dir / "08" / "full").exists():
        write_initial_snapshot(world_dir, data_dir)
    ssm = {}
    for pair in sorted(p.name for p in data_dir.iterdir() if len(p.name) == 4):
        diffset = data_dir / pair / "diffset"
        ssm[pair] = write_ssm(
            read_jsonl(diffset / "diffset.jsonl"), data_dir / pair / "ssm" / "diffset.tfrecord"
        )
        write_ssm(read_jsonl(diffset / "full.jsonl"), data_dir / pair / "ssm" / "full.tfrecord")
    ssm["08"] = write_ssm(
        read_jsonl(data_dir / "08" / "full" / "full.jsonl"),
        data_dir / "08" / "ssm" / "full.tfrecord",
    )
    texts = [r["text"] for r in read_jsonl(data_dir / "08" / "full" / "full.jsonl")]
    texts += [r["text"] for r in read_jsonl(data_dir / "1011" / "diffset" / "full.jsonl")]
    for probes in sorted(data_dir.glob("*/probes/*.csv")):  # relation labels, cloze sentences
        texts.append(probes.read_text(encoding="utf-8"))
    vocab = write_demo_vocabularies(texts, root / "vocab")
    return {"data_dir": data_dir, "t5": vocab["t5"], "gpt2": vocab["gpt2"], "ssm": ssm}
