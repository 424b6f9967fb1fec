"""Preemption: SIGTERM or SIGINT ends training with a checkpoint at a step all hosts agree on.

Spot and preemptible TPU VMs get SIGTERM some 30 seconds before they go; a scheduler (SLURM,
Kubernetes) sends it too, and a person presses Ctrl-C. The trainer asks :meth:`reached` after
every step; when it says yes, it saves a checkpoint of that step, waits for the write, logs one
line and returns, and the same command run again resumes from there.

- One process: handlers for SIGTERM and SIGINT set a flag; the step that sees it is the step
  saved.
- Several processes (``jax.distributed`` running): jax's preemption sync manager catches
  SIGTERM on any host, tells the others through the coordination service, and
  ``multihost_utils.reached_preemption_sync_point`` turns true on every host at the same step
  (the largest step any host had reached, plus one), so all hosts save the same checkpoint
  together. SIGINT is forwarded to this process as SIGTERM so it takes the same path.

A second signal while the first is being handled stops at once (KeyboardInterrupt), for the
impatient; the last complete checkpoint is still there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingPreempted(Exception):
    """Raised by drivers of several trainings (the lifelong runner) when one of them stopped on
    a signal: the checkpoint is saved, and the whole run stops there to be run again."""

    def __init__(self, signal_name: str, model_dir: str, step: int) -> None:
        self.signal_name, self.model_dir, self.step = signal_name, model_dir, step
        super().__init__(
            f"{signal_name}: stopped at step {step} with a checkpoint in {model_dir}; run the "
            "same command again to resume"
        )


class StopRequested(BaseException):
    """SIGTERM or SIGINT outside a training loop (set-up, evaluation, between the trainings of a
    lifelong run): raised where the process was, so the command unwinds and exits 0."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


# The signal that asked the command to stop, kept beside the exception: Python drops an
# exception raised by a signal handler that happens to run inside a garbage-collection callback
# or a ``__del__`` ("Exception ignored in ..."), and the command would go on as if unasked.
_requested: str | None = None


def request_stop(signal_name: str) -> StopRequested:
    """Record that a signal asked the command to stop; the exception to raise for it."""
    global _requested
    _requested = signal_name
    return StopRequested(signal_name)


def requested_stop() -> str | None:
    """The signal that asked the command to stop, if one did (even where its exception was
    dropped)."""
    return _requested


class Preemption:
    """Install with ``with Preemption() as preemption:``; ask ``preemption.reached(step)``."""

    def __init__(self) -> None:
        import jax  # here, not at the top: every command's start asks this module for stops

        self.multihost = jax.process_count() > 1
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Preemption:
        if threading.current_thread() is not threading.main_thread():
            return self  # signal handlers can only be installed from the main thread
        if _requested is not None:
            raise StopRequested(_requested)  # asked before training, its exception dropped
        handled = (signal.SIGINT,) if self.multihost else _SIGNALS
        for number in handled:
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, previous in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(number, previous)
        self._previous.clear()

    def _handle(self, number: int, frame: FrameType | None) -> None:
        name = signal.Signals(number).name
        if self.signal_name is not None:
            raise KeyboardInterrupt(f"{name} again: stopping without a checkpoint")
        self.signal_name = name
        if self.multihost:
            # jax's own SIGTERM handler tells every host; this process follows the same path.
            os.kill(os.getpid(), signal.SIGTERM)

    def reached(self, step: int) -> bool:
        """True at the step where training must stop and save (the same step on every host)."""
        if self.multihost:
            from jax.experimental import multihost_utils

            if multihost_utils.reached_preemption_sync_point(step):
                self.signal_name = self.signal_name or "SIGTERM"
                return True
            return False
        return self.signal_name is not None
