"""Before a run resumes from its MODEL_DIR: is the model asked for the one the checkpoints hold?

A resume with another model (``GPT2Config.n_layer=4`` on a 3-layer run, another family) cannot
work, and finding out inside orbax's restore comes too late and too vaguely: the run's record
(``config.gin``) would already be rewritten and orbax's message is cut at "tree structures do not
match:". So the trainer checks first, reading only the latest checkpoint's metadata: the saved
parameter tree against the requested model's, and, where the checkpoint records the model's
settings (steps saved since this check exists carry ``meta["model"]``), which settings differ
(``n_layer 3 → 4``). A difference is a :class:`ResumeMismatchError` (``tw-jax train`` exits 2)
before any file of MODEL_DIR changes. Settings that cannot change the parameters (steps,
learning rate, batch) are free to change on resume; :func:`record_config` keeps the earlier
``config.gin`` beside the new one, so the record says what trained which steps.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from flax import traverse_util

from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.runtime.checkpoints import CHECKPOINTS, saved_meta

_SHOWN = 6  # differing tensors named in the error (the count says how many in all)


class ResumeMismatchError(ValueError):
    """The model asked for does not fit the checkpoints MODEL_DIR holds."""


def model_record(model_config: Any) -> dict[str, Any]:
    """What a checkpoint records of its model: the config's class and every setting, as JSON."""
    settings = dataclasses.asdict(model_config) if dataclasses.is_dataclass(model_config) else {}
    return {"config": type(model_config).__name__,
            "settings": json.loads(json.dumps(settings, default=str))}


def setting_changes(recorded: Mapping[str, Any], requested: Mapping[str, Any]) -> list[str]:
    """``["n_layer 3 → 4", "lora.rank 8 → 16"]``: the settings that differ, dotted."""
    if recorded.get("config") != requested.get("config"):
        return [f"model {recorded.get('config')} → {requested.get('config')}"]
    old = traverse_util.flatten_dict(dict(recorded.get("settings", {})), sep=".")
    new = traverse_util.flatten_dict(dict(requested.get("settings", {})), sep=".")
    return [f"{name} {old.get(name)!r} → {new.get(name)!r}".replace("'", "")
            for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]


def tensor_changes(saved: Any, requested: Any) -> list[str]:
    """The parameters that differ between two trees of shaped leaves: only in the checkpoint,
    only in the model, or of another shape."""
    old = {k: tuple(v.shape) for k, v in traverse_util.flatten_dict(saved, sep="/").items()}
    new = {k: tuple(v.shape) for k, v in traverse_util.flatten_dict(requested, sep="/").items()}
    changes = []
    for name in sorted(set(old) | set(new)):
        if name not in new:
            changes.append(f"{name} {old[name]} only in the checkpoint")
        elif name not in old:
            changes.append(f"{name} {new[name]} only in this model")
        elif old[name] != new[name]:
            changes.append(f"{name} {old[name]} → {new[name]}")
    return changes


def check_resume(model_dir: str, step_dir: str, model_config: Any, abstract_params: Any,
                 saved_params: Any) -> None:
    """Raise :class:`ResumeMismatchError` when the model asked for does not fit the checkpoint
    ``step_dir`` (``saved_params``: its parameter tree, read from its metadata)."""
    tensors = tensor_changes(saved_params, abstract_params)
    if not tensors:
        return
    recorded = (saved_meta(step_dir) or {}).get("model")
    settings = (setting_changes(recorded, model_record(model_config)) if recorded
                else ["(the checkpoint records no model settings)"])
    shown = "; ".join(tensors[:_SHOWN]) + (f"; and {len(tensors) - _SHOWN} more"
                                           if len(tensors) > _SHOWN else "")
    raise ResumeMismatchError(
        f"{model_dir}: its checkpoints ({step_dir}) hold another model than this run asks for: "
        f"{', '.join(settings) or 'the same settings, other parameters'}; {len(tensors)} "
        f"parameter(s) differ: {shown}. Nothing in MODEL_DIR was changed: resume with the "
        f"model its config.gin records, or train into another MODEL_DIR (or start from "
        f"{paths.join(model_dir, CHECKPOINTS)} with --gin.INITIAL_CHECKPOINT_PATH)")


def record_config(model_dir: str, text: str, resumed_step: int | None) -> None:
    """Write ``config.gin``; on a resume whose configuration changed, keep the earlier one as
    ``config.until_step_<step>.gin`` (the settings that trained the steps up to there)."""
    current = paths.join(model_dir, "config.gin")
    if resumed_step is not None and paths.isfile(current):
        before = paths.read_text(current)
        if before != text:
            kept, n = paths.join(model_dir, f"config.until_step_{resumed_step}.gin"), 1
            while paths.exists(kept):
                n += 1
                kept = paths.join(model_dir, f"config.until_step_{resumed_step}.{n}.gin")
            with atomic_open(kept, "w", encoding="utf-8") as handle:
                handle.write(before)
    with atomic_open(current, "w", encoding="utf-8") as handle:
        handle.write(text)


__all__ = ["ResumeMismatchError", "check_resume", "model_record", "record_config",
           "setting_changes", "tensor_changes"]
