"""seqio's two evaluation loggers (JSON lines and TensorBoard), writing through tw_jax's paths.

``seqio.JSONLogger`` and ``seqio.TensorBoardLogger`` write with ``tf.io.gfile``, whose ``gs://``
client asks a cloud metadata server for credentials and talks to storage.googleapis.com itself,
past the credentials and endpoint every other tw_jax file goes through. These write the same
files, in the same places (T5X's ``MODEL_DIR/inference_eval``), through
:mod:`tw_jax.io.paths`: ``{task}-metrics.jsonl`` (one line per evaluation: step and metrics),
``{task}-{step:06}.jsonl`` (every example with its target and the model's output) and
TensorBoard events per task (``{task}/events.out.tfevents.*``, tags ``eval/{metric}``).
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import seqio

from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.io.jsonl import json_line
from tw_jax.io.tfrecord import frame


def _plain(value: Any) -> Any:
    """A JSON-able copy: bytes as text, arrays as lists, clu scalars as numbers."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and not isinstance(value, (str, int, float)):
        return _plain(value.value)
    return value


def metric_values(metrics: Mapping[str, Any]) -> dict[str, float]:
    """``{name: number}`` of seqio's metric objects (clu Scalars) or plain numbers."""
    return {name: float(np.asarray(_plain(value))) for name, value in metrics.items()}


class JSONLogger(seqio.Logger):
    """``{task}-metrics.jsonl`` appended, ``{task}-{step:06}.jsonl`` written (see the module)."""

    def __call__(self, task_name: str, step: int | None, metrics: Mapping[str, Any],
                 dataset: Any, inferences: Mapping[str, Sequence[Any]] | None,
                 targets: Sequence[Any] | None) -> None:
        step = -1 if step is None else step
        if metrics:
            path = paths.join(self.output_dir, f"{task_name}-metrics.jsonl")
            earlier = paths.read_bytes(path).decode("utf-8") if paths.exists(path) else ""
            line = json.dumps({"step": step, **metric_values(metrics)})
            with atomic_open(path, "w", encoding="utf-8") as handle:
                handle.write(earlier + line + "\n")
        if not inferences or targets is None or dataset is None:
            return
        kinds = list(inferences)
        with atomic_open(paths.join(self.output_dir, f"{task_name}-{step:06}.jsonl"), "w",
                         encoding="utf-8") as handle:
            for index, example in enumerate(dataset.as_numpy_iterator()):
                record = {"input": _plain(example), "target": _plain(targets[index])}
                record.update({kind: _plain(inferences[kind][index]) for kind in kinds})
                handle.write(json_line(record))


class TensorBoardLogger(seqio.Logger):
    """Each evaluation's metrics as one TensorBoard event file per task (scalars tagged
    ``eval/{metric}`` at the step, as seqio's logger tags them), written whole and atomically:
    TensorBoard reads every event file of a folder, so nothing is ever appended in a bucket.

    The events are the TFRecord-framed ``Event`` protos TensorBoard reads; writing them needs
    neither the ``tensorboard`` package (which ``tf.summary`` needs) nor TensorFlow's own
    ``gs://`` client.
    """

    def __call__(self, task_name: str, step: int | None, metrics: Mapping[str, Any],
                 dataset: Any, inferences: Any, targets: Any) -> None:
        from tensorflow.core.framework.summary_pb2 import Summary
        from tensorflow.core.util.event_pb2 import Event

        step = -1 if step is None else step
        now = time.time()
        events = [Event(wall_time=now, file_version="brain.Event:2")]
        for name, value in metric_values(metrics).items():
            summary = Summary(value=[Summary.Value(tag=f"eval/{name}", simple_value=value)])
            events.append(Event(wall_time=now, step=step, summary=summary))
        name = (f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}."
                f"{next(_EVENT_FILES)}.v2")
        with atomic_open(paths.join(self.output_dir, task_name, name), "wb") as handle:
            handle.write(b"".join(frame(e.SerializeToString()) for e in events))


_EVENT_FILES = itertools.count()
