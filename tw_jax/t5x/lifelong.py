"""The real T5X as the lifelong runner's trainer: ``tw-jax lifelong --trainer t5x``.

Each update (INITIAL, then every month) is one ``python -m t5x.train`` in a process of its own,
with the method's T5X gin file (``t5x/<method>.gin`` for ``<method>.gin``: the same method file
under T5X's training script), the model and run files the method's file includes and the ones
after it, the run's ``--gin`` bindings, and what the runner decides: the task, the steps
(``TRAIN_STEPS``, or ``TRAIN_EPOCHS`` passes as tw-jax counts them), the data folder and the
start. T5X writes its checkpoints into ``MODEL_DIR/t5x/`` of the update; its last one is then
converted (:func:`tw_jax.t5x.checkpoints.from_t5x`, bit-exact) into the update's MODEL_DIR,
which tw_jax's evaluators score and the report reads, as for ``tw-jax train``.

Months chain on T5X's own checkpoints: a month starts from the previous update's last T5X
checkpoint (T5X's ``INITIAL_CHECKPOINT_PATH``; ``t5x/train.gin`` drops its optimizer state and
step, so each update counts its steps and schedule from 0 as ``tw-jax train``'s do, and a
method's new parameters start from scratch). A start that has no T5X checkpoint (a given
``--initial-checkpoint``, a Hugging Face folder, a tw_jax run) is converted once
(:func:`tw_jax.t5x.checkpoints.to_t5x`) into ``MODEL_DIR/t5x_start/``.

A separate process because T5X parses its own gin configuration and flags, which tw-jax's
(parsed in the runner's process for evaluation) would clash with. On an accelerator, the
runner's process releases its devices before T5X starts (``jax.extend.backend.clear_backends``)
so the child can open them; evaluation opens them again afterwards. An interrupted T5X update is
resumed by T5X itself from ``MODEL_DIR/t5x/`` when the runner is started again. T5X's output
goes to ``MODEL_DIR/t5x_train.log``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tw_jax.io import paths
from tw_jax.lifelong.state import UpdateState
from tw_jax.lifelong.updates import start_checkpoint, update_state
from tw_jax.methods import under_t5x_refusal
from tw_jax.runtime import checkpoints as tw_checkpoints
from tw_jax.runtime import gin_setup, task_data
from tw_jax.t5x.checkpoints import T5X_STEP_PREFIX, from_t5x, to_t5x
from tw_jax.train.config import TrainConfig

T5X = "t5x"
T5X_DIR = "t5x"
START_DIR = "t5x_start"
LOG_FILE = "t5x_train.log"
_INCLUDE = re.compile(r"^\s*include\s+['\"]([^'\"]+)['\"]", re.MULTILINE)
_CARRIED = ("models/", "runs/")
_NOT_CARRIED = ("base.gin", "methods/")
_RUNNER_MACROS = ("MODEL_DIR", "MIXTURE_OR_TASK_NAME", "TRAIN_STEPS", "TRAIN_EPOCHS",
                  "INITIAL_CHECKPOINT_PATH", "DATA_DIR")


class T5XTrainingError(RuntimeError):
    """``python -m t5x.train`` failed, or left no checkpoint of the last step."""


def t5x_gin_files(gin_files: Sequence[str], search: Sequence[str] = ()) -> list[str]:
    """T5X's gin files for a lifelong run's ``gin_files``: ``t5x/<stem>.gin`` of the first (the
    method), the model and run files the first includes (``kadapter.gin``'s
    ``models/t5_large.gin`` and ``runs/tpu.gin``), then the files after it as given."""
    first = gin_setup.resolve_gin_file(gin_files[0], search)
    method_file = f"{T5X}/{first.stem}.gin"
    try:
        gin_setup.resolve_gin_file(method_file, search)
    except gin_setup.GinConfigError:
        refusal = under_t5x_refusal(first.stem)
        if refusal:
            raise gin_setup.GinConfigError(f"{gin_files[0]}: {refusal}") from None
        raise gin_setup.GinConfigError(
            f"{gin_files[0]}: no T5X gin file {method_file} for this method (one per method "
            f"ships in gin/t5x/; for your own, write {method_file} that includes "
            f"'t5x/train.gin' and your method file, in a --gin_search_paths folder)") from None
    return [method_file, *_carried_includes(first, search), *gin_files[1:]]


def _carried_includes(gin_file: Path, search: Sequence[str], depth: int = 0) -> list[str]:
    """The ``models/`` and ``runs/`` files a method's top file includes, through the other
    top files it includes (``initial.gin`` includes ``diff.gin``); not ``base.gin``, which
    wires ``tw-jax train``, nor ``methods/``, which the T5X method file includes itself."""
    if depth > 8:
        raise gin_setup.GinConfigError(f"{gin_file}: includes nest more than 8 deep")
    carried: list[str] = []
    for name in _INCLUDE.findall(gin_file.read_text(encoding="utf-8")):
        if name.startswith(_CARRIED):
            carried.append(name)
        elif not name.startswith(_NOT_CARRIED):
            carried += _carried_includes(gin_setup.resolve_gin_file(name, search), search,
                                         depth + 1)
    return carried


def _binding(name: str, value: Any) -> str:
    return f"--gin_bindings={name} = {value!r}"


def _runner_sets(binding: str) -> bool:
    return gin_setup.binding_key(binding) in _RUNNER_MACROS


def release_accelerators() -> None:
    """Give back the accelerators this process opened (evaluation), so a T5X child can open
    them: a TPU is one process's, and a GPU's memory is preallocated. Nothing on the CPU."""
    if "jax" not in sys.modules or os.environ.get("JAX_PLATFORMS", "").strip() == "cpu":
        return
    import jax

    if jax.default_backend() != "cpu":
        jax.extend.backend.clear_backends()


@dataclass
class T5XTrainer:
    """Trains each lifelong update with ``python -m t5x.train`` (see the module docstring)."""

    gin_search_paths: Sequence[str] = ()
    gin_bindings: Sequence[str] = ()
    python: str = field(default_factory=lambda: sys.executable)
    env: Mapping[str, str] | None = None
    name: str = T5X

    def command(self, run: TrainConfig, gin_files: Sequence[str], t5x_dir: str, task: str,
                start: str | None, data_dir: str | None) -> list[str]:
        """The ``python -m t5x.train`` command line of one update."""
        search = [str(folder.absolute())
                  for folder in gin_setup.search_paths(self.gin_search_paths)]
        files = t5x_gin_files(gin_files, self.gin_search_paths)
        own = [f"--gin_bindings={gin_setup.binding_text(b)}" for b in self.gin_bindings
               if not _runner_sets(b)]
        return [
            self.python, "-m", "t5x.train", f"--gin_search_paths={','.join(search)}",
            *(f"--gin_file={name}" for name in files), *own,
            _binding("MODEL_DIR", t5x_dir),
            _binding("MIXTURE_OR_TASK_NAME", task_data.task_name(task, run.model_config)),
            f"--gin_bindings=TRAIN_STEPS = {int(run.train_steps)}",
            _binding("INITIAL_CHECKPOINT_PATH", start),
            _binding("DATA_DIR", data_dir),
        ]

    def train(self, run: TrainConfig, gin_files: Sequence[str], model_dir: str, task: str,
              start: UpdateState | None, data_dir: str | None = None) -> UpdateState:
        t5x_dir = paths.join(model_dir, T5X_DIR)
        start_from = start_checkpoint(run, start)
        t5x_start = self._t5x_start(start, start_from, model_dir)
        command = self.command(run, gin_files, t5x_dir, task, t5x_start, data_dir)
        release_accelerators()
        started = time.perf_counter()
        done = subprocess.run(command, env=dict(self.env or os.environ), capture_output=True,
                              text=True, check=False)
        seconds = time.perf_counter() - started
        log = paths.join(model_dir, LOG_FILE)
        paths.write_text(log, done.stdout + done.stderr)
        last = paths.join(t5x_dir, f"{T5X_STEP_PREFIX}_{int(run.train_steps)}")
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            raise T5XTrainingError(
                f"python -m t5x.train exited with {done.returncode} training {task} into "
                f"{t5x_dir} (whole log: {log}):\n{tail}")
        if not paths.isdir(last):
            raise T5XTrainingError(f"{t5x_dir}: T5X finished without a checkpoint of step "
                                   f"{run.train_steps} (log: {log})")
        step = int(run.train_steps)
        if not paths.isdir(paths.join(model_dir, tw_checkpoints.CHECKPOINTS, str(step))):
            from_t5x(last, model_dir)  # not converted yet (a rerun after a crash just here)
        state = update_state(self.name, task, model_dir, start_from, step, 0, seconds)
        return replace(state, extra={"t5x_checkpoint": last, "t5x_start": t5x_start})

    def _t5x_start(self, start: UpdateState | None, start_from: str | None,
                   model_dir: str) -> str | None:
        """The T5X checkpoint an update starts from: the previous update's own, else its
        tw_jax checkpoint (or Hugging Face folder) converted once into ``t5x_start/``."""
        if start is not None and start.extra.get("t5x_checkpoint"):
            return str(start.extra["t5x_checkpoint"])
        if start_from is None:
            return None
        converted = paths.join(model_dir, START_DIR, f"{T5X_STEP_PREFIX}_0")
        if paths.isdir(converted):
            return converted
        return to_t5x(start_from, paths.join(model_dir, START_DIR), step=0)


__all__ = ["T5XTrainer", "T5XTrainingError", "release_accelerators", "t5x_gin_files"]
