"""temporal_wiki beyond consecutive months: a pair of two months a data folder may hold (``0810``)
and the open-book probe folders (``probes_bm25/``), built, loaded and read by the tasks through
the TFDS switch with the files' examples."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import seqio
import tensorflow_datasets as tfds

import tw_jax.datasets  # noqa: F401  (registers temporal_wiki)
import tw_jax.tasks
from tw_jax.preprocess.probes.probe_csv import read_probe_csv
from tw_jax.tasks import sources

PAIR = "0810"


def _with_context(source: Path, target: Path) -> None:
    """``source``'s rows with a ``context`` column, as ``tw-jax probe-contexts`` writes them."""
    rows = read_probe_csv(str(source))
    columns = [*rows[0], "context"] if rows else ["subject", "relation", "object", "context"]
    with target.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows({**row, "context": f"Passage {i} on {row['subject']}."}
                         for i, row in enumerate(rows))


@pytest.fixture(scope="module")
def data(train_data, tmp_path_factory) -> Path:
    """A data folder whose one pair is 08→10, with its probes and their bm25 open-book copy."""
    root = tmp_path_factory.mktemp("pairs") / "data"
    probes = root / PAIR / "probes"
    shutil.copytree(Path(train_data["data_dir"]) / "0809" / "probes", probes)
    book = root / PAIR / "probes_bm25"
    book.mkdir()
    for category in ("unchanged", "updated", "new"):
        _with_context(probes / f"{category}.csv", book / f"{category}.csv")
    (book / "stats.json").write_text(json.dumps({"settings": {"retriever": "bm25"}}))
    return root


def _build(name: str, manual_dir: Path, data_dir: Path) -> tfds.core.DatasetBuilder:
    builder = tfds.builder(f"temporal_wiki/{name}", data_dir=str(data_dir))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir)))
    return builder


def _rows(builder: tfds.core.DatasetBuilder, split: str) -> list[dict[str, str]]:
    return [{k: v.decode() for k, v in ex.items()}
            for ex in tfds.as_numpy(builder.as_dataset(split=split))]


@pytest.fixture(scope="module")
def prepared(data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tfds_pairs")
    _build(f"{PAIR}_probes", data, out)
    _build(f"{PAIR}_probes_bm25", data, out)
    return out


def test_any_pair_and_every_open_book_folder_has_a_config():
    names = {c.name for c in tw_jax.datasets.TemporalWiki.BUILDER_CONFIGS}
    months = [f"{m:02d}" for m in range(1, 13)]
    pairs = {a + b for a in months for b in months if a != b}
    assert {p for p in pairs if p in names} == pairs
    assert {f"{p}_{kind}" for p in pairs for kind in ("ssm", "probes", "probes_bm25",
                                                      "probes_dpr")} <= names
    # the published release has consecutive pairs only
    assert {n for n in names if n.startswith("release_") and n.endswith("_probes")} == {
        f"release_{months[i]}{months[(i + 1) % 12]}_probes" for i in range(12)}
    features = tfds.builder(f"temporal_wiki/{PAIR}_probes_dpr", data_dir="/nonexistent").info
    assert list(features.features) == [
        "subject", "relation", "object", "previous_object", "text", "cloze", "subject_id",
        "relation_id", "object_id", "context"]


def test_open_book_splits_hold_the_rows_and_their_contexts(prepared, data):
    builder = tfds.builder(f"temporal_wiki/{PAIR}_probes_bm25", data_dir=str(prepared))
    book = data / PAIR / "probes_bm25"
    expected = {c: read_probe_csv(str(book / f"{c}.csv")) for c in ("unchanged", "updated", "new")}
    assert set(builder.info.splits) == {c for c, rows in expected.items() if rows}
    for category in builder.info.splits:
        got = _rows(builder, category)
        assert [(r["subject"], r["object"], r["context"]) for r in got] == [
            (r["subject"], r["object"], r["context"]) for r in expected[category]]
    plain = tfds.builder(f"temporal_wiki/{PAIR}_probes", data_dir=str(prepared))
    assert "changed" in plain.info.splits and "context" not in plain.info.features


def test_an_unfinished_open_book_folder_is_an_error_naming_the_command(data, tmp_path):
    cut = tmp_path / "data"
    shutil.copytree(data, cut)
    (cut / PAIR / "probes_bm25" / "stats.json").unlink()
    with pytest.raises(FileNotFoundError,
                       match=r"0810/probes_bm25: no finished open-book probe folder .*"
                             r"`tw-jax probe-contexts --retriever bm25`"):
        _build(f"{PAIR}_probes_bm25", cut, tmp_path / "tfds")


def test_config_of_probe_files():
    assert sources.probes_config("/d/0810/probes/updated.csv") == ("0810_probes", "updated")
    assert sources.probes_config("/d/0809/probes/lighttuning_new.csv") == (
        "0809_probes", "lighttuning_new")
    assert sources.probes_config("gs://b/d/0809/probes_dpr/new.csv") == (
        "0809_probes_dpr", "new")
    assert sources.probes_config("/d/0809/probes_mine/new.csv") is None  # no config: files
    assert sources.probes_config("/d/0809/other/new.csv") is None


def _examples(name: str) -> list[dict]:
    dataset = seqio.get_mixture_or_task(name).get_dataset(
        {"inputs": 96, "targets": 8}, split="validation", shuffle=False)
    return [{k: getattr(v, "tolist", lambda v=v: v)() for k, v in ex.items()}
            for ex in dataset.as_numpy_iterator()]


def test_open_book_tasks_read_the_prepared_dataset(prepared, data, train_data, tmp_path):
    def register() -> None:
        tw_jax.tasks.register_all(str(data), t5_vocab=str(train_data["t5"]),
                                  gpt2_vocab=str(train_data["gpt2"]))

    name = f"twiki_probes_{PAIR}_bm25_updated_ssm"
    register()
    from_files = _examples(name)
    mine = tmp_path / "tfds"
    shutil.copytree(prepared, mine)
    sources.use_tfds(str(mine))
    try:
        register()
        from_tfds = _examples(name)
        shutil.rmtree(mine / "temporal_wiki" / f"{PAIR}_probes_bm25")
        register()
        with pytest.raises(Exception, match=f"temporal_wiki/{PAIR}_probes_bm25"):
            _examples(name)  # read from TFDS, not from the CSV beside it
    finally:
        sources.use_tfds(None)
        register()
    assert from_files and from_tfds == from_files
