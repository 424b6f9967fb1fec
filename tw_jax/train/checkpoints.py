"""Orbax checkpoints of a training run, and where a run starts from.

A checkpoint is ``MODEL_DIR/checkpoints/<step>/`` with three items: ``params``, ``opt_state``
(both ``StandardSave`` pytrees, restored straight into their mesh shardings) and ``meta`` (JSON:
step, batches consumed, seed and the dropout key of the next step). Parameters are their own
item so that a later run can start from them without reading the optimizer state (for RecAdam
or Adam that is two or three more copies of the model).

Saving is asynchronous where orbax supports it: the arrays are copied off the devices and written
by a background thread while training goes on. Orbax writes into a temporary folder and renames
it when complete, so a process killed mid-save leaves no checkpoint that looks finished; the
latest *complete* step is what a restart resumes from.

Starting point (:func:`initial_params`): the latest checkpoint in MODEL_DIR (automatic resume,
handled by the trainer), else ``INITIAL_CHECKPOINT_PATH``: a Hugging Face folder
(``config.json`` + safetensors), a checkpoint step folder of ours, or a MODEL_DIR whose latest
checkpoint is taken. Parameters it lacks (new LoRA / adapter / Modular weights) keep their fresh
initialisation and are named in the log.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit the model."""


def manager(model_dir: str | os.PathLike[str], *, keep: int | None, asynchronous: bool = True) -> Any:
    """An orbax ``CheckpointManager`` for ``MODEL_DIR/checkpoints`` keeping the last ``keep``."""
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep,
        create=True,
        enable_async_checkpointing=asynchronous,
        cleanup_tmp_directories=True,
    )
    directory = Path(model_dir).absolute() / CHECKPOINTS
    return ocp.CheckpointManager(directory, item_names=("params", "opt_state", "meta"),
                                 options=options)


def save(mngr: Any, step: int, params: Any, opt_state: Any, meta: dict[str, Any]) -> None:
    """Start saving step ``step`` (returns before the write completes when asynchronous)."""
    import orbax.checkpoint as ocp

    mngr.save(
        step,
        args=ocp.args.Composite(
            params=ocp.args.StandardSave(params),
            opt_state=ocp.args.StandardSave(opt_state),
            meta=ocp.args.JsonSave(meta),
        ),
        force=True,
    )


def restore(mngr: Any, step: int, abstract_params: Any, abstract_opt_state: Any) -> tuple:
    """``(params, opt_state, meta)`` of ``step``, placed as the abstract trees' shardings say."""
    import orbax.checkpoint as ocp

    restored = mngr.restore(
        step,
        args=ocp.args.Composite(
            params=ocp.args.StandardRestore(abstract_params),
            opt_state=ocp.args.StandardRestore(abstract_opt_state),
            meta=ocp.args.JsonRestore(),
        ),
    )
    return restored["params"], restored["opt_state"], dict(restored["meta"])


def _step_folder(path: Path) -> Path:
    """A checkpoint step folder from a step folder, a ``checkpoints`` folder or a MODEL_DIR."""
    if (path / "params").is_dir():
        return path
    for root in (path / CHECKPOINTS, path):
        steps = [p for p in root.iterdir() if p.is_dir() and p.name.isdigit()] if root.is_dir() else []
        steps = [p for p in steps if (p / "params").is_dir()]
        if steps:
            return max(steps, key=lambda p: int(p.name))
    raise CheckpointError(
        f"{path}: neither a Hugging Face folder (config.json) nor an orbax checkpoint of tw_jax "
        f"(a step folder with params/, or a MODEL_DIR with {CHECKPOINTS}/<step>/params)"
    )


def read_params(path: str | os.PathLike[str]) -> Any:
    """Unboxed parameters (numpy) of a Hugging Face folder or an orbax checkpoint of ours."""
    folder = Path(path)
    if not folder.exists():
        raise CheckpointError(f"{folder}: initial checkpoint not found")
    if (folder / "config.json").is_file():
        from tw_jax.models.hf_io import read_config

        model_type = read_config(folder).get("model_type")
        if model_type == "t5":
            from tw_jax.models.t5_io import load_t5

            return load_t5(folder)[1]
        if model_type == "gpt2":
            from tw_jax.models.hf_io import load_gpt2

            return load_gpt2(folder)[1]
        raise CheckpointError(f"{folder / 'config.json'}: model_type {model_type!r} not supported")
    import orbax.checkpoint as ocp

    step = _step_folder(folder)
    with ocp.StandardCheckpointer() as checkpointer:
        tree = checkpointer.restore(step / "params")
    return jax.tree.map(np.asarray, tree)


def initial_params(fresh: Any, path: str | os.PathLike[str]) -> Any:
    """``fresh`` (unboxed) with every tensor the checkpoint at ``path`` has replaced by it."""
    from tw_jax.models.variants import fill_missing

    loaded = read_params(path)
    try:
        merged, missing = fill_missing(fresh, loaded)
    except ValueError as error:
        raise CheckpointError(f"{path}: {error}") from error
    if missing:
        log.info(
            "%s: %d tensors are not in the checkpoint and start fresh: %s", path, len(missing),
            ", ".join(missing),
        )
    return merged, missing
