"""``tw-jax eval`` and ``tw-jax infer``: a trained checkpoint on a task, in the trainer's gin style.

- :func:`evaluate` scores every example of a split with teacher forcing (no dropout). The scored
  tokens are the targets' loss tokens, narrowed to those an example's ``targets_weights`` marks
  when its task gives them (the probe tasks: their perplexity's tokens, see
  :mod:`tw_jax.tasks.probes`). Reported (``docs/metrics.md``): ``perplexity``, the mean over
  examples of each example's perplexity (TemporalWiki's per-instance probe perplexity, the
  lifelong report's ``ppl``), ``token_perplexity`` = ``exp(loss)``, the token-level one,
  ``loss`` (mean NLL per scored token) and ``accuracy`` (argmax = target, per scored token);
  both perplexities come from :func:`tw_jax.tasks.metrics.perplexity`. Under ``task_metrics``:
  the task's own score metrics (``seqio.Task.score_metric_fns``), which get each example's
  summed log-likelihood as its score and its scored-token count as its target.
  Results go to ``MODEL_DIR/eval/<task>.<split>.step<N>.json``.
- :func:`infer` decodes greedily (:func:`tw_jax.models.decoding.greedy_decode`, variants
  included) and writes one JSON object per example: index, inputs, targets and prediction text.

The parameters are those of the latest checkpoint in MODEL_DIR, or of ``checkpoint_path`` (a
step folder, a MODEL_DIR or a Hugging Face folder), restored onto this run's mesh whatever mesh
or host count trained them. Paths may be relative or gs:// URLs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import gin
import jax
import numpy as np

from tw_jax.errors import UsageError
from tw_jax.evaluate.runs import load_params
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, write_json
from tw_jax.io.paths import PathLike
from tw_jax.io.progress import progress
from tw_jax.models.sharding import activate, global_batch, replicated
from tw_jax.tasks.metrics import TARGETS_WEIGHTS, mean_token_loss, perplexity
from tw_jax.train import data, distributed
from tw_jax.train.state import build_run_model
from tw_jax.train.steps import make_score_step
from tw_jax.train.trainer import ensure_tasks


def _padded_batches(
    stream: Iterator[Mapping[str, np.ndarray]], batch_size: int
) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """Batches padded with all-zero rows to ``batch_size``; yields (batch, real rows)."""
    for batch in stream:
        rows = len(next(iter(batch.values())))
        if rows < batch_size:
            batch = {
                k: np.concatenate([v, np.zeros((batch_size - rows, *v.shape[1:]), v.dtype)])
                for k, v in batch.items()
            }
        yield batch, rows


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


def _weights_as_targets(example: Mapping[str, Any]) -> dict[str, Any]:
    import tensorflow as tf

    out = dict(example)
    out["targets"] = tf.cast(example[TARGETS_WEIGHTS], tf.int32)
    if "inputs" in example:
        out["inputs"] = tf.zeros_like(example["inputs"])
    return out


def _scored_only(features: Mapping[str, Any], weights: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(features)
    out["decoder_loss_weights"] = (features["decoder_loss_weights"]
                                   * weights["decoder_target_tokens"])
    return out


def eval_batches(
    name: str, lengths: Mapping[str, int], batch_size: int, model: Any, split: str
) -> Iterator[dict[str, np.ndarray]]:
    """One pass over ``split`` in order: the model's features, batched (the last batch short),
    with ``decoder_loss_weights`` kept only on the target tokens that ``targets_weights`` marks
    when the task gives them.

    The weights travel through the model's own feature converter in place of the targets (and
    zeros in place of a prompt), so ``decoder_target_tokens`` of that second stream is each
    position's weight, wherever the model's layout puts the target tokens.
    """
    import tensorflow as tf

    data.check_task_features(name, model)  # as data.batches: one-line errors, not tf.data's
    data.check_examples(name, lengths, 1, split=split)
    examples = data.task_dataset(name, lengths, split=split, shuffle=False, num_epochs=1)
    features = model.convert_features(examples, lengths)
    if TARGETS_WEIGHTS in examples.element_spec:
        weights = model.convert_features(examples.map(_weights_as_targets), lengths)
        features = tf.data.Dataset.zip((features, weights)).map(_scored_only)
    yield from features.batch(batch_size, drop_remainder=False).prefetch(2).as_numpy_iterator()


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
    max_batches: int | None = None,
    mesh_shape: Sequence[int] = (-1, 1, 1),
) -> dict[str, Any]:
    """Metrics of the checkpoint on ``split`` of the task; also written under MODEL_DIR/eval."""

    distributed.initialize()
    model_dir = paths.resolve(model_dir)
    mixture_or_task_name = data.task_name(mixture_or_task_name, model_config)
    ensure_tasks(mixture_or_task_name)
    check_lengths(mixture_or_task_name, task_feature_lengths)
    run = build_run_model(model_config, mesh_shape)
    with activate(run.mesh):
        params, step = load_params(run, model_dir, checkpoint_path)
        score = jax.jit(make_score_step(run.model), out_shardings=replicated(run.mesh))
        stream = eval_batches(mixture_or_task_name, task_feature_lengths, batch_size, run.model,
                              split)
        scores, counts, correct = [], [], []
        batches = progress(_padded_batches(stream, batch_size), unit="batches",
                           desc=f"evaluating {mixture_or_task_name}", leave=False)
        for index, (batch, rows) in enumerate(batches):
            if max_batches is not None and index >= max_batches:
                break
            placed = global_batch(batch, run.mesh)
            out = jax.device_get(score(params, placed))
            scores.extend(out["log_likelihood"][:rows].tolist())
            counts.extend(out["tokens"][:rows].tolist())
            correct.extend(out["correct"][:rows].tolist())
    total = float(sum(counts))
    if not total:
        raise ValueError(f"{mixture_or_task_name}/{split}: no tokens to evaluate")
    scored = [(s, int(n)) for s, n in zip(scores, counts, strict=True) if n > 0]
    both = perplexity([n for _, n in scored], [s for s, _ in scored])
    loss = mean_token_loss(scores, counts)
    metrics: dict[str, Any] = {
        "step": step,
        "examples": len(scores),
        "unscored_examples": len(scores) - len(scored),
        "tokens": total,
        "perplexity": both["perplexity"],
        "token_perplexity": math.exp(loss),
        "loss": loss,
        "accuracy": float(sum(correct)) / total,
    }
    metrics["task_metrics"] = _task_score_metrics(mixture_or_task_name, scores, counts)
    name = f"{mixture_or_task_name}.{split}.step{step if step is not None else 'init'}.json"
    if jax.process_index() == 0:
        write_json(paths.join(model_dir, "eval", name), metrics)
    return metrics


def _task_score_metrics(name: str, scores: list[float], counts: list[float]) -> dict[str, Any]:
    import seqio

    if name not in seqio.TaskRegistry.names():
        return {}
    task = seqio.get_mixture_or_task(name)
    kept = [(s, int(n)) for s, n in zip(scores, counts, strict=True) if n > 0]
    found: dict[str, Any] = {}
    for metric_fn in task.score_metric_fns:
        values = metric_fn([n for _, n in kept], [s for s, _ in kept])
        found.update({k: float(getattr(v, "value", v)) for k, v in values.items()})
    return found


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
    """Greedy predictions for the task's ``inputs``, as JSONL (default MODEL_DIR/infer/...)."""

    distributed.initialize()
    model_dir = paths.resolve(model_dir)
    mixture_or_task_name = data.task_name(mixture_or_task_name, model_config)
    ensure_tasks(mixture_or_task_name)
    check_lengths(mixture_or_task_name, task_feature_lengths)
    run = build_run_model(model_config, mesh_shape)
    vocab = data.vocabulary(mixture_or_task_name)
    new_tokens = int(max_new_tokens or task_feature_lengths["targets"])
    prompt_length = int(task_feature_lengths.get("inputs", 1))
    dataset = data.task_dataset(
        mixture_or_task_name, task_feature_lengths, split=split, shuffle=False, num_epochs=1
    )
    if max_examples is not None:
        dataset = dataset.take(max_examples)
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
                    "prediction": vocab.decode(_until_eos(row, vocab.eos_id)),
                }
                lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    if jax.process_index() == 0:
        with atomic_open(output, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
    return output


def _until_eos(row: np.ndarray, eos: int | None) -> list[int]:
    tokens = [int(t) for t in row]
    if eos is not None and eos in tokens:
        tokens = tokens[: tokens.index(eos)]
    return tokens


def _text(vocab: Any, tokens: np.ndarray | None) -> str | None:
    """The text of a feature up to its EOS; a leading EOS (GPT-2's BOS) is not its end."""
    if tokens is None:
        return None
    tokens = np.asarray(tokens)
    if len(tokens) and vocab.eos_id is not None and tokens[0] == vocab.eos_id:
        tokens = tokens[1:]
    return vocab.decode(_until_eos(tokens, vocab.eos_id))
