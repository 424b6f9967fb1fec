"""A period's probe metric groups through the probe tasks' evaluation mixtures, as seqio users
evaluate: ``seqio.Evaluator`` on ``twiki_probes_<P><form>`` (:mod:`tw_jax.tasks.probes`) with
tw_jax's model functions (:mod:`tw_jax.evaluate.seqio_eval`). The numbers are the tasks' own
metric functions (:func:`tw_jax.tasks.metrics.perplexity`, :func:`~tw_jax.tasks.metrics.squad`),
so the lifelong runner, its report and ``tw-jax eval`` share one code path.

Which mixture gives a metric group, by the model's training objective:

==============  =====================  =====================  ======================
group           ``lm`` (GPT-2)         ``lm_<name>``          ``ssm`` (T5)
==============  =====================  =====================  ======================
``ppl``         ``twiki_probes_<P>``   ``…_lm_<name>``        ``…_ssm``
``ppl_object``  ``…_object``           ``…_lm_<name>_object`` ``…_ssm``
``ppl_cloze``   ``…_cloze``            ``…_lm_<name>_cloze``  ``…_ssm_cloze``
``qa``          ``…_object``           ``…_lm_<name>_object`` ``…_ssm``
==============  =====================  =====================  ======================

(``lm_<name>``: a causal LM in a model folder's own tokenizer, :mod:`tw_jax.tasks.names`.)

``<P>`` is the period's token (:mod:`tw_jax.tasks.names`: ``0809``, ``202412_202501``).

Each task of a mixture is a category (``changed`` is its own task: UPDATED then NEW), so its
metrics are that category's. ``max_probes`` is seqio's ``num_examples``: the first N examples of
every task (CHANGED: the first N of UPDATED then NEW). Open-book probes (``source``, a retriever
name) are the mixtures ``twiki_probes_<P>_<source><form>``: the same rows with retrieved
passages read first.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import seqio
import tensorflow as tf

from tw_jax.evaluate import eval_batches
from tw_jax.evaluate.groups import PPL_VARIANTS
from tw_jax.evaluate.seqio_eval import ModelFeatureConverter, SeqioModel
from tw_jax.evaluate.task_metrics import compute_metrics, task_examples
from tw_jax.io import paths
from tw_jax.models import model_for
from tw_jax.tasks import names
from tw_jax.time import Period

Values = dict[tuple[str, str], float]
# (category, metric) -> an (examples, 2) array: each example's [log-likelihood, scored tokens]
Scores = dict[tuple[str, str], np.ndarray]

# metric group -> the probe variant whose format's metrics give it (the format's task-name
# suffix per objective: tw_jax.tasks.names.probe_suffix)
PROBE_VARIANTS: dict[str, str] = {"ppl": "text", "ppl_object": "object", "ppl_cloze": "cloze",
                                  "qa": "object"}
QA = "qa"


def probe_forms(model: Any, groups: Sequence[str]) -> dict[str, list[str]]:
    """``{format suffix: [groups it gives]}`` for the probe groups among ``groups``."""
    objective = model_for(model).objective
    found: dict[str, list[str]] = {}
    for group in groups:
        if group in PROBE_VARIANTS:
            suffix = names.probe_suffix(objective, PROBE_VARIANTS[group])
            found.setdefault(suffix, []).append(group)
    return found


# id of an evaluator's cached model dataset -> its examples (enumerated 0..n-1)
_EXAMPLES: dict[int, int] = {}


class MixtureEvaluators:
    """One ``seqio.Evaluator`` per (mixture, examples limit, model family, data), built when
    first asked for: an Evaluator tokenises and caches its tasks' examples once, and every later
    checkpoint evaluated on that mixture reuses them, as numpy batches of its distinct rows read
    on the first (:mod:`tw_jax.evaluate.eval_batches`, dropped with the evaluator). ``data`` is
    a fingerprint of the files the mixture reads (:func:`probe_fingerprint`), so rewritten
    probes are read anew."""

    def __init__(self, capacity: int = 16) -> None:
        self.capacity = capacity
        self._built: dict[tuple[Any, ...], seqio.Evaluator] = {}

    def get(self, mixture: str, model: Any, num_examples: int | None,
            data: str = "") -> seqio.Evaluator:
        model = model_for(model)
        key = (mixture, num_examples, type(model).__name__, model.max_length, data)
        if key not in self._built:
            while len(self._built) >= self.capacity:  # the oldest goes first
                old = self._built.pop(next(iter(self._built)))
                for dataset in old.cached_model_datasets.values():
                    _EXAMPLES.pop(id(dataset), None)
                eval_batches.unregister(old.cached_model_datasets.values())
            if mixture not in seqio.MixtureRegistry.names():
                raise ValueError(f"no mixture {mixture} is registered (register the data "
                                 "folder's tasks: tw_jax.tasks.register_all(DATA))")
            with _without_absl_warnings():  # "logger_cls is empty": results go elsewhere
                evaluator = seqio.Evaluator(mixture, ModelFeatureConverter(model),
                                            eval_split="validation", num_examples=num_examples,
                                            async_compute_metrics=False)
            _check_length(mixture, evaluator, model)
            _check_vocabulary(evaluator, model)
            self._built[key] = evaluator
            examples = task_examples(evaluator).examples
            for task, dataset in evaluator.cached_model_datasets.items():
                _EXAMPLES[id(dataset)] = len(examples[task])
                # an evaluator dropped with its MixtureEvaluators: its ids may be reused
                weakref.finalize(dataset, _EXAMPLES.pop, id(dataset), None)
            # read once, on the first checkpoint, and kept with the evaluator
            eval_batches.register([evaluator.cached_model_datasets[task.name]
                                   for task in evaluator.eval_tasks])
        return self._built[key]

    @staticmethod
    def examples(evaluator: seqio.Evaluator) -> int:
        """How many examples an evaluator's tasks hold together."""
        return sum(_EXAMPLES[id(ds)] for ds in evaluator.cached_model_datasets.values())


# Every run of this process shares them (the demo's and a sweep's methods read the same probes).
SHARED = MixtureEvaluators()


def probe_fingerprint(folder: str, names: Sequence[str]) -> str:
    """SHA-1 of the probe files ``names`` of ``folder`` that exist (local or ``gs://``), and of
    which exist: what a mixture over them reads."""
    digest = hashlib.sha1()
    for name in names:
        path = paths.join(folder, name)
        digest.update(f"{name}:".encode())
        if paths.isfile(path):
            digest.update(hashlib.sha1(paths.read_bytes(path)).digest())
    return digest.hexdigest()


@contextlib.contextmanager
def _without_absl_warnings() -> Iterator[None]:
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _check_length(mixture: str, evaluator: seqio.Evaluator, model: Any) -> None:
    """A probe longer than the model's positions would be scored on wrapped positions."""
    limit = model.max_length
    shapes = evaluator.model_feature_shapes
    longest = max((shape[0] for shape in shapes.values() if shape), default=0)
    if limit is not None and longest > limit:
        raise ValueError(f"{mixture}: its longest example has {longest} tokens, more than the "
                         f"model's {limit} positions (open book: fewer --context-words)")


def _check_vocabulary(evaluator: seqio.Evaluator, model: Any) -> None:
    """Token ids past the model's embedding table read nothing (JAX gives NaN, not an error):
    tasks registered with another model's vocabulary (``register_all``'s ``gpt2_vocab`` /
    ``t5_vocab``, their ``$TW_JAX_*_VOCAB`` or a gin binding left by an earlier run in the same
    process) would score every probe as NaN."""
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    if size is None:
        return
    for task in evaluator.eval_tasks:
        vocabulary = task.output_features["targets"].vocabulary
        if vocabulary.vocab_size > size:
            raise ValueError(
                f"{task.name}: its vocabulary ({vocabulary_name(vocabulary)}) has "
                f"{vocabulary.vocab_size} tokens, the model's embedding {size}: the tasks were "
                "registered with another model's vocabulary (tw_jax.tasks.register_all's "
                "gpt2_vocab/t5_vocab, $TW_JAX_GPT2_VOCAB/$TW_JAX_T5_VOCAB, or a gin binding)")


def vocabulary_name(vocabulary: Any) -> str:
    """The file a vocabulary reads (tw_jax's ``path``, seqio's SentencePiece model), else its
    class name."""
    for attribute in ("path", "sentencepiece_model_file"):
        value = getattr(vocabulary, attribute, None)
        if isinstance(value, str):
            return value
    return type(vocabulary).__name__


def _unasked(dataset: tf.data.Dataset) -> list[tuple[int, list[int]]]:
    """Empty answers for a mixture whose EM/F1 nobody asked for: seqio computes every metric of
    a task, and decoding only to drop its scores would cost more than the perplexity itself."""
    return [(index, []) for index in _indices(dataset)]


def _unscored(dataset: tf.data.Dataset) -> list[tuple[int, np.ndarray]]:
    """Log-likelihood 0 over 1 token for a mixture whose perplexity nobody asked for (EM/F1 of
    ``_object`` alone), dropped with the rest of what seqio computes unasked."""
    return [(index, np.asarray([0.0, 1.0])) for index in _indices(dataset)]


def _indices(dataset: tf.data.Dataset) -> list[int]:
    """The example indices of an evaluator's enumerated dataset: 0..n-1, as seqio numbers them."""
    if id(dataset) in _EXAMPLES:
        return list(range(_EXAMPLES[id(dataset)]))
    return [int(i) for batch in dataset.map(lambda index, _: index).batch(4096)
            .as_numpy_iterator() for i in batch]


@dataclass(frozen=True)
class FormRun:
    """One mixture to evaluate: its evaluator, the groups it gives, and its examples."""

    evaluator: seqio.Evaluator
    suffix: str
    groups: tuple[str, ...]
    examples: int

    @property
    def asks_qa(self) -> bool:
        return QA in self.groups

    @property
    def asks_perplexity(self) -> bool:
        return any(g in PPL_VARIANTS for g in self.groups)

    @property
    def output_types(self) -> tuple[seqio.metrics.ModelOutputType, ...]:
        """The model outputs whose metrics the groups read (the others are placeholders)."""
        kinds = seqio.metrics.ModelOutputType
        return ((kinds.SCORE,) * self.asks_perplexity) + ((kinds.PREDICTION,) * self.asks_qa)

    @property
    def calls(self) -> int:
        """Model calls: one per example and model function asked for (a progress bar's share)."""
        return self.examples * (int(self.asks_qa) + int(self.asks_perplexity))


def plan_forms(
    model: Any, period: Period, groups: Sequence[str], evaluators: MixtureEvaluators, *,
    max_probes: int | None = None, source: str | None = None, data: str = "",
) -> list[FormRun]:
    """The mixtures that give the probe groups among ``groups``, their evaluators built
    (``data``: the fingerprint of the files they read)."""
    plan = []
    for suffix, wanted in probe_forms(model, groups).items():
        evaluator = evaluators.get(names.probes(period, None, suffix, source), model,
                                   max_probes, data)
        plan.append(FormRun(evaluator, suffix, tuple(wanted), evaluators.examples(evaluator)))
    return plan


def run_forms(fns: SeqioModel, period: Period, plan: Sequence[FormRun],
              source: str | None = None) -> tuple[Values, Scores]:
    """``{(category, metric): value}`` of a plan: a ``ppl*`` group is its tasks'
    ``perplexity``, ``qa`` their ``em``/``f1`` (and ``em_previous``/``f1_previous`` where a
    category has previous objects); and ``{(category, ppl group): [log-likelihood, tokens] per
    example}``, the per-probe scores seqio's evaluator computed them from (in example order), so
    a report can test a difference probe by probe."""
    values: Values = {}
    scores: Scores = {}
    for form in plan:
        _, outputs = form.evaluator.evaluate(
            compute_metrics=False,
            score_fn=fns.score_fn if form.asks_perplexity else _unscored,
            predict_fn=fns.predict_fn if form.asks_qa else _unasked)
        for task, metrics in compute_metrics(form.evaluator, outputs, form.output_types).items():
            category = names.probe_category(task, period, form.suffix, source)
            values.update(_group_values(category, metrics, form.groups))
            if form.asks_perplexity:
                pairs = np.asarray(outputs[task][seqio.metrics.ModelOutputType.SCORE],
                                   np.float64).reshape(-1, 2)
                scores.update({(category, g): pairs for g in form.groups if g in PPL_VARIANTS})
    return values, scores


def _group_values(category: str, metrics: Mapping[str, Any], groups: Sequence[str]) -> Values:
    values: Values = {}
    for group in groups:
        if group in PPL_VARIANTS:
            values[(category, group)] = float(metrics["perplexity"])
        elif group == QA:
            values.update({(category, key): float(metrics[key])
                           for key in ("em", "f1", "em_previous", "f1_previous")
                           if key in metrics})
    return values
