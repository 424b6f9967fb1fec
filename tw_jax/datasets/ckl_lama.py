"""CKL's LAMA probe sets as a TFDS builder: ``tfds build --imports tw_jax.datasets
ckl_lama/updated_lama``.

One config per set: ``invariant_lama``, ``updated_lama``, ``new_lama``, ``new_lama_easy``.
The split ``test`` is the set's file (``invariantLAMA.csv`` …, answers from the JSON beside it,
as :mod:`tw_jax.tasks.ckl` reads them); a file with a suffix (``newLAMA_easy_small_split1.csv``)
is the split of its suffix (``small_split1``). ``manual_dir`` is a folder or zip of CKL's
released files, or what ``tw-jax ckl build-lama`` wrote: the builder writes the release's format, so
one reader (:mod:`tw_jax.preprocess.ckl.release_files`) serves both.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import tensorflow_datasets as tfds

from tw_jax.datasets.base import Builder
from tw_jax.preprocess.ckl.release_files import LAMA_SETS, find_files, lama_files, read_lama_set
from tw_jax.tasks.tfds_fingerprint import physical_files

CITATION = """\
@inproceedings{jang2022towards,
    title = {Towards Continual Knowledge Learning of Language Models},
    author = {Jang, Joel and Ye, Seonghyeon and Yang, Sohee and Shin, Joongbo and Han, Janghoon
              and Kim, Gyeonghun and Choi, Stanley Jungkyu and Seo, Minjoon},
    booktitle = {International Conference on Learning Representations},
    year = {2022},
    url = {https://openreview.net/forum?id=vfsRB5MImo9},
}
"""
HOMEPAGE = "https://github.com/joeljang/continual-knowledge-learning"


@dataclasses.dataclass
class CklLamaConfig(tfds.core.BuilderConfig):
    """``task``: the tasks' name of the set (``ckl_updated_lama``)."""

    task: str = ""


class CklLama(Builder):
    """CKL's probes (Jang et al., ICLR 2022): InvariantLAMA (facts that do not change),
    UpdatedLAMA (facts that changed: the new answer, the outdated ones kept), NewLAMA and
    NewLAMA-Easy (facts that are new), as T5 cloze statements with ``<extra_id_0>`` where the
    answer goes and every accepted answer."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release: the four LAMA sets, from CKL's files or ours."}
    BUILDER_CONFIGS = [
        CklLamaConfig(name=spec.task.removeprefix("ckl_"), task=spec.task,
                      description=f"{spec.label}: CKL's {spec.category} probes.")
        for spec in LAMA_SETS
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Nothing is downloaded. Pass --manual_dir as a folder or zip of CKL's released files
    (invariantLAMA.csv, updatedLAMA.csv, newLAMA.csv, newLAMA_easy.csv and their answer JSON
    files), or the folder `tw-jax ckl build-lama` wrote.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        return self.ordered_info(tfds.features.FeaturesDict({
            "id": tfds.features.Text(),
            "statement": tfds.features.Text(),
            "answers": tfds.features.Sequence(tfds.features.Text()),
            "previous_answers": tfds.features.Sequence(tfds.features.Text()),
        }), HOMEPAGE, CITATION)

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Any]:
        root = os.fspath(dl_manager.manual_dir)
        files = find_files(root)
        task = self.builder_config.task
        found = {name: (file, spec) for name, (file, spec) in lama_files(files).items()
                 if spec.task == task}
        if not found:
            raise FileNotFoundError(f"{root}: no file of {task} (see the instructions: "
                                    "`tfds build --help`, docs/tfds.md)")
        return {(name[len(task) + 1:] or "test"): self._generate_examples(files, file, spec)
                for name, (file, spec) in sorted(found.items())}

    def source_files(self, manual_dir: str) -> list[str]:
        """The set's CSVs and the answer JSON each is read with (a zip for its members)."""
        files = find_files(manual_dir)
        task = self.builder_config.task
        used = []
        for name, spec in lama_files(files).values():
            if spec.task != task:
                continue
            used.append(files[name])
            stem = name[: -len(".csv")]
            answers = [a for a in (f"{stem}_answers.json", *spec.answer_files) if a in files]
            used += [files[a] for a in answers[:1]]  # the first is the one read
        return physical_files(used)

    def _generate_examples(self, files: Any, name: str, spec: Any) -> Any:
        for index, row in enumerate(read_lama_set(files, name, spec)):
            yield index, {"id": row.id, "statement": row.statement,
                          "answers": list(row.answers), "previous_answers": list(row.previous)}
