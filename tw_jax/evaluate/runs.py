"""A run loaded for evaluation: its model, mesh and parameters, in one call.

Every evaluator needs the same thing: the model a checkpoint belongs to, placed on a mesh, with
its parameters. A checkpoint is a MODEL_DIR (the latest step, or ``step``), a step folder, or a
Hugging Face folder (``config.json`` + safetensors), local or ``gs://``. The model comes from
the gin files that built the run (their ``MODEL`` and ``MESH_SHAPE``), or from the Hugging Face
folder's own ``config.json``. Parameters are restored straight into this mesh's shardings,
whatever mesh or host count wrote them (:func:`tw_jax.runtime.checkpoints.initial_params`).

A step records the settings of the model it trained (``meta["model"]``); a configuration that
builds the same parameters but another model (``GPT2Config.activation='relu'`` over the run's own
``config.gin``) would score that other model without a word, so a difference is a
:class:`TrainedSettingsError` naming the settings, before any tensor is read (tensors of other
shapes are named by the restore, with both shapes). Settings that change how a model trains or
is stored, never what it scores (dropout, initialisers, rematerialisation, freezing, compute and
parameter dtypes), may differ.

    with loaded_run(ModelSource(model_dir="gs://b/run", gin_files=["kadapter.gin"])) as run:
        run.model.score(run.params, batch)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from flax import traverse_util

from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.io.paths import PathLike
from tw_jax.models import families_by_type, model_for
from tw_jax.models.hf_io import read_config
from tw_jax.models.sharding import activate
from tw_jax.runtime import checkpoints, gin_setup
from tw_jax.runtime.run_model import RunModel, build_run_model

# Settings free to differ between the model a step trained and the one that scores it: how it
# trains (dropout, initialisers, rematerialisation, freezing) or its precision, not what it is.
SCORE_NEUTRAL_SETTINGS = frozenset({
    "dropout_rate", "attention_dropout", "activation_dropout", "initializer_range",
    "initializer_factor", "init_std", "init_stddev", "remat", "freeze", "dtype", "param_dtype"})


class TrainedSettingsError(UsageError):
    """A step evaluated with another model than it trained: a one-line error naming the
    settings (recorded → given) and what to do; the CLI exits 2."""


def _shapes(tree: Any) -> dict[str, tuple[int, ...]]:
    return {name: tuple(leaf.shape)
            for name, leaf in traverse_util.flatten_dict(tree, sep="/").items()}


def check_model_settings(step_dir: str, config: Any, abstract_params: Any = None) -> None:
    """Refuse to score the step ``step_dir`` with ``config`` when a setting that changes what
    the model computes differs from those the step records; a step without a record (saved by
    an older tw_jax, converted from T5X) is not checked. When ``abstract_params`` (the model's
    tree) differs from the step's in its tensors, the restore names them, tensor and shapes,
    instead."""
    recorded = (checkpoints.saved_meta(step_dir) or {}).get("model")
    if not isinstance(recorded, dict):
        return
    if abstract_params is not None and _shapes(checkpoints.saved_params(step_dir)) != _shapes(
            abstract_params):
        return
    changes = [(name, old, new) for name, old, new in
               checkpoints.setting_differences(recorded, checkpoints.model_record(config))
               if name.rsplit(".", 1)[-1] not in SCORE_NEUTRAL_SETTINGS]
    if not changes:
        return
    said = ", ".join(f"{name} {old!r} → {new!r}".replace("'", "") for name, old, new in changes)
    raise TrainedSettingsError(
        f"{step_dir}: was trained with other model settings than this configuration gives "
        f"({said}; recorded → given), so it would score another model than it trained; "
        "evaluate it with its own settings (--gin.MODEL_DIR=DIR and no --gin_file reads the "
        "run's DIR/config.gin; leave out the bindings that change them)")


@dataclass
class ModelSource:
    """A Hugging Face folder (``hf_dir``), or a MODEL_DIR / step folder (``model_dir``) with the
    gin files that built its model; ``step`` picks a step of a MODEL_DIR (default: the latest)."""

    hf_dir: str | None = None
    model_dir: str | None = None
    gin_files: list[str] = field(default_factory=list)
    gin_bindings: list[str] = field(default_factory=list)
    gin_search_paths: list[str] = field(default_factory=list)
    step: int | None = None


@dataclass
class LoadedRun:
    """The run's model object and mesh (:class:`~tw_jax.runtime.run_model.RunModel`), its parameters
    in the mesh's shardings, and the step they are from (None for a Hugging Face folder)."""

    run: RunModel
    params: Any
    step: int | None

    @property
    def model(self) -> Any:
        return self.run.model

    @property
    def module(self) -> Any:
        return self.run.module


def model_from_gin(
    gin_files: Sequence[str], bindings: Sequence[str] = (), search_paths: Sequence[str] = ()
) -> tuple[Any, tuple[int, ...] | None]:
    """``(MODEL, MESH_SHAPE or None)`` of a run's gin files (they replace any gin state)."""
    if not gin_files:
        raise gin_setup.GinConfigError("a MODEL_DIR needs the gin files that built its model")
    gin_setup.parse(gin_files, bindings, search_paths)
    mesh = gin_setup.macro("MESH_SHAPE")
    return gin_setup.model_config(), (tuple(mesh) if mesh is not None else None)


def model_from_hf(folder: str) -> Any:
    """The model config of a Hugging Face folder, from its ``config.json``."""
    hf = read_config(folder)
    family = families_by_type().get(hf.get("model_type"))
    if family is None:
        raise checkpoints.CheckpointError(
            f"{folder}: model_type {hf.get('model_type')!r} is not one of "
            f"{sorted(families_by_type())}")
    return family.config_class.from_hf_config(hf)


def load_params(
    run: RunModel, model_dir: PathLike | None, checkpoint_path: str | None = None,
    step: int | None = None,
) -> tuple[Any, int | None]:
    """``(params, step)`` from ``checkpoint_path``, else MODEL_DIR's step ``step`` (default: the
    latest), placed in the run's shardings. A parameter the checkpoint lacks is an error."""
    source = checkpoint_path or model_dir
    if source is None:
        raise ValueError("pass model_dir or checkpoint_path")
    source = paths.resolve(source)
    if step is not None and checkpoint_path is None:
        source = paths.join(source, checkpoints.CHECKPOINTS, str(step))
    found_step = None
    if not checkpoints.is_hf_folder(source):
        try:
            found = checkpoints.step_folder(source)
        except (checkpoints.CheckpointError, OSError) as error:
            raise checkpoints.CheckpointError(f"{source}: no checkpoint to evaluate") from error
        name = found.rstrip("/").rsplit("/", 1)[-1]
        found_step = int(name) if name.isdigit() else None
        check_model_settings(found, run.config, run.abstract_params)
    merged, missing = checkpoints.initial_params(
        lambda: run.init_params(0), source, run.abstract_params
    )
    if missing:
        raise checkpoints.CheckpointMismatchError(
            f"{source}: the checkpoint lacks {len(missing)} parameters of this model "
            f"({', '.join(missing[:5])}...); is the gin config the one it was trained with?"
        )
    return merged, found_step


def _checkpoint(source: ModelSource) -> str:
    checkpoint = source.hf_dir if source.hf_dir is not None else source.model_dir
    if checkpoint is None:
        raise ValueError("pass a Hugging Face folder or a MODEL_DIR")
    return checkpoint


def source_config(source: ModelSource) -> tuple[Any, tuple[int, ...] | None]:
    """``(model config, mesh shape or None)`` of a source, before loading."""
    _checkpoint(source)
    if source.hf_dir is not None:
        return model_from_hf(source.hf_dir), None
    return model_from_gin(source.gin_files, source.gin_bindings, source.gin_search_paths)


@contextlib.contextmanager
def loaded_run(
    source: ModelSource, config: Any | None = None, mesh_shape: Sequence[int] | None = None,
    *, objective: str | None = None, why: str = "",
) -> Iterator[LoadedRun]:
    """The run of ``source``, inside its mesh while the block runs (logical constraints on):
    the one loader of every evaluator and benchmark.

    ``config`` and ``mesh_shape``, when given, replace what the source would say (a caller that
    already parsed the gin files). ``objective``, when given, is the one the caller's tasks are
    for (``ssm``: T5's salient span masking): a model of another objective is a ValueError
    ending with ``why``, before any checkpoint is read.
    """
    checkpoint = _checkpoint(source)  # load_params makes it absolute, as orbax needs
    if config is None:
        config, mesh_shape = source_config(source)
    if objective is not None and model_for(config).objective != objective:
        where = source.hf_dir or "the gin files"
        raise ValueError(f"{where}: {why or 'the tasks'} are for a model of objective "
                         f"{objective!r}, not {model_for(config).objective!r} "
                         f"({type(config).__name__})")
    run = build_run_model(config, mesh_shape or (-1, 1, 1))
    with activate(run.mesh):
        params, step = load_params(run, checkpoint, step=source.step)
        yield LoadedRun(run, params, step)
