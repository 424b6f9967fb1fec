"""How a lifelong run's gin files become typed runs, parsed once when the run starts, and how
long an update trains: ``TRAIN_STEPS``, or ``TRAIN_EPOCHS`` passes over its own data."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

import tw_jax.tasks
from tw_jax.data.model_folder import is_model_folder
from tw_jax.evaluate.groups import INITIAL, OPEN_BOOK
from tw_jax.lifelong.options import LifelongError, LifelongOptions, default_initial_gin_files
from tw_jax.runtime import gin_setup, task_data
from tw_jax.tasks.damaged import named_read_errors
from tw_jax.train.config import TrainConfig
from tw_jax.train.gin_config import train_config

log = logging.getLogger(__name__)

EPOCHS_MACRO = "TRAIN_EPOCHS"


def update_epochs() -> float | None:
    """``TRAIN_EPOCHS`` of the parsed gin configuration (None: size updates by TRAIN_STEPS)."""
    value = gin_setup.macro(EPOCHS_MACRO)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0 < value < float("inf")):
        raise LifelongError(f"{EPOCHS_MACRO} must be a positive number of passes, got {value!r}")
    return float(value)


def training_examples(task: str, lengths: Mapping[str, int], epochs: float) -> float:
    """Examples in ``epochs`` passes over ``task`` (a concrete task or mixture name) at the
    feature ``lengths``; a Mix-Review mixture's passes include each epoch's old examples."""
    import seqio

    provider = seqio.get_mixture_or_task(task)
    # A pass over a mixture is a pass over its new data with the old data it mixes in (Mix-
    # Review's review epochs, replay's share of earlier months), not seqio's pass over members.
    if isinstance(provider, (tw_jax.tasks.MixReviewMixture, tw_jax.tasks.ReplayMixture)):
        return provider.examples(epochs, lengths)
    stream = task_data.task_dataset(task, lengths, shuffle=False, num_epochs=1)
    with named_read_errors(task):
        count = int(stream.reduce(0, lambda n, _: n + 1))
    if count == 0:
        raise LifelongError(f"{task}: no training examples, so TRAIN_EPOCHS gives no steps")
    return epochs * count


def update_steps(task: str, lengths: Mapping[str, int], batch_size: int, epochs: float) -> int:
    """Steps of one update that passes ``epochs`` times over ``task``:
    ``ceil(examples · epochs / batch_size)``."""
    return max(1, math.ceil(training_examples(task, lengths, epochs) / batch_size))


def across_updates(run: TrainConfig, steps_before: int, updates_before: int) -> TrainConfig:
    """``run`` as the update after ``updates_before`` earlier ones of the chain that applied
    ``steps_before`` optimizer updates in all: a schedule that spans updates (TiC-LM's AR
    meta-schedule, ``cosine_ar``: each update's peak read off one cosine over all updates so
    far) reads them; every other schedule ignores them, and a schedule function without those
    parameters is left as it is."""
    schedule = run.schedule_fn
    if schedule is None:
        return run
    try:
        parameters = inspect.signature(schedule).parameters
    except (TypeError, ValueError):
        return run
    if "steps_before" not in parameters or "updates_before" not in parameters:
        return run
    return run.replace(schedule_fn=functools.partial(
        schedule, steps_before=int(steps_before), updates_before=int(updates_before)))


def sized(run: TrainConfig, task: str, epochs: float | None) -> TrainConfig:
    """``run`` with TRAIN_STEPS replaced by ``epochs`` (``TRAIN_EPOCHS``) passes over ``task``,
    when set."""
    if epochs is None:
        return run
    concrete = task_data.task_name(task, run.model_config)
    steps = update_steps(concrete, run.task_feature_lengths, run.batch_size, epochs)
    log.info("%s: %g pass(es) at batch %d = %d steps", concrete, epochs, run.batch_size, steps)
    return run.replace(train_steps=steps)



# --- gin ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedRuns:
    """The runs the gin files describe, parsed once when the run starts and passed down as
    typed Python: ``initial`` (INITIAL's files) and ``method`` (the method's files, None for a
    method that trains nothing), each with its own gin record for its MODEL_DIRs; the method's
    ``TRAIN_EPOCHS`` and ``DATA_DIR``."""

    initial: TrainConfig
    method: TrainConfig | None
    epochs: float | None
    data_dir: str | None

    def with_data_dir(self, data_dir: str) -> ParsedRuns:
        """The runs reading ``data_dir`` (``--data``, which gin never saw): each MODEL_DIR's
        config.gin records it as DATA_DIR, so ``tw-jax eval --gin.MODEL_DIR=...`` needs no more."""

        def reading(run: TrainConfig | None) -> TrainConfig | None:
            if run is None or run.gin_record is None:
                return run
            return run.replace(gin_record=run.gin_record.with_macros(DATA_DIR=data_dir))

        return dataclasses.replace(self, initial=reading(self.initial),
                                   method=reading(self.method), data_dir=data_dir)


def parse_runs(options: LifelongOptions, method: str) -> ParsedRuns:
    """Parse INITIAL's gin files, then the method's (whose state gin keeps: task registration
    reads its bindings). Each update sets its own MODEL_DIR, task and start point on these."""
    initial_files = options.initial_gin_files or default_initial_gin_files(options.gin_files)
    bindings = list(options.gin_bindings)
    start = options.initial_checkpoint
    if is_model_folder(start):
        # --initial-checkpoint of a Hugging Face folder: the run's model is the folder's, as
        # tw-jax train's from INITIAL_CHECKPOINT_PATH (tw_jax.runtime.start_model)
        bindings.append(f"INITIAL_CHECKPOINT_PATH={str(start)!r}")
    # Not strict: a --gin macro of the method's files may be unused by INITIAL's (the method's
    # parse below checks them).
    gin_setup.parse(initial_files, bindings, options.gin_search_paths, strict_macros=False)
    initial = train_config()
    # No gin binding refers to TRAIN_EPOCHS (the runner reads it), so gin's check of unused
    # macros must not count it.
    gin_setup.parse(options.gin_files, bindings, options.gin_search_paths,
                    runner_macros=(EPOCHS_MACRO,))
    trains = method not in (INITIAL, *OPEN_BOOK)
    return ParsedRuns(initial, train_config() if trains else None, update_epochs(),
                      gin_setup.macro("DATA_DIR"))
