"""``tw-jax eval --per-probe FILE.jsonl``: one line per scored example of the evaluated tasks.

The lifelong runner keeps per-probe log-likelihoods and token counts as arrays
(:mod:`tw_jax.evaluate.per_probe`, read by the report's noise marks); this writes the same
figures for one ``tw-jax eval``, as text a person or another harness can pair up (``docs/
lm_eval.md`` compares them with lm-evaluation-harness's per-sample output). Each line:

``task``, ``index`` (seqio's example order: the CSV's row order), ``id`` (the per-probe key of
:func:`tw_jax.evaluate.per_probe.probe_keys`, as a string, when the task carries the probe's
fields), ``category`` (a probe task's), ``inputs`` and ``targets`` (the scored text, or the
prompt and target), ``log_likelihood`` (summed over the scored tokens), ``tokens`` (their count)
and ``greedy`` (whether every scored token is its position's argmax: teacher-forced greedy
decoding writes the target, lm-eval's ``is_greedy``).

The examples are the evaluator's own model features (the same trimming and scored tokens
as the metrics), scored once more with the argmax check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import jax
import numpy as np

from tw_jax.evaluate.eval_batches import Batch
from tw_jax.evaluate.per_probe import probe_keys
from tw_jax.evaluate.seqio_eval import SeqioModel, _cached_step
from tw_jax.io.atomic import atomic_open
from tw_jax.io.jsonl import json_line
from tw_jax.runtime.score_step import make_score_step
from tw_jax.tasks.probes import CATEGORIES

_TEXTS = ("inputs_pretokenized", "targets_pretokenized")
_FACT = ("subject", "relation", "object", "previous_object")


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _category(task: str) -> str | None:
    parts = task.split("_")
    return next((p for p in parts if p in (*CATEGORIES, "changed")), None)


def greedy_scores(fns: SeqioModel, dataset: Any) -> list[tuple[int, tuple[float, float, bool]]]:
    """``[(index, (log-likelihood, tokens, greedy))]`` of an enumerated model-feature dataset."""
    step = _cached_step("score_correct", fns.model, fns.mesh,
                        partial(make_score_step, correct=True))

    def compute(batch: Batch) -> Sequence[tuple[float, float, bool]]:
        scored = jax.device_get(step(fns.params, fns._model_rows(batch.features)))
        rows = len(batch.rows)
        ll = np.asarray(scored["log_likelihood"], np.float64)[:rows]
        tokens = np.asarray(scored["tokens"], np.float64)[:rows]
        correct = np.asarray(scored["correct"], np.float64)[:rows]
        return [(float(a), float(b), bool(c == b)) for a, b, c in zip(ll, tokens, correct,
                                                                      strict=True)]

    return fns._outputs("score_correct", dataset, "per-probe", compute)


def task_records(task: str, examples: Sequence[Mapping[str, Any]],
                 scores: Sequence[tuple[int, tuple[float, float, bool]]]) -> list[dict[str, Any]]:
    """The lines of one task (``examples``: its task features in seqio's order)."""
    facts = [{f: _text(e[f]) for f in _FACT if f in e} for e in examples]
    keys = probe_keys(facts).tolist() if facts and all("object" in f for f in facts) else None
    out = []
    for index, (ll, tokens, greedy) in sorted(scores):
        example = examples[index]
        record: dict[str, Any] = {"task": task, "index": int(index)}
        if keys is not None:
            record["id"] = str(keys[index])
        record["category"] = _category(task)
        for name in _TEXTS:
            if name in example:
                record[name.split("_")[0]] = _text(example[name])
        record.update(log_likelihood=ll, tokens=tokens, greedy=greedy)
        out.append(record)
    return out


def write_per_probe(path: str, evaluator: Any, fns: SeqioModel) -> int:
    """Every example of ``evaluator``'s tasks (a ``seqio.Evaluator`` that has run) to ``path``
    as JSONL, atomically; returns the number of lines."""
    lines = []
    for task in evaluator.eval_tasks:
        examples = list(evaluator.cached_task_datasets[task.name].as_numpy_iterator())
        scores = greedy_scores(fns, evaluator.cached_model_datasets[task.name])
        lines += [json_line(r) for r in task_records(task.name, examples, scores)]
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.writelines(lines)
    return len(lines)
