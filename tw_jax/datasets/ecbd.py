"""Entity Cloze By Date as a TFDS builder: ``tfds build --imports tw_jax.datasets ecbd/2019``.

One config per subset (``2017`` … ``2021``, ``popular``), splits ``dev`` and ``test`` (the NP
and random span files of the split, in the order the tasks read them; a split without lines is
left out, as TFDS refuses an empty one). ``manual_dir`` is an ECBD
folder (``{subset}/{np,random}_spans_{dev,test}.json``): the released one or what ``tw-jax ecbd
build`` wrote, which writes the release's format, so one reader (:mod:`tw_jax.tasks.ecbd`, as
the ``ecbd_*`` tasks read them, bad lines named by file and line) serves both.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tw_jax.datasets.base import Builder
from tw_jax.tasks.ecbd import NO_CHAR, SUBSETS, discover, read_ecbd
from tw_jax.tasks.tfds_fingerprint import physical_files

CITATION = """\
@inproceedings{onoe-etal-2022-entity,
    title = "Entity Cloze By Date: What {LM}s Know About Unseen Entities",
    author = "Onoe, Yasumasa and Zhang, Michael and Choi, Eunsol and Durrett, Greg",
    booktitle = "Findings of the Association for Computational Linguistics: NAACL 2022",
    year = "2022",
    publisher = "Association for Computational Linguistics",
    pages = "693--702",
}
"""
HOMEPAGE = "https://github.com/yasumasaonoe/ecbd"


@dataclasses.dataclass
class EcbdConfig(tfds.core.BuilderConfig):
    subset: str = ""


class Ecbd(Builder):
    """Entity Cloze By Date (Onoe et al., 2022): sentences about entities that appeared in a
    given year, one noun phrase or random span masked, with the entity's definition (the first
    sentences of its Wikipedia article), for measuring what a language model knows about
    entities it has not seen."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release: the subsets' dev and test spans."}
    BUILDER_CONFIGS = [EcbdConfig(name=s, subset=s, description=f"The {s} subset.")
                       for s in SUBSETS]
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Nothing is downloaded. Pass --manual_dir as an ECBD folder holding
    {subset}/{np,random}_spans_{dev,test}.json: the released one (or a folder holding the zip
    its download gives), or what `tw-jax ecbd build` wrote.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        text = tfds.features.Text
        return self.ordered_info(tfds.features.FeaturesDict({
            "ex_id": text(), "masked_sentence": text(), "answer_str": text(), "span": text(),
            "span_type": text(), "definition": tfds.features.Sequence(text()),
            "entity": text(), "entity_span_str": text(),
            "entity_span_char": tfds.features.Tensor(shape=(2,), dtype=np.int64),
        }), HOMEPAGE, CITATION)

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Any]:
        root = os.fspath(dl_manager.manual_dir)
        subset = self.builder_config.subset
        found = read_ecbd(root, subsets=[subset])
        if not found:
            raise FileNotFoundError(f"{root}: no files of the ECBD subset {subset} "
                                    f"({subset}/np_spans_dev.json, …)")
        return {split: self._generate_examples(examples)
                for (_, split), examples in sorted(found.items(), key=lambda kv: kv[0][1])
                if examples}

    def source_files(self, manual_dir: str) -> list[str]:
        """The subset's span files (a zip for its members)."""
        subset = self.builder_config.subset
        return physical_files(f for (name, _), files in discover(manual_dir).items()
                              if name == subset for f in files)

    def _generate_examples(self, examples: Any) -> Any:
        for index, example in enumerate(examples):
            yield index, {
                "ex_id": example.ex_id, "masked_sentence": example.masked_sentence,
                "answer_str": example.answer_str, "span": example.span,
                "span_type": example.span_type, "definition": list(example.definition),
                "entity": example.entity, "entity_span_str": example.entity_span_str or "",
                "entity_span_char": list(example.entity_span_char or (NO_CHAR, NO_CHAR)),
            }
