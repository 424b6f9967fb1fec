"""T5X checkpoints of tw_jax models: reading their parameters.

T5X (at the pinned commit) writes Orbax checkpoints: ``MODEL_DIR/checkpoint_<step>/state`` holds
the train state as one pytree, ``{"target": params, "state": optimizer state}``. The parameter
tree is the one our modules create (same paths, same shapes), so tw_jax reads it as its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orbax.checkpoint as ocp

from tw_jax.io import paths
from tw_jax.io.paths import PathLike

STATE = "state"


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
    state = state_dir(checkpoint)
    metadata = ocp.PyTreeCheckpointHandler().metadata(paths.as_path(state)).tree
    as_numpy = _map_leaves(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), metadata)
    with ocp.PyTreeCheckpointer() as checkpointer:
        return checkpointer.restore(state, args=ocp.args.PyTreeRestore(restore_args=as_numpy))


def read_t5x_params(checkpoint: PathLike) -> dict[str, Any]:
    """The model parameters (T5X's ``target``) of a T5X checkpoint step, as nested dicts of
    numpy arrays: tw_jax's parameter tree."""
    return read_t5x_state(checkpoint)["target"]


def _map_leaves(fn: Any, tree: Any) -> Any:
    if isinstance(tree, dict):
        return {key: _map_leaves(fn, value) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_map_leaves(fn, value) for value in tree)
    return fn(tree)


__all__ = ["T5XCheckpointError", "read_t5x_params", "read_t5x_state", "state_dir"]
