"""The ckl_lama TFDS builder on CKL's released layout (small files made here), zipped too."""

from __future__ import annotations

import zipfile

import pytest
import tensorflow_datasets as tfds

import tw_jax.datasets  # noqa: F401  (registers ckl_lama)


def _build(name: str, manual_dir, data_dir) -> dict[str, list[dict]]:
    builder = tfds.builder(f"ckl_lama/{name}", data_dir=str(data_dir))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir)))
    out = {}
    for split in builder.info.splits:
        out[split] = [
            {"id": ex["id"].decode(), "statement": ex["statement"].decode(),
             "answers": [a.decode() for a in ex["answers"]],
             "previous_answers": [a.decode() for a in ex["previous_answers"]]}
            for ex in tfds.as_numpy(builder.as_dataset(split=split))]
    return out


@pytest.mark.parametrize("zipped", [False, True])
def test_lama_sets_with_their_answers(tmp_path, zipped):
    from test_ckl_tasks import LONG, write_release

    root = write_release(tmp_path / "ckl")
    if zipped:  # as downloaded: a folder holding the zip (TFDS wants a folder)
        downloads = tmp_path / "downloads"
        downloads.mkdir()
        with zipfile.ZipFile(downloads / "ckl.zip", "w") as handle:
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                handle.write(path, path.relative_to(root).as_posix())
        root = downloads
    out = tmp_path / "tfds"
    assert _build("invariant_lama", root, out) == {"test": [
        {"id": "0", "statement": "Barack Obama was born in <extra_id_0> .",
         "answers": ["Honolulu"], "previous_answers": []},
        {"id": "1", "statement": LONG,
         "answers": ["Paris"], "previous_answers": []}]}
    assert _build("updated_lama", root, out) == {"test": [
        {"id": "u1", "statement": "<extra_id_0> is the prime minister of England.",
         "answers": ["Boris Johnson", "Johnson"], "previous_answers": ["Theresa May"]}]}
    assert _build("new_lama", root, out)["test"][0]["answers"] == [
        "Disney", "The Walt Disney Company"]
    easy = _build("new_lama_easy", root, out)
    assert sorted(easy) == ["small_split1", "test"]
    assert [e["answers"] for e in easy["test"]] == [["knee", "a knee"], ["Howard University"]]
    assert [e["id"] for e in easy["small_split1"]] == ["e1"]


def test_a_missing_set_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "invariantLAMA.csv").write_text("id,input,output\n")
    builder = tfds.builder("ckl_lama/new_lama", data_dir=str(tmp_path / "tfds"))
    with pytest.raises(FileNotFoundError, match="no file of ckl_new_lama"):
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(tmp_path / "empty")))
