"""The temporal_wiki TFDS builder on the session's data folder (sample world through the stages)
and on a small archive in the release's format: built by TFDS's build command in a subprocess
(Beam's DirectRunner for the big configs), loaded with tfds.load, and read by the seqio tasks
through seqio.TfdsDataSource with exactly the examples the files give."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import seqio
import tensorflow_datasets as tfds

import tw_jax.datasets  # noqa: F401  (registers temporal_wiki)
import tw_jax.tasks
from tw_jax.preprocess.probes.probe_csv import read_probe_csv
from tw_jax.tasks import sources

REPO = Path(__file__).resolve().parents[2]
CONFIGS = ("0809", "0809_ssm", "0809_probes", "full_08")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def tfds_build(names, manual_dir: Path, data_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # TFDS's own command, as a user runs it: the tfds script beside this interpreter.
    command = [str(Path(sys.executable).parent / "tfds"), "build", "--imports", "tw_jax.datasets",
               *[f"temporal_wiki/{n}" for n in names], "--manual_dir", str(manual_dir),
               "--data_dir", str(data_dir), "--beam_pipeline_options", "runner=DirectRunner"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def prepared(train_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tfds")
    done = tfds_build(CONFIGS, train_data["data_dir"], out)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def load(name: str, data_dir: Path, split: str) -> list[dict]:
    dataset = tfds.load(f"temporal_wiki/{name}", split=split, data_dir=str(data_dir))
    return [{k: v.decode() if isinstance(v, bytes) else int(v) for k, v in ex.items()}
            for ex in tfds.as_numpy(dataset)]


def test_build_writes_every_split_with_its_size(prepared, train_data):
    data = Path(train_data["data_dir"])
    diffset = read_jsonl(data / "0809" / "diffset" / "diffset.jsonl")
    unchanged = read_jsonl(data / "0809" / "diffset" / "unchanged.jsonl")
    full = read_jsonl(data / "08" / "full" / "full.jsonl")
    probes = data / "0809" / "probes"
    info = json.loads((prepared / "temporal_wiki" / "0809" / "1.1.0" / "dataset_info.json")
                      .read_text())
    assert {s["name"]: int(s["shardLengths"][0]) for s in info["splits"]} == {
        "diffset": len(diffset), "unchanged": len(unchanged)}
    assert info["citation"].startswith("@inproceedings{jang-etal-2022-temporalwiki")
    # the examples are the stage's records, in file order
    assert load("0809", prepared, "diffset") == [
        {"id": int(r["id"]), "title": r["title"], "text": r["text"]} for r in diffset]
    assert [e["text"] for e in load("full_08", prepared, "full")] == [r["text"] for r in full]
    ssm = load("0809_ssm", prepared, "diffset")
    assert [(e["inputs"], e["targets"]) for e in ssm] == [
        (e["inputs"], e["targets"]) for e in train_data["ssm"]["0809"]]
    splits = tfds.builder("temporal_wiki/0809_probes", data_dir=str(prepared)).info.splits
    expected = {}
    for stem in ("", "lighttuning_"):
        for category in ("unchanged", "updated", "new", "deleted"):
            rows = read_probe_csv(str(probes / f"{stem}{category}.csv"))
            if rows:
                expected[stem + category] = len(rows)
    expected["changed"] = expected.get("updated", 0) + expected.get("new", 0)
    assert {name: split.num_examples for name, split in splits.items()} == expected
    updated = load("0809_probes", prepared, "updated")
    assert [(e["subject"], e["relation"], e["object"], e["previous_object"], e["cloze"])
            for e in updated] == [
        (r["subject"], r["relation"], r["object"], r["previous_object"], r["cloze"])
        for r in read_probe_csv(str(probes / "updated.csv"))]


def _examples(name: str, sequence_length, split: str, take: int) -> list[dict]:
    dataset = seqio.get_mixture_or_task(name).get_dataset(
        sequence_length, split=split, shuffle=True, seed=7, num_epochs=1)
    return [{k: v.tolist() for k, v in ex.items()} for ex in dataset.take(take).as_numpy_iterator()]


def _register(train_data) -> None:
    tw_jax.tasks.register_all(train_data["data_dir"], t5_vocab=str(train_data["t5"]),
                              gpt2_vocab=str(train_data["gpt2"]))


@pytest.mark.parametrize("name, lengths, split", [
    ("twiki_diffset_0809_ssm", {"inputs": 64, "targets": 16}, "train"),
    ("twiki_diffset_0809_lm", {"targets": 32}, "train"),
    ("twiki_probes_0809_ssm", {"inputs": 32, "targets": 8}, "validation"),
    ("twiki_probes_0809", {"targets": 32}, "validation"),
])
def test_tasks_on_tfds_give_the_files_examples(prepared, train_data, name, lengths, split):
    _register(train_data)
    from_files = _examples(name, lengths, split, 40)
    sources.use_tfds(str(prepared))
    try:
        _register(train_data)
        task = seqio.get_mixture_or_task(name)
        leaves = getattr(task, "tasks", [task])
        kinds = {type(t.source).__name__ for t in leaves}
        from_tfds = _examples(name, lengths, split, 40)
    finally:
        sources.use_tfds(None)
        _register(train_data)
    if name.startswith("twiki_diffset"):
        assert kinds == {"TfdsFieldsSource"}
    assert from_files
    assert from_tfds == from_files


def test_probe_tasks_on_tfds_read_the_prepared_dataset(train_data, tmp_path):
    """Pointed at a folder where nothing was prepared, a probe task fails in TFDS: it reads
    the prepared split, not the CSV beside it."""
    sources.use_tfds(str(tmp_path))
    try:
        _register(train_data)
        with pytest.raises(Exception, match="temporal_wiki"):
            _examples("twiki_probes_0809_updated_ssm", {"inputs": 32, "targets": 8},
                      "validation", 1)
    finally:
        sources.use_tfds(None)
        _register(train_data)


def test_pattern_to_config_and_split():
    assert sources.tfds_split("/d/0809/diffset/diffset.tfrecord-*-of-*") == ("0809", "diffset")
    assert sources.tfds_split("/d/0809/diffset/unchanged.tfrecord-*-of-*") == (
        "0809", "unchanged")
    assert sources.tfds_split("/d/0809/diffset/full.tfrecord-*-of-*") == ("full_09", "full")
    assert sources.tfds_split("/d/08/full/full.tfrecord-*-of-*") == ("full_08", "full")
    assert sources.tfds_split("gs://b/d/0809/ssm/diffset.tfrecord-*-of-*") == (
        "0809_ssm", "diffset")
    assert sources.tfds_split("/d/08/ssm/full.tfrecord-*-of-*") == ("full_08_ssm", "full")
    assert sources.tfds_split("/d/0809/other/diffset.tfrecord-*-of-*") is None


# --- the published release ------------------------------------------------------------------


def write_release_zips(folder: Path) -> Path:
    """The three release zips, members at their top level as downloaded."""
    from test_published_tasks import write_release

    source = folder / "unzipped"
    write_release(source)
    downloads = folder / "downloads"
    downloads.mkdir()
    for top in ("TWiki_Diffsets", "TWiki_Probes", "Wikipedia_Full"):
        with zipfile.ZipFile(downloads / f"{top}.zip", "w", zipfile.ZIP_DEFLATED) as handle:
            for path in sorted((source / top).rglob("*.csv")):
                handle.write(path, path.relative_to(source / top).as_posix())
    return downloads


def test_release_zips_build_and_load(tmp_path):
    from test_published_tasks import CHANGED, DIFF_0809, FULL_08, SUBSET_0910, UNCHANGED

    downloads = write_release_zips(tmp_path)
    out = tmp_path / "tfds"
    from apache_beam.options.pipeline_options import PipelineOptions

    config = tfds.download.DownloadConfig(
        manual_dir=str(downloads), beam_options=PipelineOptions(["--runner=DirectRunner"]))
    for name in ("release_0809", "release_0910", "release_0809_probes", "release_full_08"):
        tfds.builder(f"temporal_wiki/{name}", data_dir=str(out)).download_and_prepare(
            download_config=config)
    assert [e["text"] for e in load("release_0809", out, "diffset")] == DIFF_0809
    subset = load("release_0910", out, "diffset")
    assert [(e["id"], e["title"], e["text"]) for e in subset] == [
        (i, str(i), t) for i, t in enumerate(SUBSET_0910)]
    assert [e["text"] for e in load("release_full_08", out, "full")] == [
        t for part in FULL_08 for t in part]
    assert [(e["subject"], e["relation"], e["object"])
            for e in load("release_0809_probes", out, "changed")] == CHANGED
    assert [(e["subject"], e["relation"], e["object"])
            for e in load("release_0809_probes", out, "unchanged")] == UNCHANGED


def test_missing_folder_names_it_and_the_stage(train_data, tmp_path):
    builder = tfds.builder("temporal_wiki/1112", data_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"1112/diffset: no such folder; `tw-jax diffset`"):
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(train_data["data_dir"])))


def test_builder_metadata():
    builder = tfds.builder("temporal_wiki/0809_probes", data_dir="/nonexistent")
    assert builder.info.homepage == "https://github.com/joeljang/temporalwiki"
    assert str(builder.version) == "1.1.0" and {"1.0.0", "1.1.0"} <= set(builder.release_notes)
    names = {c.name for c in tw_jax.datasets.TemporalWiki.BUILDER_CONFIGS}
    assert {"0809", "0809_ssm", "0809_probes", "full_08", "release_0809", "release_full_08",
            "1201", "release_1112_probes"} <= names
    assert set(builder.info.features) == {
        "subject", "relation", "object", "previous_object", "text", "cloze", "subject_id",
        "relation_id", "object_id"}
    text = tfds.builder("temporal_wiki/0809", data_dir="/nonexistent").info.features
    assert set(text) == {"id", "title", "text"} and text["id"].np_dtype == np.int64
