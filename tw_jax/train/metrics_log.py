"""Training metrics to ``MODEL_DIR/metrics.jsonl``, TensorBoard event files and the console.

One JSON object per logged step, with a ``step`` field; TensorBoard scalars under
``MODEL_DIR/train/``; a tqdm bar showing the same figures. On resume the lines of steps after the
restored checkpoint (written by the run that was interrupted) are dropped first, so the file
reads as one uninterrupted run. MODEL_DIR may be a bucket (:class:`tw_jax.io.growing.GrowingFile`
says how its files grow there). A full disk is an :class:`~tw_jax.errors.OutputError` naming the
file, which stops training with one line.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import socket
import sys
import time
from typing import Any

from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, naming_full_disk
from tw_jax.io.growing import GrowingFile
from tw_jax.io.paths import PathLike
from tw_jax.io.tfrecord import frame

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "train"


def truncate_after(path: PathLike, step: int) -> None:
    """Keep only the lines of ``path`` whose ``step`` is at most ``step`` (atomic rewrite)."""
    if not paths.exists(path):
        return
    kept = []
    for line in paths.read_text(path).splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        if int(record.get("step", 0)) <= step:
            kept.append(line)
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.writelines(f"{line}\n" for line in kept)


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value
    return value


class EventWriter:
    """TensorBoard event files written directly: a TFRecord file of ``Event`` protos.

    ``tf.summary`` needs the tensorboard package for its scalar op; the protos are in TensorFlow
    itself, the TFRecord framing in :mod:`tw_jax.io.tfrecord`, and an event file is nothing
    more. Written through :class:`GrowingFile`, so a bucket works like a local folder.
    """

    def __init__(self, folder: PathLike) -> None:
        from tensorflow.core.util import event_pb2

        name = f"events.out.tfevents.{time.time():.0f}.{socket.gethostname()}.{os.getpid()}"
        self.path = paths.join(folder, name)
        with naming_full_disk(self.path):
            paths.makedirs(folder)
            self._file = GrowingFile(self.path)
        self._event = event_pb2.Event
        self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event: Any) -> None:
        with naming_full_disk(self.path):
            self._file.write(frame(event.SerializeToString()))

    def scalars(self, step: int, values: dict[str, float]) -> None:
        from tensorflow.core.framework import summary_pb2

        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()]
        )
        self._write(self._event(wall_time=time.time(), step=step, summary=summary))

    def close(self) -> None:
        with naming_full_disk(self.path):
            self._file.close()


class _PlainLines:
    """What the bar shows, as one line per logged step, for logs that are files (a TPU VM's
    nohup.out, a CI job): ``step 20/40 loss 3.21 accuracy 0.41 lr 0.0001 tokens/s 1,234 ETA 0:01:05``."""

    def __init__(self, total_steps: int, start_step: int) -> None:
        self.total = total_steps
        # The ETA counts from the first logged step: before it the step compiled, which would
        # make a 14-second run promise ten minutes.
        self.first: tuple[int, float] | None = None

    def write(self, step: int, metrics: dict[str, float]) -> None:
        parts = [f"step {step}/{self.total}"]
        for key, label in (("loss", "loss"), ("accuracy", "accuracy"),
                           ("learning_rate", "lr"), ("tokens_per_second", "tokens/s")):
            value = metrics.get(key)
            if value is not None:
                parts.append(f"{label} {value:,.0f}" if key == "tokens_per_second"
                             else f"{label} {value:.4g}")
        now = time.monotonic()
        if self.first is None:
            self.first = (step, now)
        elif step > self.first[0]:
            left = (now - self.first[1]) / (step - self.first[0]) * (self.total - step)
            parts.append(f"ETA {datetime.timedelta(seconds=round(left))}")
        print(" ".join(parts), file=sys.stderr, flush=True)


class MetricsLogger:
    """Writes each logged step to JSONL and TensorBoard (process 0 only) and a progress bar."""

    def __init__(
        self,
        model_dir: PathLike,
        *,
        total_steps: int,
        start_step: int,
        enabled: bool = True,
        progress: bool | None = None,
    ) -> None:
        self.enabled = enabled
        self.path = paths.join(model_dir, METRICS_FILE)
        self._lines: GrowingFile | None = None
        self._writer = None
        self._bar = None
        self._plain: _PlainLines | None = None
        if not enabled:
            return
        with naming_full_disk(self.path):
            paths.makedirs(model_dir)
            truncate_after(self.path, start_step)
            self._lines = GrowingFile(self.path)
        self._writer = EventWriter(paths.join(model_dir, TENSORBOARD_DIR))
        if progress is None:  # a bar on a terminal; in a log file, one plain line per log
            progress = sys.stderr.isatty()
            if not progress:
                self._plain = _PlainLines(total_steps, start_step)
        if progress:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, desc="train", unit="step")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        record = {"step": int(step), **{k: _finite_or_none(v) for k, v in metrics.items()}}
        if self._plain is not None:
            self._plain.write(int(step), metrics)
        with naming_full_disk(self.path):
            self._lines.write((json.dumps(record) + "\n").encode("utf-8"))
        self._writer.scalars(int(step), {k: v for k, v in metrics.items() if v is not None})

    def advance(self, step: int, metrics: dict[str, float] | None = None) -> None:
        """Move the progress bar to ``step``; show ``metrics`` beside it."""
        if self._bar is None:
            return
        self._bar.update(step - self._bar.n)
        if metrics:
            shown = {k: metrics[k] for k in ("loss", "accuracy", "learning_rate", "tokens_per_second")
                     if metrics.get(k) is not None}
            self._bar.set_postfix({k: f"{v:.4g}" for k, v in shown.items()}, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._lines is not None:
            with naming_full_disk(self.path):
                self._lines.close()
        if self._writer is not None:
            self._writer.close()


def first_step_seconds(model_dir: PathLike, start_step: int) -> float | None:
    """``step_time`` of the first step a training ran after ``start_step`` (logged always, see
    :func:`tw_jax.train.trainer.train`): the step that compiles the training step, so a run's
    time splits into compilation and training. None when the log lacks it."""
    path = paths.join(model_dir, METRICS_FILE)
    if not paths.exists(path):
        return None
    for line in paths.read_text(path).splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("step") == start_step + 1 and "step_time" in record:
            return float(record["step_time"])
    return None
