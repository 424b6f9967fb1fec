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

import orbax.checkpoint as ocp

from tw_jax.io import paths
from tw_jax.io.paths import PathLike
from tw_jax.runtime import checkpoints as tw_checkpoints

STATE = "state"
T5X_STEP_PREFIX = "checkpoint"


class T5XCheckpointError(ValueError):
    """A folder that is not a T5X checkpoint step (``checkpoint_<step>/state``)."""


def state_dir(checkpoint: PathLike) -> str:
    """The ``state`` item of a T5X checkpoint step folder (``.../checkpoint_4``)."""
    folder = paths.resolve(checkpoint)
    state = paths.join(folder, STATE)
    if not paths.isdir(state):
        raise T5XCheckpointError(f"{folder}: not a T5X checkpoint step (no {STATE}/ in it; give "
                                 "MODEL_DIR/checkpoint_<step>)")
    return state


def read_t5x_state(checkpoint: PathLike) -> dict[str, Any]:
    """The whole train state of a T5X checkpoint step as numpy, on the host."""
    return tw_checkpoints.read_tree(state_dir(checkpoint))


def read_t5x_params(checkpoint: PathLike) -> dict[str, Any]:
    """The model parameters (T5X's ``target``) of a T5X checkpoint step, as nested dicts of
    numpy arrays: tw_jax's parameter tree."""
    return read_t5x_state(checkpoint)["target"]


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
    with ocp.CheckpointManager(target, item_names=(STATE,), options=options) as manager:
        if step in manager.all_steps():
            raise T5XCheckpointError(f"{paths.join(str(target), f'{T5X_STEP_PREFIX}_{step}')}: "
                                     "exists already")
        manager.save(step, args=ocp.args.Composite(state=ocp.args.PyTreeSave({"target": params})))
        manager.wait_until_finished()
    return paths.join(paths.resolve(out_dir), f"{T5X_STEP_PREFIX}_{step}")


def from_t5x(checkpoint: PathLike, model_dir: PathLike) -> str:
    """Write the parameters of the T5X checkpoint step ``checkpoint`` as tw_jax's
    ``model_dir/checkpoints/<step>`` (sealed); returns the step folder."""
    step = t5x_step(checkpoint)
    meta = {"step": step, "source": "t5x", "t5x_checkpoint": paths.resolve(checkpoint),
            "parameters_only": True}
    return tw_checkpoints.save_params(model_dir, step, read_t5x_params(checkpoint), meta)


def _last_part(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


__all__ = ["T5XCheckpointError", "from_t5x", "read_t5x_params", "read_t5x_state", "state_dir",
           "t5x_step", "to_t5x"]
