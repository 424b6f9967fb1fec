"""Checkpoints both ways between tw_jax and T5X (``tw-jax t5x-checkpoint``).

T5X (at the pinned commit) writes Orbax checkpoints: ``MODEL_DIR/checkpoint_<step>/state`` holds
the train state as one pytree, ``{"target": params, "state": optimizer state}``. The parameter
tree is the one our modules create (same paths, same shapes), so the two read each other's
parameters unchanged, bit for bit:

- :func:`to_t5x` — a tw_jax run (MODEL_DIR or step folder) or a Hugging Face folder (through the
  family's ``load_hf``) as ``OUT/checkpoint_<step>/state`` holding ``{"target": params}``: the
  parameters alone. A T5X run starts from it with ``INITIAL_CHECKPOINT_PATH`` (gin/t5x/train.gin
  drops the checkpoint's optimizer state by T5X's ``assignment_map`` and initialises what the
  checkpoint lacks, a method's new adapters and the optimizer state, by T5X's
  ``fallback_to_scratch``).
- :func:`from_t5x` — a T5X checkpoint step as ``MODEL_DIR/checkpoints/<step>/`` of tw_jax
  (``params`` and ``meta``, sealed with checksums like any tw_jax step): what ``tw-jax eval``
  and ``infer`` read, and what ``INITIAL_CHECKPOINT_PATH`` of ``tw-jax train`` and the lifelong
  runner starts from. It holds no optimizer state, so it is a starting point, not a run to
  resume.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orbax.checkpoint as ocp

from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.io.paths import PathLike
from tw_jax.runtime import checkpoints as tw_checkpoints

STATE = "state"
T5X_STEP_PREFIX = "checkpoint"


class T5XCheckpointError(UsageError):
    """A folder that is not a T5X checkpoint step (``checkpoint_<step>/state``), one that cannot
    be read whole, or a conversion that cannot be written: one line naming the folder."""


def state_dir(checkpoint: PathLike) -> str:
    """The ``state`` item of a T5X checkpoint step folder (``.../checkpoint_4``)."""
    folder = paths.resolve(checkpoint)
    state = paths.join(folder, STATE)
    if not paths.isdir(state):
        raise T5XCheckpointError(f"{folder}: not a T5X checkpoint step (no {STATE}/ in it; give "
                                 "MODEL_DIR/checkpoint_<step>)")
    return state


def read_t5x_state(checkpoint: PathLike) -> dict[str, Any]:
    """The whole train state of a T5X checkpoint step as numpy, on the host; a step orbax or
    TensorStore cannot read (a cut or missing file, no ``_METADATA``, another format) is one
    line naming it."""
    folder = state_dir(checkpoint)
    try:
        state = tw_checkpoints.read_tree(folder)
    except Exception as error:  # orbax and TensorStore raise many kinds
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise T5XCheckpointError(f"{folder}: cannot be read as a T5X checkpoint "
                                 f"({type(error).__name__}: {first[:300]})") from None
    if not isinstance(state, dict) or "target" not in state:
        raise T5XCheckpointError(f"{folder}: holds no 'target' (the parameters of a T5X train "
                                 "state)")
    return state


def read_t5x_params(checkpoint: PathLike) -> dict[str, Any]:
    """The model parameters (T5X's ``target``) of a T5X checkpoint step, as nested dicts of
    numpy arrays: tw_jax's parameter tree. A parameter holding a NaN or an infinity (a damaged
    data file reads as such) is an error naming it, before anything is written from it."""
    params = read_t5x_state(checkpoint)["target"]
    for path, leaf in _leaves(params):
        values = np.asarray(leaf)
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            bad = int(values.size - np.isfinite(values).sum())
            raise T5XCheckpointError(f"{state_dir(checkpoint)}: parameter {path} holds {bad} "
                                     "non-finite values (NaN or infinity): the checkpoint is "
                                     "damaged or diverged; nothing was converted")
    return params


def _leaves(tree: Any, where: str = "") -> list[tuple[str, Any]]:
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in _leaves(tree[key], f"{where}/{key}")]
    return [(where.lstrip("/"), tree)]


def t5x_step(checkpoint: PathLike) -> int:
    """The step of a T5X checkpoint folder ``.../checkpoint_<step>``."""
    name = _last_part(paths.resolve(checkpoint))
    prefix = f"{T5X_STEP_PREFIX}_"
    if not name.startswith(prefix) or not name[len(prefix):].isdigit():
        raise T5XCheckpointError(f"{checkpoint}: a T5X checkpoint folder is named "
                                 f"{prefix}<step>")
    return int(name[len(prefix):])


def _source_params(source: PathLike) -> tuple[Any, int]:
    """``(params, step)`` of a Hugging Face folder (step 0) or a tw_jax run or step folder."""
    folder = paths.resolve(source)
    if tw_checkpoints.is_hf_folder(folder):
        return tw_checkpoints.read_params(folder), 0
    step_folder = tw_checkpoints.step_folder(folder)
    return tw_checkpoints.read_params(step_folder), int(_last_part(step_folder))


def to_t5x(source: PathLike, out_dir: PathLike, step: int | None = None) -> str:
    """Write the parameters of ``source`` (a tw_jax run or step folder, or a Hugging Face
    folder) as the T5X checkpoint ``out_dir/checkpoint_<step>`` (default: the source's step;
    0 for Hugging Face); returns its path."""
    params, found_step = _source_params(source)
    step = found_step if step is None else int(step)
    options = ocp.CheckpointManagerOptions(step_prefix=T5X_STEP_PREFIX, create=True,
                                           enable_async_checkpointing=False)
    target = paths.as_path(paths.resolve(out_dir))
    written = paths.join(paths.resolve(out_dir), f"{T5X_STEP_PREFIX}_{step}")
    with ocp.CheckpointManager(target, item_names=(STATE,), options=options) as manager:
        steps = manager.all_steps()
        if step in steps or paths.exists(written):
            raise T5XCheckpointError(f"{written}: exists already (or a save of it was cut "
                                     "short); give another --out or --step")
        if steps and max(steps) > step:
            raise T5XCheckpointError(f"{out_dir} holds step {max(steps)}, newer than {step}: "
                                     "orbax writes no older step there; give another --out or "
                                     "--step")
        saved = manager.save(
            step, args=ocp.args.Composite(state=ocp.args.PyTreeSave({"target": params})))
        manager.wait_until_finished()
    if not saved or step not in _steps(out_dir):
        raise T5XCheckpointError(f"{written}: orbax did not write the step (save returned "
                                 f"{saved!r}); nothing was converted")
    return written


def _steps(out_dir: PathLike) -> list[int]:
    options = ocp.CheckpointManagerOptions(step_prefix=T5X_STEP_PREFIX, read_only=True)
    with ocp.CheckpointManager(paths.as_path(paths.resolve(out_dir)), item_names=(STATE,),
                               options=options) as manager:
        return list(manager.all_steps())


def from_t5x(checkpoint: PathLike, model_dir: PathLike) -> str:
    """Write the parameters of the T5X checkpoint step ``checkpoint`` as tw_jax's
    ``model_dir/checkpoints/<step>`` (sealed); returns the step folder."""
    step = t5x_step(checkpoint)
    meta = {"step": step, "source": "t5x", "t5x_checkpoint": paths.resolve(checkpoint),
            "parameters_only": True}
    params = read_t5x_params(checkpoint)  # read and checked whole before anything is written
    try:
        return tw_checkpoints.save_params(model_dir, step, params, meta)
    except tw_checkpoints.CheckpointError as error:
        raise T5XCheckpointError(str(error)) from None


def _last_part(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


__all__ = ["T5XCheckpointError", "from_t5x", "read_t5x_params", "read_t5x_state", "state_dir",
           "t5x_step", "to_t5x"]
