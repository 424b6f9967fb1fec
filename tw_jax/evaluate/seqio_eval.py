"""tw_jax models behind seqio's evaluation contract: a feature converter, ``score_fn`` and
``predict_fn`` that ``seqio.Evaluator`` calls, for any seqio task and any tw_jax run.

``seqio.Evaluator(task_or_mixture, feature_converter, ...)`` caches a task's examples as
*model* features and hands them, enumerated, to the model functions; the task's own metric
functions then score what they return. So tw_jax's tasks run with any model that gives these
functions, and a tw_jax model runs on any seqio task:

    import seqio, tw_jax.tasks
    from tw_jax.evaluate.seqio_eval import seqio_model
    fns = seqio_model("runs/diff/0809", gin_files=["diff.gin", "models/gpt2_tiny.gin"])
    evaluator = seqio.Evaluator("twiki_probes_0809", fns.feature_converter,
                                async_compute_metrics=False)
    metrics, _ = evaluator.evaluate(compute_metrics=True, score_fn=fns.score_fn,
                                    predict_fn=fns.predict_fn)
    print({task: m["perplexity"] for task, m in metrics.result().items()})

Scores are ``(log-likelihood, scored tokens)`` per example: the tokens the model itself scored
(a GPT-2 block's first token has no context and is not scored), which
:func:`tw_jax.tasks.metrics.perplexity` prefers over the count a postprocessor can infer from
the target alone. A task's ``targets_weights`` (the probe tasks' object or text tokens) limit
the scored tokens exactly as ``tw-jax eval`` and the lifelong report score them.

Answers follow the model's QA protocol (:mod:`tw_jax.evaluate.qa`): GPT-2's is TemporalWiki's
teacher-forced one (pass the task's vocabulary), T5's free decoding; they are returned padded with
EOS to one width, as T5X's ``predict_batch`` returns them.

The examples reach the model as :mod:`tw_jax.evaluate.eval_batches` batches them: each task's
rows sorted by length, so a batch runs at a bucketed length of its own rows (seqio pads every
example to the longest of the evaluation), and a row that two tasks of an evaluator share (a
probe mixture's CHANGED task) computed once per checkpoint. The probe mixtures' evaluators keep
those numpy batches, read from tf.data on the first checkpoint, for every later one; the
compiled steps are kept per model class and config, so every checkpoint of a run reuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import seqio
import tensorflow as tf
from jax.sharding import Mesh

from tw_jax.evaluate.eval_batches import Batch, RowTable, dataset_rows
from tw_jax.evaluate.qa import TEACHER_FORCED, resolve_protocol, until_first_period
from tw_jax.evaluate.runs import LoadedRun, ModelSource, load_params, source_config
from tw_jax.io.progress import progress
from tw_jax.models import model_for
from tw_jax.models.sharding import activate, global_batch, make_mesh, replicated
from tw_jax.models.token_scores import bucket_length
from tw_jax.runtime import checkpoints
from tw_jax.runtime.run_model import build_run_model
from tw_jax.runtime.score_step import make_score_step
from tw_jax.tasks.metrics import TARGETS_WEIGHTS

# Beside the model's features: how many leading tokens of a decoder-only row are the prompt
# (``inputs``), where decoding starts. Scalar, so seqio's feature shapes ignore it.
PROMPT_LENGTH = "prompt_length"


def _weights_as_targets(example: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(example)
    out["targets"] = tf.cast(example[TARGETS_WEIGHTS], tf.int32)
    if "inputs" in example:
        out["inputs"] = tf.zeros_like(example["inputs"])
    return out


def scored_features(examples: tf.data.Dataset, model: Any, lengths: Mapping[str, int],
                    with_prompt_length: bool = False) -> tf.data.Dataset:
    """The model's features of ``examples`` with ``decoder_loss_weights`` kept only on the
    target tokens that ``targets_weights`` marks, when the task gives them.

    The weights travel through the model's own feature converter in place of the targets (and
    zeros in place of a prompt), so ``decoder_target_tokens`` of that second stream is each
    position's weight, wherever the model's layout puts the target tokens.
    """
    model = model_for(model)
    lengths = {k: int(v) for k, v in lengths.items() if k in ("inputs", "targets")}
    features = model.convert_features(examples, lengths)
    if TARGETS_WEIGHTS in examples.element_spec:
        weights = model.convert_features(examples.map(_weights_as_targets), lengths)

        def scored_only(f: Mapping[str, Any], w: Mapping[str, Any]) -> dict[str, Any]:
            out = dict(f)
            out["decoder_loss_weights"] = f["decoder_loss_weights"] * w["decoder_target_tokens"]
            return out

        features = tf.data.Dataset.zip((features, weights)).map(scored_only)
    if with_prompt_length:
        limit = lengths.get("inputs", 0)

        def prompt(ex: Mapping[str, Any]) -> tf.Tensor:
            if "inputs" not in ex or not limit:
                return tf.constant(0, tf.int32)
            return tf.minimum(tf.size(ex["inputs"]), limit)

        features = tf.data.Dataset.zip((features, examples.map(prompt))).map(
            lambda f, n: {**f, PROMPT_LENGTH: n})
    return features


class ModelFeatureConverter(seqio.FeatureConverter):
    """A tw_jax model's features as a seqio feature converter (for ``seqio.Evaluator``).

    The model family's own converter (:mod:`tw_jax.models.features`) with the task's scored
    tokens and the prompt length kept; seqio validates the task features it reads, the model
    features are the family's.
    """

    TASK_FEATURES = {
        "inputs": seqio.FeatureConverter.FeatureSpec(dtype=tf.int32),
        "targets": seqio.FeatureConverter.FeatureSpec(dtype=tf.int32),
    }
    MODEL_FEATURES: dict[str, Any] = {}
    PACKING_FEATURE_DTYPES: dict[str, Any] = {}

    def __init__(self, model: Any) -> None:
        super().__init__(pack=False)
        self.model = model_for(model)

    def __call__(self, ds: tf.data.Dataset, task_feature_lengths: Mapping[str, int]
                 ) -> tf.data.Dataset:
        # As seqio's DecoderFeatureConverter, the call is delegated: the family's converter
        # defines the model features (GPT-2 keeps a prompt in ``inputs`` only when given one).
        return scored_features(ds, self.model, task_feature_lengths, with_prompt_length=True)

    def _convert_features(self, ds: tf.data.Dataset, task_feature_lengths: Mapping[str, int]
                          ) -> tf.data.Dataset:
        return self(ds, task_feature_lengths)

    def get_model_feature_lengths(self, task_feature_lengths: Mapping[str, int]
                                  ) -> Mapping[str, int]:
        return self.model.feature_lengths(task_feature_lengths)


def pad_rows(batch: Mapping[str, np.ndarray], batch_size: int) -> dict[str, np.ndarray]:
    """``batch`` with all-zero rows appended up to ``batch_size`` (one static shape per run)."""
    rows = len(next(iter(batch.values())))
    if rows >= batch_size:
        return dict(batch)
    return {k: np.concatenate([v, np.zeros((batch_size - rows, *v.shape[1:]), v.dtype)])
            for k, v in batch.items()}


# feature group -> the mask that marks its real positions (right-padded)
_GROUP_MASKS = {"decoder_": "decoder_mask", "encoder_": "encoder_mask"}


def trim_padding(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``batch`` with each feature group's right padding cut to a bucketed length
    (:func:`~tw_jax.models.token_scores.bucket_length`) of its longest real row: seqio pads
    every example of an evaluation to the longest of all its tasks, and the positions past a
    row's mask change none of its scores, so short batches run short (a few compilations, one
    per bucket)."""
    out = dict(batch)
    for prefix, mask_key in _GROUP_MASKS.items():
        if mask_key not in batch or np.ndim(batch[mask_key]) != 2:
            continue
        used = np.flatnonzero(np.asarray(batch[mask_key]).any(axis=0))
        width = batch[mask_key].shape[1]
        length = min(bucket_length(int(used[-1]) + 1 if used.size else 1), width)
        for key, value in batch.items():
            if key.startswith(prefix) and np.ndim(value) == 2 and value.shape[1] == width:
                out[key] = value[:, :length]
    return out


# Prompts up to this many tokens decode at a multiple of PROMPT_STEP, longer ones at a bucketed
# length (bucket_length): a few compilations, and a short prompt never runs at twice its length.
SHORT_PROMPT, PROMPT_STEP = 32, 4


def prompt_length(longest: int) -> int:
    """The padded length of a batch of prompts whose longest has ``longest`` tokens."""
    if longest <= SHORT_PROMPT:
        return max(-(-longest // PROMPT_STEP) * PROMPT_STEP, PROMPT_STEP)
    return bucket_length(longest)


def _shape(batch_size: int) -> Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]:
    """A table batch's rows padded to ``batch_size`` (one static shape per run) and trimmed."""
    return lambda rows: trim_padding(pad_rows(rows, batch_size))


@dataclass
class _Outputs:
    """One checkpoint's outputs of one model function over a row table (``values`` per table
    row; ``done``: the owners computed), valid for ``params`` and ``depends`` only."""

    table: RowTable
    params: Any
    depends: Any
    values: list[Any]
    done: set[int] = field(default_factory=set)


def _model_key(model: Any) -> Any:
    """What a model's compiled steps depend on: its class and config (a new model object per
    checkpoint of the same run reuses the first one's compilation)."""
    try:
        return (type(model), hash(model.config), model.config)
    except TypeError:  # an unhashable config: the object itself
        return (type(model), id(model), None)


_STEPS: dict[tuple[Any, ...], Callable[..., Any]] = {}


def _cached_step(kind: str, model: Any, mesh: Mesh,
                 make: Callable[[Any], Callable[..., Any]]) -> Callable[..., Any]:
    key = (kind, _model_key(model), mesh)
    if key not in _STEPS:
        if len(_STEPS) >= 32:
            _STEPS.clear()
        with activate(mesh):
            _STEPS[key] = jax.jit(make(model), out_shardings=replicated(mesh))
    return _STEPS[key]


def _score_step(model: Any, mesh: Mesh) -> Callable[..., Any]:
    """One jitted scorer per (model class and config, mesh)."""
    # nothing here reads the correct tokens
    return _cached_step("score", model, mesh, partial(make_score_step, correct=False))


def _argmax_step(model: Any, mesh: Mesh) -> Callable[..., Any]:
    def make(model: Any) -> Callable[..., Any]:
        def argmax(params: Any, batch: Mapping[str, jax.Array]) -> jax.Array:
            logits = model.logits(params, batch, deterministic=True, rng=None)
            return jnp.argmax(logits, axis=-1)

        return argmax

    return _cached_step("argmax", model, mesh, make)


def one_device_mesh() -> Mesh:
    """The mesh of parameters that were never placed on one: the first device alone."""
    return make_mesh((1, 1, 1), devices=jax.devices()[:1])


@dataclass
class SeqioModel:
    """What ``seqio.Evaluator`` needs from a model: its feature converter, ``score_fn`` and
    ``predict_fn`` (signatures of :class:`seqio.evaluation.ScoreFnCallable` and
    ``PredictFnCallable``).

    ``model`` is a model object (or its config or Flax module), ``params`` its parameters on
    ``mesh`` (None: one device). Answers follow ``qa_protocol``
    (:data:`tw_jax.evaluate.qa.PROTOCOLS`; None: the model's default, teacher-forced for a
    decoder-only model as TemporalWiki's reference scores GPT-2, free decoding otherwise).
    Teacher-forced answers need the ``vocabulary``: the answer is cut after its first "." as
    text, and handed back to seqio as the tokens of that text.
    """

    model: Any
    params: Any
    mesh: Mesh | None = None
    vocabulary: Any = None
    qa_protocol: str | None = None
    batch_size: int = 32
    max_new_tokens: int = 32
    beam_size: int = 1
    step: int | None = None  # the checkpoint's, for ``Evaluator.evaluate(step=...)``'s logs
    # examples done, per batch (a caller's progress bar); None: a bar per call
    on_examples: Callable[[int], Any] | None = None
    # (model function, batch size, table) -> this checkpoint's outputs on that table's rows
    _memo: dict[tuple[Any, ...], _Outputs] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.model = model_for(self.model)
        self.mesh = self.mesh if self.mesh is not None else one_device_mesh()
        self.qa_protocol = resolve_protocol(self.model, self.qa_protocol)
        self.feature_converter = ModelFeatureConverter(self.model)

    @classmethod
    def from_loaded(cls, loaded: LoadedRun, **options: Any) -> SeqioModel:
        """The model functions of a loaded run (its model, mesh, parameters and step)."""
        return cls(loaded.model, loaded.params, loaded.run.mesh, step=loaded.step, **options)

    def _model_rows(self, batch: Mapping[str, np.ndarray]) -> dict[str, jax.Array]:
        rows = {k: v for k, v in batch.items() if k != PROMPT_LENGTH}
        return global_batch(rows, self.mesh)

    def _outputs(self, kind: Any, dataset: tf.data.Dataset, desc: str,
                 compute: Callable[[Batch], Sequence[Any]], depends: Any = None
                 ) -> list[tuple[int, Any]]:
        """``[(index, output)]`` of every example of ``dataset``: ``compute`` gives a batch's
        outputs, one per real row, and runs once per distinct row of the dataset's
        :class:`~tw_jax.evaluate.eval_batches.RowTable` for this checkpoint (``kind`` names
        the model function and its settings, ``depends`` an object they read); progress counts
        this dataset's examples."""
        found = dataset_rows(dataset)
        table, total = found.table, len(found.indices)
        key = (kind, self.batch_size, id(table))
        memo = self._memo.get(key)
        if (memo is None or memo.table is not table or memo.params is not self.params
                or memo.depends is not depends):
            memo = self._memo[key] = _Outputs(table, self.params, depends,
                                              [None] * len(table.owner))
        bar = None
        report = self.on_examples
        if report is None:
            bar = progress(total=total, desc=desc, unit="examples", leave=False)
            report = bar.update
        done = 0
        with activate(self.mesh):
            for owner in sorted(set(table.owner[found.rows].tolist()) - memo.done):
                for batch in table.batches(owner, self.batch_size, _shape(self.batch_size)):
                    for row, value in zip(batch.rows.tolist(), compute(batch), strict=True):
                        memo.values[row] = value
                    step = min(len(batch.rows), total - done)
                    if step:
                        report(step)
                        done += step
                memo.done.add(owner)
        if total > done:
            report(total - done)
        if bar is not None:
            bar.close()
        values = memo.values
        return [(index, values[row])
                for index, row in zip(found.indices.tolist(), found.rows.tolist(), strict=True)]

    def score_fn(self, dataset: tf.data.Dataset,
                 model_feature_shapes: Mapping[str, int] | None = None
                 ) -> list[tuple[int, np.ndarray]]:
        """``[(index, [log-likelihood, scored tokens])]`` for every example of ``dataset``."""
        del model_feature_shapes
        score = _score_step(self.model, self.mesh)

        def compute(batch: Batch) -> Sequence[np.ndarray]:
            scored = jax.device_get(score(self.params, self._model_rows(batch.features)))
            pairs = np.stack([np.asarray(scored["log_likelihood"], np.float64),
                              np.asarray(scored["tokens"], np.float64)], axis=1)
            return list(pairs[: len(batch.rows)])

        return self._outputs("score", dataset, "scoring", compute)

    def _prompts(self, batch: Mapping[str, np.ndarray], rows: int) -> list[np.ndarray]:
        if "encoder_input_tokens" in batch:
            return [batch["encoder_input_tokens"][i][: int(batch["encoder_mask"][i].sum())]
                    for i in range(rows)]
        return [batch["decoder_input_tokens"][i][: int(batch[PROMPT_LENGTH][i])]
                for i in range(rows)]

    def predict_fn(self, dataset: tf.data.Dataset,
                   model_feature_shapes: Mapping[str, int] | None = None
                   ) -> list[tuple[int, list[int]]]:
        """``[(index, answer token ids)]`` under the QA protocol: free decoding (greedy or beam,
        up to EOS) from each example's prompt (T5: the encoder input; GPT-2: ``inputs``), or
        the teacher-forced answer at the scored target tokens."""
        del model_feature_shapes
        if self.qa_protocol == TEACHER_FORCED:
            return self._teacher_forced(dataset)
        model = self.model
        eos = model.eos_id

        def compute(batch: Batch) -> Sequence[list[int]]:
            rows = len(batch.rows)
            prompts = self._prompts(batch.features, rows)
            if any(len(p) == 0 for p in prompts):
                raise ValueError("an example without a prompt (inputs) cannot be decoded")
            ids, mask = model.prompt_rows(prompts, self.batch_size,
                                          prompt_length(max(len(p) for p in prompts)))
            tokens = np.asarray(model.decode(
                self.params, ids, mask, max_new_tokens=self.max_new_tokens,
                eos_id=eos, beam_size=self.beam_size, pad_id=0))
            return [until_eos(tokens[i], eos) for i in range(rows)]

        kind = ("free", self.max_new_tokens, self.beam_size)
        return fixed_width(self._outputs(kind, dataset, "decoding", compute), eos)

    def _teacher_forced(self, dataset: tf.data.Dataset) -> list[tuple[int, list[int]]]:
        """The reference's GPT-2 answers (:mod:`tw_jax.evaluate.qa`'s ``"teacher_forced"``): the
        argmax at every position that predicts a scored target token, EOS dropped,
        detokenised and cut after the first "."; returned as the tokens of that text with line
        breaks as spaces (the task's postprocessor keeps a GPT-2 answer's first line; SQuAD
        normalisation reads both as one space), so the task's EM/F1 are the reference's."""
        vocabulary = self.vocabulary
        if vocabulary is None:
            raise ValueError("teacher-forced answers need the vocabulary: pass vocabulary= "
                             "(or qa_protocol='free')")
        argmax = _argmax_step(self.model, self.mesh)
        eos = vocabulary.eos_id

        def compute(batch: Batch) -> Sequence[list[int]]:
            best = np.asarray(jax.device_get(argmax(self.params,
                                                    self._model_rows(batch.features))))
            scored = batch.features["decoder_loss_weights"] > 0
            out = []
            for i in range(len(batch.rows)):
                predicted = [int(t) for t in best[i][scored[i]] if int(t) != eos]
                text = until_first_period(vocabulary.decode(predicted).strip())
                out.append([int(t) for t in vocabulary.encode(text.replace("\n", " "))])
            return out

        return fixed_width(self._outputs(TEACHER_FORCED, dataset, "answering", compute,
                                         vocabulary), eos)


def fixed_width(rows: Sequence[tuple[int, list[int]]], eos: int
                ) -> list[tuple[int, list[int]]]:
    """Answers padded with EOS to one width, as T5X's ``predict_batch`` returns them: seqio
    stacks every example's tokens into one array, and its vocabularies decode up to the first
    EOS, so the padding never reaches an answer's text."""
    width = max((len(tokens) for _, tokens in rows), default=0) + 1
    return [(index, [*tokens] + [eos] * (width - len(tokens))) for index, tokens in rows]


def until_eos(row: Sequence[int], eos: int | None) -> list[int]:
    """A decoded row's tokens before its first EOS."""
    tokens = [int(t) for t in row]
    return tokens[: tokens.index(eos)] if eos is not None and eos in tokens else tokens


def seqio_model(
    run: str,
    gin_files: Sequence[str] = (),
    *,
    gin_bindings: Sequence[str] = (),
    step: int | None = None,
    batch_size: int = 32,
    max_new_tokens: int = 32,
    beam_size: int = 1,
    vocabulary: Any = None,
    qa_protocol: str | None = None,
    mesh_shape: Sequence[int] | None = None,
) -> SeqioModel:
    """A run as seqio model functions: ``run`` is a MODEL_DIR (or step folder) with the gin
    files that built its model, or a Hugging Face folder (no gin files); local or ``gs://``.
    ``vocabulary`` (a task's, e.g. ``seqio.get_mixture_or_task(name).output_features[
    "targets"].vocabulary``) is needed for GPT-2's teacher-forced EM/F1 only."""
    hf = not gin_files and checkpoints.is_hf_folder(run)
    source = ModelSource(hf_dir=run if hf else None, model_dir=None if hf else run,
                         gin_files=list(gin_files), gin_bindings=list(gin_bindings), step=step)
    config, gin_mesh = source_config(source)
    built = build_run_model(config, tuple(mesh_shape or gin_mesh or (-1, 1, 1)))
    with activate(built.mesh):
        params, found_step = load_params(built, run, step=step)
    return SeqioModel.from_loaded(LoadedRun(built, params, found_step), batch_size=batch_size,
                                  max_new_tokens=max_new_tokens, beam_size=beam_size,
                                  vocabulary=vocabulary, qa_protocol=qa_protocol)
