"""EvolvingQA's question-answering sets as seqio tasks, from the released or generated CSVs.

The release (and ``tw-jax evolvingqa generate``) has CSVs ``question,answer`` (Unchanged, New)
and ``question,answer1,answer2`` (Edited: the outdated then the updated answer), named as the
authors' code reads them: ``unchanged_train.csv`` (the QA fine-tuning set), ``unchanged_eval.csv``
(or ``unchanged.csv``), ``new_<T>.csv`` and ``edited_<T>.csv`` for a time step ``T`` (``03`` …,
or a month pair ``0809``; ``new.csv`` / ``edited.csv`` without one). A folder, a ``.zip`` or a
folder of zips is read as :mod:`tw_jax.tasks.published` reads TemporalWiki's (members checked,
read in place). Columns other than these (a pandas index, ``question_time``) are ignored.

Tasks (T5, inputs and targets ending in EOS; the model answers in plain text, as the paper's
QA fine-tuning teaches it, so no sentinels):

=================================  ===================================  ======================
task                               example                              splits
=================================  ===================================  ======================
``evolvingqa_finetune``            question → answer                    train, validation
``evolvingqa_unchanged``           question → answer                    validation, test
``evolvingqa_new[_T]``             question → answer                    validation, test
``evolvingqa_edited[_T]``          question → updated answer            validation, test
=================================  ===================================  ======================

Evaluation mixtures (each task keeps its own metrics): ``evolvingqa_eval_T`` (Unchanged with
time step T's New and Edited sets) for every T, and ``evolvingqa_eval`` (every evaluation set).

With the TFDS switch on (:func:`tw_jax.tasks.sources.use_tfds`, ``$TW_JAX_TFDS_DIR``) the sets
are read from the ``evolvingqa/qa`` dataset prepared from the same folder (docs/tfds.md): the
same examples in the same order.

Every example carries ``question``, ``object`` (the answer scored: the updated one for Edited)
and ``previous_object`` (the outdated answer, Edited only) for the evaluator, so the probe
tasks' postprocessor and metrics apply (:func:`tw_jax.tasks.metrics.squad`: EM/F1 after SQuAD
normalisation, the paper's lower-casing and punctuation removal plus articles).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO

import seqio

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.csv_reader import BoundedReader
from tw_jax.preprocess.dumps.released import PublishedFile, index_files
from tw_jax.tasks import metrics
from tw_jax.tasks.preprocessors import cache_point, tokenize_keep_text
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.sources import RowsSource, tfds_active, tfds_rows
from tw_jax.tasks.vocab import LazyVocabulary, load_vocabularies, t5_path

FINETUNE, UNCHANGED, NEW, EDITED = "finetune", "unchanged", "new", "edited"
QA_COLUMNS = ("question", "answer")
EDITED_COLUMNS = ("question", "answer1", "answer2")
FINETUNE_SPLITS = ("train", "validation")
EVAL_SPLITS = ("validation", "test")
GROUP = "evolvingqa"

_FILE = re.compile(r"^(unchanged_train|unchanged_eval|unchanged|new|edited)(?:_([A-Za-z0-9]+))?\.csv$")
_KIND = {"unchanged_train": FINETUNE, "unchanged_eval": UNCHANGED, "unchanged": UNCHANGED,
         "new": NEW, "edited": EDITED}


def read_qa_rows(handle: IO[str], name: str, *, edited: bool) -> list[dict[str, str]]:
    """Rows of one QA CSV as ``{question, answer}`` or ``{question, answer1, answer2}``.

    A missing column, a row with the wrong number of fields or an empty question or answer is a
    :class:`DumpError` naming ``name`` and the line.
    """
    wanted = EDITED_COLUMNS if edited else QA_COLUMNS
    reader = BoundedReader(handle, name)
    try:
        header = [c.strip().lstrip("\ufeff") for c in next(reader)]
    except StopIteration:
        raise DumpError(name, "line 1", "empty file: expected a CSV header") from None
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DumpError(name, "line 1", f"header {header} lacks {', '.join(missing)}")
    where = {c: header.index(c) for c in wanted}
    rows = []
    for fields in reader:
        line = reader.line_num
        if not fields:
            continue
        if len(fields) != len(header):
            raise DumpError(name, f"line {line}", f"{len(fields)} fields, header has {len(header)}")
        row = {c: fields[i].strip() for c, i in where.items()}
        empty = [c for c in wanted if not row[c]]
        if empty:
            raise DumpError(name, f"line {line}", f"empty {', '.join(empty)}")
        rows.append(row)
    return rows


def read_qa_csv(path: str | os.PathLike[str], *, edited: bool | None = None) -> list[dict[str, str]]:
    """Rows of a QA CSV (local or in a bucket); ``edited`` None tells the kind from the name."""
    path = os.fspath(path)
    if edited is None:
        match = _FILE.match(os.path.basename(path))
        edited = bool(match) and _KIND[match.group(1)] == EDITED
    data = paths.read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DumpError(path, f"byte {error.start}", "not UTF-8") from None
    return read_qa_rows(io.StringIO(text, newline=""), path, edited=edited)


@dataclass(frozen=True)
class QAFile:
    """One QA set of a release: its kind, time-step label ("" when none) and file."""

    kind: str
    label: str
    file: PublishedFile

    @property
    def task(self) -> str:
        return task_name(self.kind, self.label)

    def load(self) -> list[dict[str, str]]:
        """The set's rows: its file, or (after :func:`tw_jax.tasks.sources.use_tfds`) the
        ``evolvingqa/qa`` split prepared from it, as the file gives them."""
        if tfds_active():
            return [_qa_row(row, edited=self.kind == EDITED)
                    for row in tfds_rows("evolvingqa", "qa", self.task.removeprefix("evolvingqa_"))]
        if self.file.archive is None:
            return read_qa_csv(self.file.location, edited=self.kind == EDITED)
        try:
            with self.file.open_text() as handle:
                return read_qa_rows(handle, self.file.name, edited=self.kind == EDITED)
        except UnicodeDecodeError:
            raise DumpError(self.file.name, None, "not UTF-8") from None


def _qa_row(example: Mapping[str, str], *, edited: bool) -> dict[str, str]:
    """A CSV row of an ``evolvingqa/qa`` example (the updated answer is ``answer``)."""
    if edited:
        return {"question": example["question"], "answer1": example["previous_answer"],
                "answer2": example["answer"]}
    return {"question": example["question"], "answer": example["answer"]}


def task_name(kind: str, label: str = "") -> str:
    """``evolvingqa_finetune``, ``evolvingqa_unchanged``, ``evolvingqa_{new,edited}[_T]``."""
    suffix = f"_{label}" if label and kind in (NEW, EDITED) else ""
    return f"evolvingqa_{kind}{suffix}"


def find_qa_files(folder_or_zip: str | os.PathLike[str]) -> list[QAFile]:
    """The QA sets of a release folder or zip, in name order (``unchanged_eval.csv`` wins over
    ``unchanged.csv`` when both are there)."""
    found: dict[str, QAFile] = {}
    for file in index_files(folder_or_zip):
        match = _FILE.match(file.path.name)
        if match is None:
            continue
        qa = QAFile(_KIND[match.group(1)], match.group(2) or "", file)
        if qa.task in found and match.group(1) == "unchanged":
            continue
        found[qa.task] = qa
    return [found[name] for name in sorted(found)]


def format_qa(row: Mapping[str, str]) -> dict[str, str]:
    """question → answer; Edited rows answer with the updated ``answer2``."""
    answer = row["answer2"] if "answer2" in row else row["answer"]
    return {
        "inputs": row["question"],
        "targets": answer,
        "question": row["question"],
        "object": answer,
        "previous_object": row.get("answer1", ""),
    }


def _register(registrar: Registrar, qa: QAFile, vocabulary: seqio.Vocabulary) -> str:
    splits = FINETUNE_SPLITS if qa.kind == FINETUNE else EVAL_SPLITS
    registrar.task(
        qa.task,
        source=RowsSource(qa.load, format_qa, splits),
        output_features={k: seqio.Feature(vocabulary, add_eos=True) for k in ("inputs", "targets")},
        preprocessors=[load_vocabularies, tokenize_keep_text, cache_point(),
                       seqio.preprocessors.append_eos_after_trim],
        postprocess_fn=metrics.probe_postprocessor,
        metric_fns=[metrics.perplexity, metrics.squad],
    )
    return qa.task


def register_evolvingqa(
    folder_or_zip: str | os.PathLike[str],
    *,
    t5_vocab: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Registers the tasks of a QA folder (released or generated); returns their names.

    The T5 vocabulary is ``t5_vocab``, else ``$TW_JAX_T5_VOCAB``, else
    ``DATA_DIR/vocab/t5/spiece.model``. Calling again replaces what the last call registered.
    """
    files = find_qa_files(folder_or_zip)
    if not files:
        raise DumpError(os.fspath(folder_or_zip), None,
                        "no EvolvingQA CSVs (unchanged_train.csv, new_T.csv, edited_T.csv …)")
    registrar = Registrar(GROUP)
    vocabulary = LazyVocabulary("t5", t5_path(None if data_dir is None else os.fspath(data_dir),
                                              t5_vocab))
    names = [_register(registrar, qa, vocabulary) for qa in files]
    evaluated = [qa for qa in files if qa.kind != FINETUNE]
    labels = sorted({qa.label for qa in evaluated if qa.label})
    for label in labels:  # one time step: Unchanged with that step's New and Edited sets
        tasks = [qa.task for qa in evaluated if qa.kind == UNCHANGED or qa.label == label]
        names.append(registrar.eval_mixture(f"evolvingqa_eval_{label}", tasks).name)
    if evaluated:
        names.append(registrar.eval_mixture("evolvingqa_eval",
                                            [qa.task for qa in evaluated]).name)
    return names
