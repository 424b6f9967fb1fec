"""EvolvingQA as a TFDS builder: ``tfds build --imports tw_jax.datasets evolvingqa/qa``.

Three configs:

====================  =========================================  ===============================
config                splits                                     features
====================  =========================================  ===============================
``qa`` (default)      ``finetune``, ``unchanged``, ``new[_T]``,  question, answer (the updated
                      ``edited[_T]``                             one for Edited), previous_answer
``passages``          ``unchanged``, ``new_<MMMM>``              id, article_id, title, month,
                                                                 text, entities
``edited_passages``   ``edited_<MMMM>``                          id, article_id, title,
                                                                 old_month, new_month, old_text,
                                                                 new_text, old_paragraph,
                                                                 new_paragraph, old_entities,
                                                                 new_entities
====================  =========================================  ===============================

``qa`` holds a split per set the tasks register (:mod:`tw_jax.tasks.evolvingqa`; ``T`` a time
step ``03`` … or a month pair ``0809``); its ``manual_dir`` is a folder of the released CSVs (or
of zips of them) or what ``tw-jax evolvingqa generate`` wrote: the same format, read by the
tasks' reader (bad rows named by file and line). The passages are what the questions are
written from (paper §2.2): the window's unchanged articles and each month pair's new text in
passages of whole sentences, and each pair's revised passages, old and new; their
``manual_dir`` is the folder ``tw-jax evolvingqa build`` wrote (:mod:`tw_jax.preprocess.evolvingqa.
layout`), each extraction folder finished (its ``stats.json``, written last) or the build is
refused. ``entities`` are spaCy's entities of the text (``text``, ``label``): the answer
candidates the generation prompts offer.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tw_jax.datasets.base import Builder
from tw_jax.io import jsonl, paths
from tw_jax.preprocess.evolvingqa import layout
from tw_jax.preprocess.evolvingqa.generate import (
    EDITED_FIELDS,
    PASSAGE_FIELDS,
    finished_pairs,
    pairs_with_passages,
)
from tw_jax.tasks.evolvingqa import find_qa_files
from tw_jax.tasks.tfds_fingerprint import physical_files

CITATION = """\
@inproceedings{kim-etal-2024-carpe,
    title = "Carpe diem: On the Evaluation of World Knowledge in Lifelong Language Models",
    author = "Kim, Yujin and Yoon, Jaehong and Ye, Seonghyeon and Bae, Sangmin and Ho, Namgyu
              and Hwang, Sung Ju and Yun, Se-Young",
    booktitle = "Proceedings of the 2024 Conference of the North American Chapter of the
                 Association for Computational Linguistics: Human Language Technologies
                 (Volume 1: Long Papers)",
    year = "2024",
    address = "Mexico City, Mexico",
    publisher = "Association for Computational Linguistics",
}
"""
HOMEPAGE = "https://github.com/kimyuji/EvolvingQA_benchmark"


@dataclasses.dataclass
class EvolvingqaConfig(tfds.core.BuilderConfig):
    """``kind``: ``qa``, ``passages`` or ``edited_passages``."""

    kind: str = "qa"


def _entities() -> tfds.features.Sequence:
    return tfds.features.Sequence({"text": tfds.features.Text(), "label": tfds.features.Text()})


def _features(kind: str) -> tfds.features.FeaturesDict:
    text = tfds.features.Text
    if kind == "qa":
        return tfds.features.FeaturesDict({
            "question": text(), "answer": text(), "previous_answer": text()})
    common = {"id": text(), "article_id": tfds.features.Scalar(dtype=np.int64), "title": text()}
    if kind == "passages":
        return tfds.features.FeaturesDict({
            **common, "month": text(), "text": text(), "entities": _entities()})
    return tfds.features.FeaturesDict({
        **common, **{f: text() for f in ("old_month", "new_month", "old_text", "new_text",
                                         "old_paragraph", "new_paragraph")},
        "old_entities": _entities(), "new_entities": _entities()})


class Evolvingqa(Builder):
    """EvolvingQA (Kim et al., NAACL 2024): questions generated from monthly Wikipedia edits.
    Unchanged questions keep their answer, New ones ask about added facts, Edited ones have an
    outdated and an updated answer; a model trained month by month should answer with the
    updated one."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {
        "1.0.0": "First release: the QA sets per time step and kind.",
        "1.1.0": "Configs: qa (the QA sets, as 1.0.0 gave them), passages and edited_passages "
                 "(what the questions are written from, from a `tw-jax evolvingqa build` "
                 "folder).",
    }
    BUILDER_CONFIGS = [
        EvolvingqaConfig(name="qa", kind="qa", description="The QA sets per time step and kind."),
        EvolvingqaConfig(name="passages", kind="passages",
                         description="Unchanged and New passages, with their entities."),
        EvolvingqaConfig(name="edited_passages", kind="edited_passages",
                         description="Revised passages, old and new, with their entities."),
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Nothing is downloaded. Pass --manual_dir as
    - for qa: a folder of EvolvingQA's CSVs (unchanged_train.csv, unchanged_eval.csv,
      new_<T>.csv, edited_<T>.csv, or zips of them), or the folder `tw-jax evolvingqa generate`
      wrote;
    - for passages and edited_passages: the folder `tw-jax evolvingqa build` wrote.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        return self.ordered_info(_features(self.builder_config.kind), HOMEPAGE, CITATION)

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Any]:
        root = os.fspath(dl_manager.manual_dir)
        kind = self.builder_config.kind
        if kind == "qa":
            return self._qa_splits(root)
        files = _passage_files(root, edited=kind == "edited_passages")
        splits = {split: self._generate_passages(path, kind)
                  for split, path in files.items() if _has_lines(path)}
        if not splits:  # TFDS would prepare a dataset without a split to load
            raise ValueError(f"{root}: {', '.join(sorted(files))} hold no passage (the build "
                             "found none): nothing to prepare")
        return splits

    def source_files(self, manual_dir: str) -> list[str]:
        """The QA CSVs (a zip for its members), or the build folder's passage files."""
        kind = self.builder_config.kind
        if kind == "qa":
            return physical_files(qa.file for qa in find_qa_files(manual_dir))
        files = _passage_files(manual_dir, edited=kind == "edited_passages")
        return sorted(path for path in files.values() if paths.isfile(path))

    def _qa_splits(self, root: str) -> dict[str, Any]:
        found = find_qa_files(root)
        if not found:
            raise FileNotFoundError(f"{root}: no EvolvingQA CSVs (unchanged_eval.csv, "
                                    "new_<T>.csv, edited_<T>.csv …)")
        # a set without rows is no split: TFDS refuses an empty one
        return {qa.task.removeprefix("evolvingqa_"): self._generate_examples(rows)
                for qa in found if (rows := qa.load())}

    def _generate_examples(self, rows: list[dict[str, str]]) -> Any:
        for index, row in enumerate(rows):
            yield index, {"question": row["question"],
                          "answer": row.get("answer2") or row["answer"],
                          "previous_answer": row.get("answer1", "")}

    def _generate_passages(self, path: str, kind: str) -> Iterator[tuple[int, dict[str, Any]]]:
        features = self.info.features
        for index, record in enumerate(jsonl.records(path, _REQUIRED[kind])):
            yield index, {name: _value(record, name) for name in features}


_REQUIRED = {"passages": PASSAGE_FIELDS, "edited_passages": EDITED_FIELDS}


def _value(record: dict[str, Any], name: str) -> Any:
    value = record.get(name, "")
    if name.endswith("entities"):
        return [{"text": e["text"], "label": e["label"]} for e in value or ()]
    return int(value) if name == "article_id" else str(value)


def _passage_files(root: str, *, edited: bool) -> dict[str, str]:
    """``{split: file}`` of a build folder; an unfinished extraction folder is an error naming
    the command that writes it."""
    window = layout.window_dir(root)
    if not paths.isdir(window) or not pairs_with_passages(root):
        raise FileNotFoundError(f"{root}: no EvolvingQA passages ({layout.EXTRACTION}/, "
                                f"<MMMM>/{layout.EXTRACTION}/); `tw-jax evolvingqa build` "
                                "writes them")
    pairs = finished_pairs(root)
    if edited:
        return {f"edited_{p}": paths.join(layout.extraction_dir(root, p), layout.EDITED_PAIRS)
                for p in pairs}
    return {"unchanged": paths.join(window, layout.UNCHANGED_PASSAGES),
            **{f"new_{p}": paths.join(layout.extraction_dir(root, p), layout.NEW_PASSAGES)
               for p in pairs}}


def _has_lines(path: str) -> bool:
    """Whether a JSON-lines file holds a record (TFDS refuses a split without examples)."""
    return paths.isfile(path) and paths.size(path) > 0
