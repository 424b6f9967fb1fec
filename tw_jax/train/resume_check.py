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

A start from ``INITIAL_CHECKPOINT_PATH`` (:func:`check_new_parameters`) may lack the new
parameters of a method (LoRA, K-Adapter, Modular: :func:`tw_jax.models.variants.is_new_parameter`),
which start fresh, as the log says. A parameter of the base model that it lacks (a checkpoint of
3 layers for a model of 4) would train a model part pretrained, part random without a word: a
:class:`NewParametersError` naming the first few, unless the run asks for them
(``--gin.ALLOW_NEW_PARAMETERS=True``).
"""

from __future__ import annotations

import logging
from typing import Any

from flax import traverse_util

from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.models.variants import is_new_parameter
from tw_jax.runtime.checkpoints import (
    CHECKPOINTS,
    model_record,
    saved_meta,
    setting_changes,
)

log = logging.getLogger(__name__)

_SHOWN = 6  # differing tensors named in the error (the count says how many in all)


class ResumeMismatchError(ValueError):
    """The model asked for does not fit the checkpoints MODEL_DIR holds."""


class NewParametersError(ResumeMismatchError, UsageError):
    """A start from ``INITIAL_CHECKPOINT_PATH`` that would initialise parameters of the base
    model from scratch, which the run did not ask for (``ALLOW_NEW_PARAMETERS``). A
    :class:`~tw_jax.errors.UsageError`: every command prints it as one line, exit 2."""


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


def _listed(names: list[str], limit: int = 5) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def check_new_parameters(source: str, missing: list[str], *, allowed: bool) -> None:
    """What a start from the checkpoint ``source`` initialises from scratch (``missing``:
    parameter paths): a method's new parameters are expected; any of the base model is a
    :class:`NewParametersError` naming the first few, unless ``allowed`` (then a warning)."""
    base = sorted(name for name in missing if not is_new_parameter(name.split("/")))
    if not base:
        return
    if allowed:
        log.warning("%s: ALLOW_NEW_PARAMETERS: %d parameter(s) of the base model start from "
                    "scratch: %s", source, len(base), _listed(base, len(base)))
        return
    raise NewParametersError(
        f"{source}: lacks {len(base)} parameter(s) of the base model, which would start from "
        f"scratch: {_listed(base)}; the checkpoint holds another or a smaller model than MODEL "
        "(a method's new LoRA / K-Adapter / Modular parameters are expected, these are not). "
        "Start from a checkpoint of this model, or initialise them with "
        "--gin.ALLOW_NEW_PARAMETERS=True")


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


__all__ = ["NewParametersError", "ResumeMismatchError", "check_new_parameters", "check_resume",
           "model_record", "record_config", "setting_changes", "tensor_changes"]
