"""Logical axis names and the one table that maps them onto a ``(data, fsdp, model)`` mesh.

Every parameter is created with logical axis names (``nn.with_logical_partitioning``) and every
main activation is constrained with them (``nn.with_logical_constraint``). Which mesh axis a logical
name lands on is decided here, in :data:`LOGICAL_AXIS_RULES`, and nowhere else: a 1-device CPU mesh,
an 8-device forced-host CPU mesh and a TPU pod run the same model code with the same table.
A run may replace the table from gin, as T5X's ``logical_axis_rules`` (:func:`axis_rules`):
``axis_rules.rules = [('batch', ('data', 'fsdp')), ('embed', None), ...]``.

Flax resolves a tensor's names rule by rule, in table order, and never uses a mesh axis twice in one
tensor; so ``batch`` comes first, and activations use their own ``activation_*`` names so that
e.g. the hidden size of an activation stays unsharded while the same dimension of a weight is
sharded over ``fsdp``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import flax.linen as nn
import gin
import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES: tuple[str, str, str] = ("data", "fsdp", "model")

# (logical name, mesh axis or axes or None). Order matters: earlier rules win.
LOGICAL_AXIS_RULES: tuple[tuple[str, str | tuple[str, ...] | None], ...] = (
    # Activations.
    ("batch", ("data", "fsdp")),
    ("length", None),
    ("activation_embed", None),
    ("activation_mlp", "model"),
    ("activation_heads", "model"),
    ("activation_kv_heads", "model"),  # grouped-query keys/values: ('...', None) if too few
    ("activation_kv", None),
    ("activation_vocab", "model"),
    # Parameters.
    ("vocab", "model"),
    ("embed", "fsdp"),
    ("mlp", "model"),
    ("heads", "model"),
    ("kv_heads", "model"),
    ("kv", None),
    ("joined_kv", "model"),
    ("position", None),
    ("norm", None),
    ("layers", None),
    ("lora_rank", None),
    ("modular_embed", None),
)

LogicalRules = Sequence[tuple[str, str | tuple[str, ...] | None]]


@gin.configurable(module="tw_jax.models")
def axis_rules(rules: LogicalRules = LOGICAL_AXIS_RULES) -> tuple[tuple[str, Any], ...]:
    """The table in force: :data:`LOGICAL_AXIS_RULES` unless gin binds
    ``axis_rules.rules``. Every helper below that takes no ``rules`` uses it.

    A rule's mesh axes may be given as a list (gin has no tuple-only syntax); a mesh axis name
    that is not one of :data:`MESH_AXES` is an error here, not deep inside Flax.
    """
    table = []
    for rule in rules:
        if len(rule) != 2 or not isinstance(rule[0], str):
            raise ValueError(f"axis_rules: {rule!r} is not (logical name, mesh axes)")
        name, axes = rule
        axes = tuple(axes) if isinstance(axes, list | tuple) else axes
        for axis in (axes if isinstance(axes, tuple) else (axes,)):
            if axis is not None and axis not in MESH_AXES:
                raise ValueError(f"axis_rules: {name!r} -> {axis!r}, which is not a "
                                 f"mesh axis {MESH_AXES}")
        table.append((name, axes))
    return tuple(table)


def _table(rules: LogicalRules | None) -> tuple[tuple[str, Any], ...]:
    """``rules``, else the table :func:`activate` made current (a run's own), else gin's."""
    if rules is not None:
        return tuple(rules)
    return tuple(nn.get_logical_axis_rules()) or axis_rules()


def make_mesh(
    shape: Sequence[int] = (-1, 1, 1),
    axis_names: Sequence[str] = MESH_AXES,
    devices: Sequence[jax.Device] | None = None,
) -> Mesh:
    """Build a mesh over the available devices; one ``-1`` in ``shape`` takes what is left.

    ``make_mesh((-1, 1, 1))`` is pure data parallelism over every device, ``make_mesh((1, -1, 2))``
    FSDP with two-way tensor parallelism. The axes are ``Auto`` so that the compiler propagates
    shardings between the constraints the model states.

    Several TPU slices (devices with distinct ``slice_index``, joined by the data-centre network):
    ``shape`` describes one slice, and the first axis (``data``) is repeated across slices, as
    only data parallelism suits the slow links between them. TPU devices are laid out by
    ``mesh_utils`` along the chips' physical links; other devices keep their order.
    """
    devices = list(jax.devices() if devices is None else devices)
    slices = len({getattr(d, "slice_index", None) for d in devices})
    per_slice = len(devices) // slices
    shape = list(shape)
    if len(shape) != len(axis_names):
        raise ValueError(f"mesh shape {shape} does not match axis names {tuple(axis_names)}")
    if shape.count(-1) > 1:
        raise ValueError(f"at most one -1 in mesh shape {shape}")
    where = f" of each of the {slices} slices" if slices > 1 else ""
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if per_slice % known:
            raise ValueError(
                f"the {per_slice} devices{where} do not divide into mesh shape {shape}"
            )
        shape[shape.index(-1)] = per_slice // known
    if math.prod(shape) != per_slice:
        raise ValueError(
            f"mesh shape {shape} needs {math.prod(shape)} devices, have {per_slice}{where}"
        )
    if slices > 1:
        from jax.experimental import mesh_utils

        dcn = [slices] + [1] * (len(shape) - 1)
        grid = mesh_utils.create_hybrid_device_mesh(shape, dcn, devices)
    elif devices[0].platform == "tpu":
        from jax.experimental import mesh_utils

        grid = mesh_utils.create_device_mesh(shape, devices, allow_split_physical_axes=True)
    else:
        grid = np.asarray(devices, dtype=object).reshape(shape)
    return Mesh(grid, tuple(axis_names), axis_types=(AxisType.Auto,) * len(axis_names))


@contextlib.contextmanager
def activate(mesh: Mesh, rules: LogicalRules | None = None) -> Iterator[Mesh]:
    """Make ``mesh`` and ``rules`` current, so logical constraints inside the model take effect.

    Outside this context ``nn.with_logical_constraint`` is a no-op, which is what single-device
    tests and tools want.
    """
    with jax.set_mesh(mesh), nn.logical_axis_rules(_table(rules)):
        yield mesh


def logical_specs(abstract_variables: Any) -> Any:
    """Logical ``PartitionSpec`` of every leaf of a (boxed) variable tree, e.g. from eval_shape."""
    return nn.get_partition_spec(abstract_variables)


def mesh_shardings(
    abstract_variables: Any, mesh: Mesh, rules: LogicalRules | None = None
) -> Any:
    """``NamedSharding`` of every leaf of a boxed variable tree, through the rules table.

    ``abstract_variables`` is typically ``jax.eval_shape(model.init, ...)``: nothing is allocated
    to learn where each parameter will live.
    """
    return nn.logical_to_mesh_sharding(logical_specs(abstract_variables), mesh, _table(rules))


def replicated(mesh: Mesh) -> NamedSharding:
    """A sharding that keeps a full copy on every device (scalars, small inputs)."""
    return NamedSharding(mesh, PartitionSpec())


def batch_sharding(mesh: Mesh, ndim: int, rules: LogicalRules | None = None) -> NamedSharding:
    """Sharding of a ``(batch, ...)`` input array: batch split as the rules say, the rest whole."""
    logical = PartitionSpec("batch", *([None] * (ndim - 1)))
    return nn.logical_to_mesh_sharding(logical, mesh, _table(rules))


def batch_shards(mesh: Mesh, rules: LogicalRules | None = None) -> int:
    """Into how many pieces the rules split a batch's rows on ``mesh`` (data x fsdp)."""
    axes = batch_sharding(mesh, 1, rules).spec[0]
    if axes is None:
        return 1
    axes = axes if isinstance(axes, tuple) else (axes,)
    return math.prod(int(mesh.shape[axis]) for axis in axes)


def padded_rows(rows: int, mesh: Mesh) -> int:
    """``rows`` rounded up to a multiple of :func:`batch_shards`: the rows a step computes."""
    shards = batch_shards(mesh)
    return -(-rows // shards) * shards


def global_batch(batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
    """A global batch (the same numpy rows on every host) as arrays sharded over the mesh's
    batch axes: each device takes its own rows, whichever host it is on.

    A batch whose rows do not divide over the batch shards (CKL's 60 on 16 chips) gets all-zero
    rows appended up to :func:`padded_rows`: their masks and loss weights are 0, so losses,
    gradients and token counts are those of the real rows (callers slice scores per row).
    """
    placed = {}
    for key, value in batch.items():
        target = padded_rows(value.shape[0], mesh)
        if target != value.shape[0]:
            pad = np.zeros((target - value.shape[0], *value.shape[1:]), value.dtype)
            value = np.concatenate([value, pad])
        placed[key] = jax.make_array_from_callback(
            value.shape, batch_sharding(mesh, value.ndim), lambda index, value=value: value[index]
        )
    return placed
