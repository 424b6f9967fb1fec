"""Model, mesh and sharded parameters of a run: what training, evaluation and inference share.

Parameters are created boxed with logical axis names; the boxed abstract tree (``jax.eval_shape``)
gives each parameter's ``NamedSharding`` through the rules table, and the optimizer sees the
unboxed arrays. Optimizer-state shardings follow the parameters: a state leaf whose path ends
with a parameter's path and has that parameter's shape (Adam's moments, RecAdam's anchor,
accumulators, unfactored second moments) is sharded like it; anything else (step counts,
Adafactor's factored row/column statistics, 2-D views) is small and replicated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from tw_jax.models import BaseModel, abstract_variables, model_for
from tw_jax.models.sharding import activate, make_mesh, mesh_shardings, replicated
from tw_jax.models.variants import path_names


@dataclasses.dataclass
class RunModel:
    """A model (:class:`tw_jax.models.BaseModel`) with its mesh and the shardings of its
    parameters."""

    model: BaseModel
    mesh: jax.sharding.Mesh
    param_shardings: Any
    abstract_params: Any  # unboxed ShapeDtypeStructs with shardings
    rules: tuple[tuple[str, Any], ...] | None = None  # None: the table in force (gin's)

    def activate(self) -> Any:
        """The run's mesh and sharding table made current (:func:`~tw_jax.models.sharding.activate`)."""
        return activate(self.mesh, self.rules)

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def module(self) -> nn.Module:
        return self.model.module

    def init_params(self, seed: int) -> Any:
        """Fresh parameters, created directly in their shardings."""

        def init(rng: jax.Array) -> Any:
            return nn.unbox(self.module.init(rng, *self.model.dummy_inputs())["params"])

        with self.activate():
            return jax.jit(init, out_shardings=self.param_shardings)(jax.random.key(seed))

    def place(self, params: Any) -> Any:
        """Host or device parameters moved into the run's shardings, in the param dtype."""
        return jax.tree.map(
            lambda x, a: jax.device_put(jnp.asarray(x, a.dtype), a.sharding),
            params, self.abstract_params,
        )


def build_run_model(
    config: Any, mesh_shape: Sequence[int] = (-1, 1, 1),
    devices: Sequence[jax.Device] | None = None,
    rules: Sequence[tuple[str, Any]] | None = None,
) -> RunModel:
    """Model, ``(data, fsdp, model)`` mesh and parameter shardings for ``config``, over
    ``devices`` (default: every device of the run; ``tw-jax compile`` passes a TPU topology's),
    through the sharding table ``rules`` (None: the table in force)."""
    mesh = make_mesh(tuple(mesh_shape), devices=devices)
    boxed = abstract_variables(config)["params"]
    table = None if rules is None else tuple(rules)
    shardings = mesh_shardings(boxed, mesh, table)
    abstract = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), nn.unbox(boxed), shardings
    )
    return RunModel(model_for(config), mesh, shardings, abstract, table)


def opt_state_shardings(abstract_state: Any, run: RunModel) -> Any:
    """Shardings of an optimizer state: like the parameter it mirrors, else replicated."""
    by_path: dict[tuple[str, ...], Any] = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(run.abstract_params)[0]:
        by_path[path_names(path)] = leaf
    longest = max((len(p) for p in by_path), default=0)
    whole = replicated(run.mesh)

    def choose(path: Any, leaf: Any) -> Any:
        names = path_names(path)
        for size in range(min(longest, len(names)), 0, -1):
            param = by_path.get(names[-size:])
            if param is not None:
                return param.sharding if tuple(param.shape) == tuple(leaf.shape) else whole
        return whole

    return jax.tree_util.tree_map_with_path(choose, abstract_state)


def with_shardings(abstract: Any, shardings: Any) -> Any:
    return jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings
    )
