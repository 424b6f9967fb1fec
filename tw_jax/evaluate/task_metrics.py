"""A seqio evaluator's task metrics from its model outputs, with each task's examples read once.

``seqio.Evaluator.evaluate(compute_metrics=True)`` pairs the model's answers with the task's
examples by iterating the task's cached tf.data dataset again on every call (its metric objects
postprocess each prediction with its example). At a month's probes that per-example tf.data
work cost T5 tiny as much as decoding itself, on every checkpoint. So the probe mixtures run
``evaluate(compute_metrics=False)`` and hand the outputs here, where the same computation runs on
the examples held as numpy: read once per evaluator (:class:`TaskExamples`), kept while the
evaluator lives. It is seqio's metric step itself, not a copy of the tasks' metrics: the task's
own metric objects (``task.metric_objs``: its metric functions with its postprocessor), given
the same examples, outputs and postprocessed targets (postprocessed once per evaluator, as the
evaluator caches them), so the numbers are the ones ``seqio.Evaluator`` gives (tested).

Only the metrics of the model outputs asked for are computed (``outputs``): an evaluation
that wants perplexities alone does not postprocess placeholder answers into an unused EM/F1.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
import seqio
import tensorflow_datasets as tfds

OutputType = seqio.metrics.ModelOutputType
TaskOutputs = Mapping[OutputType, Any]


@dataclass
class TaskExamples:
    """An evaluator's task examples as numpy (in seqio's index order) and each task's
    postprocessed targets once computed."""

    examples: dict[str, list[Mapping[str, Any]]]
    targets: dict[str, list[Any]] = field(default_factory=dict)


_READ: weakref.WeakKeyDictionary[seqio.Evaluator, TaskExamples] = weakref.WeakKeyDictionary()


def task_examples(evaluator: seqio.Evaluator) -> TaskExamples:
    """The evaluator's task examples, read from its cached task datasets on the first call."""
    found = _READ.get(evaluator)
    if found is None:
        found = _READ[evaluator] = TaskExamples(
            {task.name: list(tfds.as_numpy(evaluator.cached_task_datasets[task.name]))
             for task in evaluator.eval_tasks})
    return found


def compute_metrics(evaluator: seqio.Evaluator, outputs: Mapping[str, TaskOutputs],
                    types: Collection[OutputType] | None = None) -> dict[str, dict[str, Any]]:
    """``{task: {metric: value}}`` of ``evaluator.evaluate(compute_metrics=False)``'s
    ``outputs``, as its ``compute_metrics=True`` computes them; ``types``: the model output
    types whose metrics to compute (None: all)."""
    read = task_examples(evaluator)
    return {task.name: _task_metrics(task, outputs[task.name], read, types)
            for task in evaluator.eval_tasks}


def _task_metrics(task: seqio.Task, outputs: TaskOutputs, read: TaskExamples,
                  types: Collection[OutputType] | None) -> dict[str, Any]:
    examples = read.examples[task.name]
    values = []
    for metric in task.metric_objs:
        if types is not None and metric.model_output_type not in types:
            continue
        output = _as_arrays(outputs[metric.model_output_type])
        instance = metric.from_model_output(examples, output, task.output_features, "targets")
        if isinstance(instance, seqio.metrics.CollectingMetric):
            value, found = instance.actual_compute(examples, task.output_features, "targets",
                                                   read.targets.get(task.name))
            read.targets[task.name] = found["targets"]
        else:
            value = instance.compute()
        values.append(value)
    result: dict[str, Any] = {}
    for key, value in itertools.chain(*(v.items() for v in values)):
        if key in result:
            raise ValueError(f"Duplicate metric key '{key}' in Task '{task.name}'.")
        result[key] = value
    return result


def _as_arrays(output: Any) -> Any:
    """A model output as the evaluator passes it to a metric: an array, or (array, aux arrays)."""
    if isinstance(output, tuple):
        values, aux = output
        return np.array(values), jax.tree.map(np.array, aux,
                                              is_leaf=lambda x: isinstance(x, list))
    return np.array(output)
