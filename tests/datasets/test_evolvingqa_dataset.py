"""The evolvingqa TFDS builder: the QA sets of EvolvingQA's released CSVs (made here, as the
task tests') and the passages of a build folder."""

from __future__ import annotations

import json

import pytest
import tensorflow_datasets as tfds

import tw_jax.datasets  # noqa: F401  (registers evolvingqa)
from tw_jax.errors import DumpError


def test_a_split_per_set_with_the_updated_answer(tmp_path):
    from test_evolvingqa_tasks import _release

    root = _release(tmp_path / "eqa")
    (root / "new_04.csv").write_text("question,answer\n", encoding="utf-8")  # no rows: no split
    builder = tfds.builder("evolvingqa", data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(root)))
    loaded = {split: [{k: v.decode() for k, v in ex.items()}
                      for ex in tfds.as_numpy(builder.as_dataset(split=split))]
              for split in builder.info.splits}
    assert loaded == {
        "edited_03": [{"question": "Who is the CEO of Grol Textiles?",
                       "answer": "Granette Naunsberg", "previous_answer": "L. J. Kulric"}],
        "finetune": [
            {"question": "Who directed Silent Islands?", "answer": "Zelel Wernton",
             "previous_answer": ""},
            {"question": "Where is Trurmouth, exactly?", "answer": "Corvania",
             "previous_answer": ""}],
        "new_03": [{"question": "Whom did Bordling marry?", "answer": "Meel Dreirdstad",
                    "previous_answer": ""}],
        "unchanged": [{"question": "Q?", "answer": "A", "previous_answer": ""}],
    }


def _jsonl(path, records) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")


ENTITY = [{"text": "Grol Textiles", "label": "ORG"}]
UNCHANGED = {"id": "7:0", "article_id": 7, "title": "Trurmouth", "month": "2021-08",
             "text": "Trurmouth is a port.", "entities": [{"text": "Trurmouth", "label": "GPE"}]}
NEW = {"id": "9:0", "article_id": 9, "title": "Bordling", "pair": "0809", "month": "2021-09",
       "kind": "new", "text": "Bordling married Meel Dreirdstad.", "entities": []}
EDITED = {"id": "4:2:0", "article_id": 4, "title": "Grol Textiles", "pair": "0809",
          "old_month": "2021-08", "new_month": "2021-09", "old_text": "Its CEO is L. J. Kulric.",
          "new_text": "Its CEO is Granette Naunsberg.", "old_paragraph": "P old.",
          "new_paragraph": "P new.", "old_entities": ENTITY, "new_entities": ENTITY[:0]}


def _build_folder(root):
    """What `tw-jax evolvingqa build` writes (preprocess/evolvingqa/layout.py), by hand: the
    window's unchanged passages, and per pair its new passages and revised ones."""
    _jsonl(root / "evolvingqa" / "unchanged.jsonl", [UNCHANGED])
    _jsonl(root / "0809" / "evolvingqa" / "new.jsonl", [NEW])
    _jsonl(root / "0809" / "evolvingqa" / "edited.jsonl", [EDITED])
    _jsonl(root / "0910" / "evolvingqa" / "new.jsonl", [])  # no rows: no split
    _jsonl(root / "0910" / "evolvingqa" / "edited.jsonl", [EDITED | {"pair": "0910"}])
    for folder in ("evolvingqa", "0809/evolvingqa", "0910/evolvingqa"):
        (root / folder / "stats.json").write_text("{}")
    return root


def _load(builder, split):
    def plain(value):
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, dict):  # a sequence of entities: a dict of arrays
            return [{"text": t.decode(), "label": lab.decode()}
                    for t, lab in zip(value["text"], value["label"], strict=True)]
        return int(value)

    return [{k: plain(v) for k, v in ex.items()}
            for ex in tfds.as_numpy(builder.as_dataset(split=split))]


def test_passages_of_a_build_folder(tmp_path):
    root = _build_folder(tmp_path / "build")
    out = tmp_path / "tfds"
    config = tfds.download.DownloadConfig(manual_dir=str(root))
    passages = tfds.builder("evolvingqa/passages", data_dir=str(out))
    passages.download_and_prepare(download_config=config)
    assert set(passages.info.splits) == {"unchanged", "new_0809"}
    keep = ("id", "article_id", "title", "month", "text", "entities")
    assert _load(passages, "unchanged") == [{k: UNCHANGED[k] for k in keep}]
    assert _load(passages, "new_0809") == [{k: NEW[k] for k in keep}]
    edited = tfds.builder("evolvingqa/edited_passages", data_dir=str(out))
    edited.download_and_prepare(download_config=config)
    assert set(edited.info.splits) == {"edited_0809", "edited_0910"}
    assert _load(edited, "edited_0809") == [{k: v for k, v in EDITED.items() if k != "pair"}]
    assert str(edited.version) == "1.1.0"


def test_an_unfinished_build_is_refused_naming_the_command(tmp_path):
    root = _build_folder(tmp_path / "build")
    (root / "0910" / "evolvingqa" / "stats.json").unlink()
    builder = tfds.builder("evolvingqa/edited_passages", data_dir=str(tmp_path / "tfds"))
    with pytest.raises(DumpError, match=r"0910/evolvingqa.*tw-jax evolvingqa build"):
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(root)))


def test_a_build_without_revisions_has_no_edited_passages_to_prepare(tmp_path):
    root = _build_folder(tmp_path / "build")
    for pair in ("0809", "0910"):
        (root / pair / "evolvingqa" / "edited.jsonl").write_text("")
    builder = tfds.builder("evolvingqa/edited_passages", data_dir=str(tmp_path / "tfds"))
    with pytest.raises(ValueError, match=r"edited_0809, edited_0910 hold no passage"):
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(root)))
