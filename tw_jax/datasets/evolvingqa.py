"""EvolvingQA's question-answering sets as a TFDS builder: ``tfds build --imports
tw_jax.datasets evolvingqa``.

A split per set the tasks register (:mod:`tw_jax.tasks.evolvingqa`): ``finetune`` (the QA
fine-tuning set), ``unchanged``, ``new[_T]`` and ``edited[_T]`` for each time step ``T`` present
(``03`` …, or a month pair ``0809``). ``manual_dir`` is a folder of the released CSVs (or of
zips of them) or what ``tw-jax evolvingqa generate`` wrote: the same format, read by the tasks'
reader (bad rows named by file and line). The passages are not in the builder yet.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow_datasets as tfds

from tw_jax.datasets.base import Builder
from tw_jax.tasks.evolvingqa import find_qa_files

CITATION = """\
@inproceedings{kim-etal-2024-carpe,
    title = "Carpe diem: On the Evaluation of World Knowledge in Lifelong Language Models",
    author = "Kim, Yujin and Yoon, Jaehong and Ye, Seonghyeon and Bae, Sangmin and Ho, Namgyu
              and Hwang, Sung Ju and Yun, Se-Young",
    booktitle = "Proceedings of the 2024 Conference of the North American Chapter of the
                 Association for Computational Linguistics",
    year = "2024",
    publisher = "Association for Computational Linguistics",
}
"""
HOMEPAGE = "https://github.com/kimyuji/EvolvingQA_benchmark"


class Evolvingqa(Builder):
    """EvolvingQA (Kim et al., NAACL 2024): questions generated from monthly Wikipedia edits.
    Unchanged questions keep their answer, New ones ask about added facts, Edited ones have an
    outdated and an updated answer; a model trained month by month should answer with the
    updated one."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release: the QA sets per time step and kind."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Nothing is downloaded. Pass --manual_dir as a folder of EvolvingQA's CSVs
    (unchanged_train.csv, unchanged_eval.csv, new_<T>.csv, edited_<T>.csv, or zips of them), or
    the folder `tw-jax evolvingqa generate` wrote.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        text = tfds.features.Text
        return self.ordered_info(tfds.features.FeaturesDict({
            "question": text(), "answer": text(), "previous_answer": text(),
        }), HOMEPAGE, CITATION)

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Any]:
        root = os.fspath(dl_manager.manual_dir)
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
