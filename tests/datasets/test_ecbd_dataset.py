"""The ecbd TFDS builder on ECBD's released layout (lines made here, as the task tests')."""

from __future__ import annotations

import zipfile

import pytest
import tensorflow_datasets as tfds

import tw_jax.datasets  # noqa: F401  (registers ecbd)


def _load(builder, split: str) -> list[dict]:
    return [{k: v.decode() if isinstance(v, bytes) else
             [s.decode() for s in v] if k == "definition" else v.tolist()
             for k, v in ex.items()} for ex in tfds.as_numpy(builder.as_dataset(split=split))]


def test_subset_splits_and_examples(tmp_path):
    from test_ecbd_tasks import GPT, STORM, _write

    root = tmp_path / "ecbd"
    _write(root / "2019" / "np_spans_test.json", [GPT, GPT | {"ex_id": "Widget Model_5551_5_0"}])
    _write(root / "2019" / "np_spans_dev.json", [GPT])
    _write(root / "2019" / "random_spans_dev.json", [STORM, ""])
    _write(root / "popular" / "random_spans_test.json", [STORM])
    builder = tfds.builder("ecbd/2019", data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(root)))
    assert {n: s.num_examples for n, s in builder.info.splits.items()} == {"dev": 2, "test": 2}
    assert [e["ex_id"] for e in _load(builder, "test")] == [
        "Widget Model_5551_4_0", "Widget Model_5551_5_0"]
    dev = {e["ex_id"]: e for e in _load(builder, "dev")}
    assert dev["Widget Model_5551_4_0"] == {
        "ex_id": "Widget Model_5551_4_0", "masked_sentence": GPT["masked_sentence"],
        "answer_str": GPT["answer_str"], "span": "3 billion knobs", "span_type": "NP-COMMON",
        "definition": ["Widget Model is a machine made in 2019.", "It turns knobs."],
        "entity": "5551", "entity_span_str": "Widget Model", "entity_span_char": [-1, -1]}
    assert dev["Storm_Ida_777_2_1"]["span"] == "was about 30"
    assert dev["Storm_Ida_777_2_1"]["entity"] == "777"


def test_a_missing_subset_is_named(tmp_path):
    from test_ecbd_tasks import STORM, _write

    root = tmp_path / "ecbd"
    _write(root / "popular" / "random_spans_test.json", [STORM])
    builder = tfds.builder("ecbd/2021", data_dir=str(tmp_path / "tfds"))
    with pytest.raises(FileNotFoundError, match="no files of the ECBD subset 2021"):
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(root)))


def test_the_release_as_downloaded_a_zip_builds_the_same(tmp_path):
    """The release is a Box folder, downloaded as one zip holding ``ecbd/{subset}/…``: read in
    place, it yields the folder's examples."""
    from test_ecbd_tasks import GPT, STORM, _write

    root = tmp_path / "ecbd"
    _write(root / "2019" / "np_spans_dev.json", [GPT])
    _write(root / "2019" / "random_spans_dev.json", [STORM])
    _write(root / "2019" / "np_spans_test.json", [GPT | {"ex_id": "Widget Model_5551_5_0"}])
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with zipfile.ZipFile(downloads / "ecbd.zip", "w", zipfile.ZIP_DEFLATED) as handle:
        for path in sorted(root.rglob("*.json")):
            handle.write(path, path.relative_to(tmp_path).as_posix())
    loaded = []
    for name, manual_dir in (("folder", root), ("zip", downloads)):
        builder = tfds.builder("ecbd/2019", data_dir=str(tmp_path / name))
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir)))
        loaded.append({split: _load(builder, split) for split in builder.info.splits})
    assert loaded[1] == loaded[0] and [len(loaded[0][s]) for s in ("dev", "test")] == [2, 1]
