"""A prepared TFDS dataset records what it was made from (tw_jax_fingerprint.json) and is reused,
or read, only while its sources are still those: on a hand-made probes folder, built in this
process (the path `tfds build` takes: ``download_and_prepare``)."""

from __future__ import annotations

import csv
import json
import logging
import os
import shutil
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

import tw_jax.datasets  # noqa: F401  (registers the builders)
from tw_jax.datasets.readers import PROBE_COLUMNS
from tw_jax.tasks.tfds_fingerprint import FINGERPRINT, StaleDatasetError, check_folder

NAME = "temporal_wiki/0809_probes"
ROWS = {
    "unchanged": [("Varnholt", "capital", "Brell"), ("Corvania", "currency", "Crown")],
    "updated": [("Grol Textiles", "chief executive officer", "Granette Naunsberg"),
                ("Cien Bordling", "spouse", "Meel Dreirdstad")],
    "new": [("Ostmark", "population", "4,120")],
}
LONG_AGO = 1_000_000_000  # 2001: what `cp -p`, `tar` and `rsync -a` may leave on a new file


def _write_csv(path: Path, rows) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, PROBE_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for subject, relation, obj in rows:
            writer.writerow({"subject": subject, "relation": relation, "object": obj,
                             "text": f"{subject} {relation} {obj}.",
                             "cloze": f"{subject} {relation} <extra_id_0>."})


@pytest.fixture()
def data(tmp_path) -> Path:
    """``DATA/0809/probes`` as `tw-jax probes` writes it: three categories and stats.json."""
    folder = tmp_path / "data" / "0809" / "probes"
    folder.mkdir(parents=True)
    for category, rows in ROWS.items():
        _write_csv(folder / f"{category}.csv", rows)
    (folder / "stats.json").write_text(json.dumps(
        {"categories": {c: {"final": len(r)} for c, r in ROWS.items()}, "lighttuning": {}}))
    return tmp_path / "data"


def _prepare(manual_dir: Path, out: Path, **config) -> tfds.core.DatasetBuilder:
    builder = tfds.builder(NAME, data_dir=str(out))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir=str(manual_dir), **config))
    return builder


def _subjects(out: Path, split: str) -> list[str]:
    dataset = tfds.builder(NAME, data_dir=str(out)).as_dataset(split=split)
    return [ex["subject"].decode() for ex in tfds.as_numpy(dataset)]


def _folder(out: Path) -> Path:
    return out / "temporal_wiki" / "0809_probes" / "1.1.0"


def _replace_updated(data: Path) -> Path:
    """``updated.csv`` with other rows of the same size (as many: its stats.json still holds) and an older
    modification time than the dataset's."""
    path = data / "0809" / "probes" / "updated.csv"
    _write_csv(path, [("Grol Textiles", "chief executive officer", "Ysolde Marrickovna"),
                      ("Cien Bordling", "spouse", "Meel Dreirdstad")])
    os.utime(path, (LONG_AGO, LONG_AGO))
    return path


def test_a_dataset_records_its_sources_and_settings(data, tmp_path):
    _prepare(data, tmp_path / "tfds")
    recorded = json.loads((_folder(tmp_path / "tfds") / FINGERPRINT).read_text())
    assert recorded["sources"]["root"] == str(data)
    assert set(recorded["sources"]["files"]) == {  # the CSVs read, not stats.json
        "0809/probes/unchanged.csv", "0809/probes/updated.csv", "0809/probes/new.csv"}
    updated = recorded["sources"]["files"]["0809/probes/updated.csv"]
    assert updated["bytes"] == (data / "0809" / "probes" / "updated.csv").stat().st_size
    assert len(updated["sha256"]) == 64
    assert recorded["settings"]["dataset"] == NAME
    assert recorded["settings"]["config"]["kind"] == "probes"
    assert recorded["settings"]["max_examples_per_split"] is None


def test_an_unchanged_dataset_is_reused_even_touched_or_moved(data, tmp_path):
    out = tmp_path / "tfds"
    _prepare(data, out)
    info = _folder(out) / "dataset_info.json"
    written = info.stat().st_mtime_ns
    (data / "0809" / "probes" / "updated.csv").touch()  # newer, the same bytes
    _prepare(data, out)
    moved = shutil.copytree(data, tmp_path / "moved")  # the data folder copied elsewhere
    _prepare(moved, out)
    assert info.stat().st_mtime_ns == written  # reused, not prepared again
    assert _subjects(out, "updated") == ["Grol Textiles", "Cien Bordling"]


def test_a_source_replaced_with_an_older_mtime_is_refused_then_rebuilt(data, tmp_path):
    out = tmp_path / "tfds"
    _prepare(data, out)
    path = _replace_updated(data)
    stale = (rf"{_folder(out)}: temporal_wiki/0809_probes:1\.1\.0 was prepared from other data "
             rf"or settings \({path} does not match its checksum \(its bytes changed after it "
             rf"was prepared\)\); rebuild it with `tfds build --imports tw_jax\.datasets "
             rf"temporal_wiki/0809_probes --manual_dir {data} --data_dir {out} --overwrite`")
    with pytest.raises(StaleDatasetError, match=stale):  # before: "Reusing dataset"
        _prepare(data, out)
    with pytest.raises(StaleDatasetError, match="was prepared from other data or settings"):
        _subjects(out, "updated")  # a read through the builder (tfds.load) is refused too
    with pytest.raises(StaleDatasetError, match="updated.csv does not match its checksum"):
        tfds.load(NAME, split="updated", data_dir=str(out))
    # what reads `name:1.*.*` (TFDS's read-only builder, the tasks' TFDS sources) can check
    # the folder alone
    with pytest.raises(StaleDatasetError, match="updated.csv does not match its checksum"):
        check_folder(str(_folder(out)))

    # --overwrite (TFDS's mode that replaces the dataset) rebuilds it from the files of now
    _prepare(data, out, download_mode=tfds.download.GenerateMode.REUSE_CACHE_IF_EXISTS)
    _prepare(data, out)
    assert _subjects(out, "updated") == ["Grol Textiles", "Cien Bordling"]
    rows = list(tfds.as_numpy(tfds.builder(NAME, data_dir=str(out)).as_dataset(split="updated")))
    assert rows[0]["object"].decode() == "Ysolde Marrickovna"


def test_a_source_gone_or_another_setting_is_named(data, tmp_path):
    out = tmp_path / "tfds"
    _prepare(data, out)
    (data / "0809" / "probes" / "new.csv").unlink()
    stats = data / "0809" / "probes" / "stats.json"
    stats.write_text(json.dumps({"categories": {"unchanged": {"final": 2},
                                                "updated": {"final": 2}}, "lighttuning": {}}))
    with pytest.raises(StaleDatasetError, match=r"\(.*0809/probes/new\.csv is missing\)"):
        _prepare(data, out)
    _write_csv(data / "0809" / "probes" / "new.csv", ROWS["new"])
    stats.write_text(json.dumps({"categories": {c: {"final": len(r)} for c, r in ROWS.items()},
                                 "lighttuning": {}}))
    _prepare(data, out)  # the same bytes again: reused
    with pytest.raises(StaleDatasetError, match=r"\(its max_examples_per_split None → 1\)"):
        _prepare(data, out, max_examples_per_split=1)


def test_a_dataset_read_away_from_its_sources_reads_as_it_is(data, tmp_path):
    out = tmp_path / "tfds"
    _prepare(data, out)
    shutil.rmtree(data)  # the sources removed after the build (or another machine)
    assert _subjects(out, "updated") == ["Grol Textiles", "Cien Bordling"]


def test_a_dataset_from_before_the_records_is_dated_with_a_warning(data, tmp_path, caplog):
    out = tmp_path / "tfds"
    _prepare(data, out)
    (_folder(out) / FINGERPRINT).unlink()  # as prepared by an older tw_jax
    os.utime(_folder(out) / "dataset_info.json", (LONG_AGO + 10, LONG_AGO + 10))
    for csv_file in (data / "0809" / "probes").glob("*.csv"):
        os.utime(csv_file, (LONG_AGO, LONG_AGO))
    with caplog.at_level(logging.WARNING, logger="tw_jax.tasks.tfds_fingerprint"):
        _prepare(data, out)
    [warning] = [m for m in caplog.messages if FINGERPRINT in m]
    assert "prepared before tw_jax recorded what a dataset is made from" in warning
    assert "checked by modification time only, not by content" in warning
    assert "--overwrite" in warning
    (data / "0809" / "probes" / "new.csv").touch()
    with pytest.raises(StaleDatasetError, match=rf"prepared before tw_jax recorded what a dataset "
                                                rf"is made from \(no {FINGERPRINT}\), and "
                                                rf".*new\.csv is newer than it; rebuild it with "
                                                rf"`tfds build .*--overwrite`"):
        _prepare(data, out)


def test_the_tasks_tfds_reads_refuse_a_dataset_whose_sources_changed(data, tmp_path):
    """The SeqIO tasks read through TFDS's read-only builder (``name:1.*.*``), not tw_jax's:
    they check the fingerprint too, so a task never reads the rows of the probes before."""
    from tw_jax.tasks import sources

    out = tmp_path / "tfds"
    _prepare(data, out)
    sources.use_tfds(str(out))
    try:
        rows = sources.tfds_rows("temporal_wiki", "0809_probes", "updated")
        assert [r["subject"] for r in rows] == ["Grol Textiles", "Cien Bordling"]
        _replace_updated(data)
        with pytest.raises(StaleDatasetError, match="was prepared from other data"):
            sources.tfds_rows("temporal_wiki", "0809_probes", "updated")
    finally:
        sources.use_tfds(None)
