"""A stage's files are read only as the stage wrote them: a shard set missing a member, shards of
two runs side by side, a CSV cut or replaced after the stage, a file its ``stats.json`` records
but that is gone, or a folder whose stage never finished is one line naming the file, for the
SeqIO sources, the TFDS builder and the evaluators alike, never a smaller dataset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tw_jax.errors import DumpError
from tw_jax.io.tfrecord import ShardedTFRecordWriter, count_records, encode_example
from tw_jax.preprocess.probes.probe_csv import read_stage_probes
from tw_jax.preprocess.runners.whole import check_shard_set, complete_shards, recorded_counts


def _shards(folder: Path, name: str, n_records: int, shard_bytes: int = 200) -> list[Path]:
    writer = ShardedTFRecordWriter(folder / f"{name}.tfrecord", max_shard_bytes=shard_bytes)
    for i in range(n_records):
        writer.write(encode_example({"text": f"record {i} " * 4}))
    writer.commit()
    return sorted(folder.glob(f"{name}.tfrecord-*"))


@pytest.fixture()
def ssm(tmp_path) -> Path:
    folder = tmp_path / "0809" / "ssm"
    folder.mkdir(parents=True)
    files = _shards(folder, "diffset", 12)
    assert len(files) == 4 and sum(count_records(f) for f in files) == 12
    (folder / "stats.json").write_text(json.dumps(
        {"inputs": ["diffset"], "diffset": {"examples": 12}}), encoding="utf-8")
    return folder


def test_a_whole_shard_set_is_read_and_a_broken_one_named(ssm):
    pattern = str(ssm / "diffset.tfrecord-*-of-*")
    assert [Path(f).name for f in check_shard_set(pattern)] == [
        f"diffset.tfrecord-0000{i}-of-00004" for i in range(4)]
    (ssm / "diffset.tfrecord-00001-of-00004").unlink()
    with pytest.raises(DumpError, match=r"diffset.tfrecord-00001-of-00004: is missing \(1 of the "
                                         r"set's 4 shards\)"):
        check_shard_set(pattern)


def test_shards_of_two_runs_side_by_side_are_refused(ssm):
    (ssm / "diffset.tfrecord-00000-of-00001").write_bytes(b"")
    with pytest.raises(DumpError, match=r"holds shards of 2 sets \(-of-1, -of-4\): an old run's"):
        complete_shards([str(p) for p in ssm.glob("diffset.tfrecord-*")], "diffset.tfrecord-*")


def test_records_are_counted_against_stats_json(ssm):
    stats = json.loads((ssm / "stats.json").read_text())
    stats["diffset"]["examples"] = 13
    (ssm / "stats.json").write_text(json.dumps(stats))
    with pytest.raises(DumpError, match=r"diffset.tfrecord-00000-of-00004: holds 12 records where "
                                         r".*/ssm/stats.json records 13: the folder was changed or "
                                         r"cut after tw-jax ssm wrote it; rebuild it"):
        check_shard_set(str(ssm / "diffset.tfrecord-*-of-*"))
    (ssm / "stats.json").unlink()
    with pytest.raises(DumpError, match=r"/ssm: has no stats.json: the stage that writes it "
                                         r"\(tw-jax ssm\) did not finish; run it again"):
        check_shard_set(str(ssm / "diffset.tfrecord-*-of-*"))


@pytest.fixture()
def data(demo_data, tmp_path) -> Path:
    """The demo's 0910 period alone (its probes delete a fact, so every category has rows)."""
    data = tmp_path / "data"
    shutil.copytree(demo_data / "data" / "0910", data / "0910")
    return data


def test_a_cut_probes_csv_is_named_by_every_reader(data, tmp_path):
    import seqio
    import tensorflow_datasets as tfds

    import tw_jax.datasets  # noqa: F401  (registers temporal_wiki)
    import tw_jax.tasks
    from tw_jax.evaluate.month_eval import read_probes
    from tw_jax.time import Period

    probes = data / "0910" / "probes"
    counts = recorded_counts(str(probes))
    assert len(read_stage_probes(str(probes / "unchanged.csv"))) == counts["unchanged"] > 2
    lines = (probes / "unchanged.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (probes / "unchanged.csv").write_text("".join(lines[:-2]), encoding="utf-8")  # two rows cut
    message = (rf"unchanged.csv: holds {counts['unchanged'] - 2} records where .*stats.json "
               rf"records {counts['unchanged']}")
    with pytest.raises(DumpError, match=message):
        read_probes(str(data), Period.parse("0910"), "unchanged")
    tw_jax.tasks.register_all(str(data))
    with pytest.raises(DumpError, match=message):
        seqio.get_mixture_or_task("twiki_probes_0910_unchanged").get_dataset(
            None, split="validation", shuffle=False)
    with pytest.raises(DumpError, match=message):
        tfds.builder("temporal_wiki/0910_probes", data_dir=str(tmp_path / "tfds")
                     ).download_and_prepare(download_config=tfds.download.DownloadConfig(
                         manual_dir=str(data)))


def test_a_probes_file_gone_or_an_unfinished_folder_is_no_smaller_dataset(data, tmp_path):
    import tensorflow_datasets as tfds

    import tw_jax.datasets  # noqa: F401

    probes = data / "0910" / "probes"
    (probes / "updated.csv").unlink()
    config = tfds.download.DownloadConfig(manual_dir=str(data))
    with pytest.raises(DumpError, match=r"updated.csv: is missing, though stats.json records "
                                         r"\d+ rows for it; rebuild the folder \(tw-jax probes\)"):
        tfds.builder("temporal_wiki/0910_probes", data_dir=str(tmp_path / "a")
                     ).download_and_prepare(download_config=config)
    (probes / "stats.json").unlink()
    with pytest.raises(DumpError, match=r"probes: has no stats.json: the stage that writes it "
                                         r"\(tw-jax probes\) did not finish"):
        read_stage_probes(str(probes / "new.csv"))


def test_a_shard_cut_inside_a_record_is_named_before_any_pipeline_reads_it(ssm):
    """The cut TFRecord that hung an uncached training run inside TensorFlow's iterator is
    refused when the source lists its shards."""
    shard = ssm / "diffset.tfrecord-00002-of-00004"
    shard.write_bytes(shard.read_bytes()[:-5])
    with pytest.raises(DumpError, match=r"diffset.tfrecord-00002-of-00004: truncated record: the "
                                         r"shard was cut or damaged after the stage wrote it"):
        check_shard_set(str(ssm / "diffset.tfrecord-*-of-*"))
