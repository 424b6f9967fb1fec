"""Who trains a lifelong update: ``tw-jax train`` in this process, or another trainer.

The lifelong runner (:mod:`tw_jax.lifelong.runner`) decides what an update trains on, for how
many steps and from what; an :class:`UpdateTrainer` does the training and leaves a tw_jax
checkpoint in the update's MODEL_DIR, which the runner then scores with tw_jax's evaluators.
:class:`TwJaxTrainer` is ``tw-jax train``; ``tw_jax.t5x.lifelong.T5XTrainer`` runs the real
``python -m t5x.train`` (``tw-jax lifelong --trainer t5x``).

An update starts from the state the runner recorded for the update before it (INITIAL: the gin's
``INITIAL_CHECKPOINT_PATH``, or nothing): its ``model_dir`` is a tw_jax checkpoint any trainer
can start from, and a trainer may record more there (T5X: its own checkpoint in
:attr:`~tw_jax.lifelong.state.UpdateState.extra`, so the next month continues from it without a
conversion). The state a trainer returns is written to ``OUT/state/<method>/<update>.json`` as
is, with ``trainer`` naming who trained it, so a rerun with another trainer on the same OUT is
refused instead of mixing two trainers in one chain.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from tw_jax.lifelong.state import TW_JAX, UpdateState
from tw_jax.train import trainer
from tw_jax.train.config import TrainConfig
from tw_jax.train.metrics_log import first_step_seconds
from tw_jax.train.preemption import TrainingPreempted


class UpdateTrainer(Protocol):
    """Trains one update of a lifelong run into ``model_dir`` and returns the state to record
    (``model_dir``, ``step``, ``train_seconds``, ``task``, ...)."""

    name: str

    def train(self, run: TrainConfig, gin_files: Sequence[str], model_dir: str, task: str,
              start: UpdateState | None, data_dir: str | None = None) -> UpdateState:
        """``run``: the update as tw-jax's gin describes it (steps, batch, lengths, model);
        ``gin_files``: the method's files; ``start``: the state of the update it continues
        (its ``model_dir`` a tw_jax checkpoint), None to start from ``run``'s own start;
        ``data_dir``: the data folder the tasks are registered from."""
        ...


def start_checkpoint(run: TrainConfig, start: UpdateState | None) -> str | None:
    """The tw_jax checkpoint (or Hugging Face folder) an update starts from."""
    if start is not None:
        return start.model_dir
    return run.initial_checkpoint_path


def update_state(trainer_name: str, task: str, model_dir: str, start_from: str | None,
                 step: int, start_step: int, seconds: float) -> UpdateState:
    """The state every trainer records for a finished update."""
    return UpdateState(model_dir=str(model_dir), trainer=trainer_name, task=task,
                       initial_checkpoint=start_from, step=step, resumed_from_step=start_step,
                       train_seconds=seconds)


class TwJaxTrainer:
    """``tw-jax train`` in this process (the default): resumes inside an update from MODEL_DIR,
    saves and stops the run on SIGTERM (:class:`TrainingPreempted`)."""

    name = TW_JAX

    def train(self, run: TrainConfig, gin_files: Sequence[str], model_dir: str, task: str,
              start: UpdateState | None, data_dir: str | None = None) -> UpdateState:
        del gin_files, data_dir  # parsed and registered already: ``run`` is what they describe
        start_from = start_checkpoint(run, start)
        started = time.perf_counter()
        summary = trainer.train(run.replace(
            model_dir=model_dir, mixture_or_task_name=task, initial_checkpoint_path=start_from,
        ))
        seconds = time.perf_counter() - started
        if summary.preempted:
            raise TrainingPreempted(summary.preempted, str(model_dir), summary.step)
        state = update_state(self.name, task, model_dir, start_from, summary.step,
                             summary.start_step, seconds)
        flops = (summary.flops_per_step * summary.step + summary.extra_flops
                 if summary.flops_per_step is not None else None)
        return replace(state, compile_seconds=first_step_seconds(model_dir, summary.start_step),
                       train_tokens=summary.tokens_trained, train_flops=flops)
