"""A run loaded for evaluation: its model, mesh and parameters, in one call.

Every evaluator needs the same thing: the model a checkpoint belongs to, placed on a mesh, with
its parameters. A checkpoint is a MODEL_DIR (the latest step, or ``step``), a step folder, or a
Hugging Face folder (``config.json`` + safetensors), local or ``gs://``. The model comes from
the gin files that built the run (their ``MODEL`` and ``MESH_SHAPE``), or from the Hugging Face
folder's own ``config.json``. Parameters are restored straight into this mesh's shardings,
whatever mesh or host count wrote them (:func:`tw_jax.runtime.checkpoints.initial_params`).

    with loaded_run(ModelSource(model_dir="gs://b/run", gin_files=["kadapter.gin"])) as run:
        run.model.score(run.params, batch)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tw_jax.io import paths
from tw_jax.io.paths import PathLike
from tw_jax.models import families_by_type, model_for
from tw_jax.models.hf_io import read_config
from tw_jax.models.sharding import activate
from tw_jax.runtime import checkpoints, gin_setup
from tw_jax.runtime.run_model import RunModel, build_run_model


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
