"""``tw-jax eval`` and ``tw-jax infer``: a trained checkpoint on a task, in the trainer's gin style.

- :func:`evaluate` runs ``seqio.Evaluator`` on a task or mixture (every task of a mixture,
  each with its own metrics), with the model functions of
  :mod:`tw_jax.evaluate.seqio_eval`: ``score_fn`` scores each example with teacher forcing (no
  dropout) on the target tokens its ``targets_weights`` marks when its task gives them (the
  probe tasks: their perplexity's tokens, :mod:`tw_jax.tasks.probes`), ``predict_fn`` gives
  the answers of the tasks that score them (EM/F1) under the model's QA protocol (GPT-2:
  teacher-forced, T5: decoded from the prompt; ``qa_protocol`` picks another), as the lifelong
  runner reads them. The numbers are the tasks' metric functions (``docs/metrics.md``): ``perplexity``, the mean over examples of each
  example's perplexity (TemporalWiki's per-instance probe perplexity, the lifelong report's
  ``ppl``), ``token_perplexity`` (the token-level one), ``examples`` and ``tokens``; ``em`` and
  ``f1`` where the task has them. As T5X, results go to ``MODEL_DIR/inference_eval``:
  ``<task>-metrics.jsonl``, ``<task>-<step>.jsonl`` (every example with its output), a
  TensorBoard stream per task, and ``<name>.<split>.step<N>.json`` with every task's metrics.
- :func:`infer` decodes greedily (:func:`tw_jax.models.decoding.greedy_decode`, variants
  included) and writes one JSON object per example: index, inputs, targets and prediction text.

The parameters are those of the latest checkpoint in MODEL_DIR, or of ``checkpoint_path`` (a
step folder, a MODEL_DIR or a Hugging Face folder), restored onto this run's mesh whatever mesh
or host count trained them. Paths may be relative or gs:// URLs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gin
import jax
import numpy as np

from tw_jax.errors import UsageError
from tw_jax.evaluate.runs import LoadedRun, load_params
from tw_jax.evaluate.seqio_eval import SeqioModel, until_eos
from tw_jax.evaluate.seqio_loggers import JSONLogger, TensorBoardLogger, metric_values
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, write_json
from tw_jax.io.jsonl import json_line
from tw_jax.io.paths import PathLike
from tw_jax.io.progress import progress
from tw_jax.models.sharding import activate
from tw_jax.runtime import distributed, task_data
from tw_jax.runtime.run_model import build_run_model
from tw_jax.runtime.task_data import ensure_tasks
from tw_jax.tasks.damaged import named_read_errors

# Where T5X's evaluation writes its metrics and inferences, under MODEL_DIR.
INFERENCE_EVAL = "inference_eval"


def check_lengths(name: str, lengths: Mapping[str, int]) -> None:
    """A task with ``inputs`` needs an ``inputs`` length: without one a decoder-only model's
    features would drop the prompt (GPT-2's gin files give ``targets`` only)."""
    import seqio

    if name not in seqio.TaskRegistry.names() and name not in seqio.MixtureRegistry.names():
        return
    features = seqio.get_mixture_or_task(name).output_features
    if "inputs" in features and "inputs" not in lengths:
        example = {"inputs": 64, "targets": lengths.get("targets", 64)}
        raise UsageError(f"{name} has inputs (a prompt): give TASK_FEATURE_LENGTHS an 'inputs' "
                         f"length, e.g. --gin.TASK_FEATURE_LENGTHS=\"{example}\"")


def check_prompts(name: str) -> None:
    """A probe task scores whole sentences and has no ``inputs``: decoded, every example would
    start from nothing and give the same text. A :class:`UsageError` names the task with the
    probe's prompt, ``<name>_object`` (subject and relation, the object to write). Other tasks
    without inputs (a language-modelling corpus) decode as before, from the start of text."""
    import seqio

    known = {*seqio.TaskRegistry.names(), *seqio.MixtureRegistry.names()}
    prompted = f"{name}_object"
    if prompted not in known:
        return
    for task in seqio.get_subtasks(seqio.get_mixture_or_task(name)):
        if "inputs" not in task.output_features:
            raise UsageError(f"{task.name} has no inputs, so there is no prompt to decode from; "
                             f"infer on --task {prompted} (subject and relation as the prompt), "
                             f"or score {name} with tw-jax eval")


@gin.configurable(module="tw_jax.evaluate")
def evaluate(
    *,
    model_config: Any,
    mixture_or_task_name: str,
    task_feature_lengths: Mapping[str, int],
    batch_size: int,
    model_dir: PathLike,
    checkpoint_path: str | None = None,
    split: str = "validation",
    max_examples: int | None = None,
    max_new_tokens: int | None = None,
    beam_size: int = 1,
    qa_protocol: str | None = None,
    mesh_shape: Sequence[int] = (-1, 1, 1),
    per_probe_path: str | None = None,
) -> dict[str, Any]:
    """Every task of ``mixture_or_task_name`` through ``seqio.Evaluator``: its own metrics per
    task, logged under ``MODEL_DIR/inference_eval`` (see the module docstring); with
    ``per_probe_path`` (``tw-jax eval --per-probe``) every example's log-likelihood, scored
    tokens and greedy flag as JSONL there too (:mod:`tw_jax.evaluate.probe_records`)."""
    import seqio

    distributed.initialize()
    model_dir = paths.resolve(model_dir)
    name = task_data.task_name(mixture_or_task_name, model_config)
    ensure_tasks(name, model_config, model_dir=model_dir, initial_checkpoint=checkpoint_path)
    check_lengths(name, task_feature_lengths)
    run = build_run_model(model_config, mesh_shape)
    for task in seqio.get_subtasks(seqio.get_mixture_or_task(name)):
        task_data.check_task_features(task.name, run.model)
    with activate(run.mesh):
        params, step = load_params(run, model_dir, checkpoint_path)
    fns = SeqioModel.from_loaded(
        LoadedRun(run, params, step), batch_size=batch_size, beam_size=beam_size,
        max_new_tokens=int(max_new_tokens or task_feature_lengths["targets"]),
        vocabulary=task_data.vocabulary(name), qa_protocol=qa_protocol)
    out_dir = paths.join(model_dir, INFERENCE_EVAL)
    writer = jax.process_index() == 0
    with named_read_errors(name, split):  # a damaged record: one line naming its file
        evaluator = seqio.Evaluator(
            name, fns.feature_converter, eval_split=split,
            sequence_length=dict(task_feature_lengths), num_examples=max_examples,
            logger_cls=(JSONLogger, TensorBoardLogger) if writer else (),
            log_dir=out_dir if writer else None, async_compute_metrics=False,
        )
        if not evaluator.eval_tasks:
            raise UsageError(f"{name} has no task with a {split!r} split and metrics to "
                             "evaluate (--gin.tw_jax.evaluate.evaluate.split=... picks another "
                             "split)")
        empty = sorted(task for task, dataset in evaluator.cached_task_datasets.items()
                       if next(iter(dataset.take(1)), None) is None)
        if empty:  # seqio would fail deep inside ("not enough values to unpack")
            raise UsageError(f"{', '.join(empty)}: no examples in the {split!r} split, so "
                             f"nothing to evaluate; evaluate {name}'s other tasks by name, or "
                             "another split (--gin.tw_jax.evaluate.evaluate.split=...)")
        future, _ = evaluator.evaluate(compute_metrics=True, step=step, score_fn=fns.score_fn,
                                       predict_fn=fns.predict_fn)
        found = {task: metric_values(values) for task, values in future.result().items()}
        if per_probe_path is not None and writer:
            from tw_jax.evaluate.probe_records import write_per_probe

            write_per_probe(paths.resolve(per_probe_path), evaluator, fns)
        evaluator.close()
    summary = {"step": step, "split": split, "tasks": found}
    if writer:
        label = step if step is not None else "init"
        write_json(paths.join(out_dir, f"{name}.{split}.step{label}.json"), summary)
    return summary


@gin.configurable(module="tw_jax.evaluate")
def infer(
    *,
    model_config: Any,
    mixture_or_task_name: str,
    task_feature_lengths: Mapping[str, int],
    batch_size: int,
    model_dir: PathLike,
    output_path: PathLike | None = None,
    checkpoint_path: str | None = None,
    split: str = "validation",
    max_new_tokens: int | None = None,
    max_examples: int | None = None,
    mesh_shape: Sequence[int] = (-1, 1, 1),
) -> str:
    """Greedy predictions for the task's ``inputs``, as JSONL (default MODEL_DIR/infer/...);
    a task without inputs is refused (:func:`check_prompts`)."""

    distributed.initialize()
    model_dir = paths.resolve(model_dir)
    mixture_or_task_name = task_data.task_name(mixture_or_task_name, model_config)
    ensure_tasks(mixture_or_task_name, model_config, model_dir=model_dir,
                 initial_checkpoint=checkpoint_path)
    check_prompts(mixture_or_task_name)
    check_lengths(mixture_or_task_name, task_feature_lengths)
    run = build_run_model(model_config, mesh_shape)
    vocab = task_data.vocabulary(mixture_or_task_name)
    new_tokens = int(max_new_tokens or task_feature_lengths["targets"])
    prompt_length = int(task_feature_lengths.get("inputs", 1))
    dataset = task_data.task_dataset(
        mixture_or_task_name, task_feature_lengths, split=split, shuffle=False, num_epochs=1
    )
    if max_examples is not None:
        dataset = dataset.take(max_examples)
    with named_read_errors(mixture_or_task_name, split):
        examples = list(dataset.as_numpy_iterator())
    output = paths.resolve(
        output_path or paths.join(model_dir, "infer", f"{mixture_or_task_name}.{split}.jsonl")
    )
    lines = []
    with activate(run.mesh):
        params, _ = load_params(run, model_dir, checkpoint_path)
        starts = progress(range(0, len(examples), batch_size), unit="batches",
                          desc=f"decoding {mixture_or_task_name}", leave=False)
        for start in starts:
            chunk = examples[start : start + batch_size]
            prompts = [np.asarray(e.get("inputs", np.zeros([0], np.int32))) for e in chunk]
            ids, mask = run.model.prompt_rows(prompts, batch_size, prompt_length)
            tokens = run.model.decode(
                params, ids, mask, max_new_tokens=new_tokens, eos_id=vocab.eos_id, pad_id=0,
            )
            for offset, (example, row) in enumerate(zip(chunk, np.asarray(tokens), strict=False)):
                record = {
                    "index": start + offset,
                    "inputs": _text(vocab, example.get("inputs")),
                    "targets": _text(vocab, example.get("targets")),
                    "prediction": vocab.decode(until_eos(row, vocab.eos_id)),
                }
                lines.append(json_line(record))
    if jax.process_index() == 0:
        with atomic_open(output, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
    return output


def _text(vocab: Any, tokens: np.ndarray | None) -> str | None:
    """The text of a feature up to its EOS; a leading EOS (GPT-2's BOS) is not its end."""
    if tokens is None:
        return None
    tokens = np.asarray(tokens)
    if len(tokens) and vocab.eos_id is not None and tokens[0] == vocab.eos_id:
        tokens = tokens[1:]
    return vocab.decode(until_eos(tokens, vocab.eos_id))
