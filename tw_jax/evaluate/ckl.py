"""CKL's zero-shot evaluation: EM and F1 of T5's decoded span on each probe set (CKL §4, App. C).

For each probe task of :mod:`tw_jax.tasks.ckl` the statement is tokenised and trimmed to the
set's input length by the task itself (EOS kept), T5 decodes at most the set's output length
(greedy, or beam search with ``beam_size > 1``; the reference code used two beams), the first
span after the sentinel is the prediction, and :func:`tw_jax.evaluate.qa.qa_scores` scores it
against every accepted answer with SQuAD normalisation (``em``, ``f1``) and, for UpdatedLAMA,
against the outdated answers (``em_previous``, ``f1_previous``).

Results use the schema of :mod:`tw_jax.evaluate.results`: category ``unchanged`` (IL),
``updated`` (UL), ``new`` (NL), ``new_easy`` (NLE); ``eval_month`` is the phase's pseudo month
pair (``0001`` for CKL's single update, ``0001, 0102, …`` for phases) and ``trained_through`` is
``base`` for the model before any update, else the phase it was trained through, as the
lifelong runner writes them. ``tw-jax report`` then prints CKL Table 2 with FUAR.

Phases (:func:`scored_here`; the runs are scored by :mod:`tw_jax.benchmarks.ckl_phases`):
InvariantLAMA is CKL's only forgetting task ``T^F_0``, so it is recorded under the first phase
for every model (what FUAR reads) and, for display, under each model's own phase; no model is
recorded on InvariantLAMA under a later phase than its own, which would define the ``T^F_j``
(j ≥ 1) that CKL leaves undefined.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.evaluate.qa import decode_token_rows, qa_scores
from tw_jax.evaluate.report import ResultIndex, ckl_table
from tw_jax.evaluate.results import Result, read_results, write_prediction_rows
from tw_jax.evaluate.runs import ModelSource, loaded_run
from tw_jax.evaluate.set_scores import SetScores
from tw_jax.io import paths
from tw_jax.preprocess.ckl.phases import MANIFEST
from tw_jax.runtime import task_data
from tw_jax.tasks import LazyVocabulary
from tw_jax.tasks.ckl import PREVIOUS_SEPARATOR, eval_lengths, lama_set, probe_tasks
from tw_jax.tasks.damaged import named_read_errors

METRICS = ("em", "f1", "em_previous", "f1_previous")
SSM = "ssm"  # the objective of the models that read CKL's probe tasks


# What a model other than T5 is told (CKL App. G: GPT-2 is light-tuned on the probes first).
OBJECTIVE_WHY = ("CKL's probe tasks (salient span masking; GPT-2 is light-tuned first, CKL "
                 "App. G)")


def loaded_model(source: ModelSource) -> contextlib.AbstractContextManager[Any]:
    """The model of ``source`` (:func:`tw_jax.evaluate.runs.loaded_run`), refused before any
    checkpoint is read unless it fills salient spans, as CKL's probe tasks need."""
    return loaded_run(source, objective=SSM, why=OBJECTIVE_WHY)


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def task_examples(task: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The registered probe task's examples at CKL's lengths (tokenised, trimmed, EOS kept)."""

    dataset = task_data.task_dataset(task, eval_lengths(task), split="test", shuffle=False,
                                num_epochs=1)
    if limit is not None:
        dataset = dataset.take(limit)
    with named_read_errors(task, "test"):
        return list(dataset.as_numpy_iterator())


def evaluate_task(
    module: Any, params: Any, task: str, *, category: str | None = None, beam_size: int = 1,
    batch_size: int = 32, limit: int | None = None,
    examples: list[dict[str, Any]] | None = None,
) -> SetScores | None:
    """Zero-shot EM/F1 of one registered CKL probe task (its ``examples`` when already read);
    None when it has no rows."""

    examples = task_examples(task, limit) if examples is None else examples
    if not examples:
        return None
    vocabulary = task_data.vocabulary(task)
    if isinstance(vocabulary, LazyVocabulary):
        vocabulary = vocabulary.vocabulary
    predictions = decode_token_rows(
        module, params, vocabulary, [ex["inputs"].tolist() for ex in examples],
        max_new_tokens=eval_lengths(task)["targets"], beam_size=beam_size,
        batch_size=batch_size,
    )
    answers = [json.loads(_text(ex["answers"])) for ex in examples]
    previous = [[p for p in _text(ex["previous_object"]).split(PREVIOUS_SEPARATOR) if p.strip()]
                for ex in examples]
    scores = qa_scores(predictions, answers, previous if any(previous) else None)
    return SetScores(task, category or lama_set(task).category, len(examples), scores,
                     predictions, [_text(ex["id"]) for ex in examples])


def results_of(scores: Sequence[SetScores], method: str, trained_through: str, phase: str
               ) -> list[Result]:
    """The results lines of scored sets (one per metric present)."""
    return [r for s in scores for r in s.results(method, trained_through, phase, METRICS)]


def write_predictions(folder: str | os.PathLike[str], label: str, scores: SetScores) -> str:
    """``folder/<label>.<task>.jsonl``: id and prediction per probe (the reference's log)."""

    ids = ({"id": row_id} for row_id in scores.ids)
    return write_prediction_rows(folder, f"{label}.{scores.name}", ids, scores.predictions)


# --- phases -------------------------------------------------------------------------------


def read_manifest(data_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``DATA/ckl_phases.json`` as ``tw-jax ckl phases`` wrote it."""

    path = paths.join(data_dir, MANIFEST)
    if not paths.isfile(path):
        raise DumpError(path, None, "no CKL phases manifest (run tw-jax ckl phases)")
    try:
        manifest = json.loads(paths.read_text(path))
    except json.JSONDecodeError as error:
        raise DumpError(path, f"line {error.lineno}", f"not JSON ({error.msg})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("phases"), list):
        raise DumpError(path, None, "not a CKL phases manifest (no 'phases' list)")
    return manifest


def scored_here(model_phase: int, set_phase: int, category: str) -> bool:
    """Whether the model after phase ``model_phase`` (0: before any) is recorded on phase
    ``set_phase``'s set of ``category`` (module docstring: InvariantLAMA only under the first
    phase, the model's own phase, or any phase for the base model)."""
    if category != "unchanged":
        return True
    return model_phase == 0 or set_phase == 1 or set_phase == model_phase


def ckl_table_text(results_dir: str | os.PathLike[str]) -> str:
    """CKL Table 2 (EM, with FUAR) of a results file, as Markdown."""

    return ckl_table(ResultIndex(read_results([results_dir])), "em").markdown()


def summary_line(scores: SetScores) -> str:
    values = " ".join(f"{k}={scores.values[k]:.2f}" for k in METRICS if k in scores.values)
    return f"{scores.name} ({scores.category}, {scores.rows} probes): {values}"


def category_map(names: Sequence[str]) -> Mapping[str, str]:
    """Probe task → results category for a single-phase evaluation (NLE subsets: new_easy)."""

    return {task: lama_set(task).category for task in probe_tasks(list(names))}
