"""tw_jax's one table of logical axis rules, translated onto T5X's ``(data, model)`` mesh.

tw_jax shards over a ``(data, fsdp, model)`` mesh (:data:`tw_jax.models.sharding.LOGICAL_AXIS_RULES`);
T5X's ``PjitPartitioner`` builds a ``(data, model)`` mesh and takes ``logical_axis_rules`` over
those two axes. The translation keeps ``model`` and ``data`` and maps ``fsdp`` onto ``data`` when
parameters are to be sharded over the data axis too (T5X's ``parameter_partitioning_dims=2``,
i.e. FSDP/ZeRO-3), or drops it (parameters replicated over ``data``, T5X's default). A mesh axis
is never used twice for one logical name. Every logical name our modules emit has a rule, so
nothing is replicated for want of one (``tests/t5x/test_axis_names.py`` lists them all).

Gin: ``partitioning.PjitPartitioner.logical_axis_rules = @tw_jax.t5x.logical_axis_rules()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tw_jax.models.sharding import LOGICAL_AXIS_RULES, axis_rules

T5X_MESH_AXES = ("data", "model")


def translate_rules(
    rules: Sequence[tuple[str, Any]], *, parameter_partitioning_dims: int = 1
) -> list[tuple[str, str | tuple[str, ...] | None]]:
    """``rules`` over ``(data, fsdp, model)`` as rules over T5X's ``(data, model)`` mesh:
    ``fsdp`` becomes ``data`` when ``parameter_partitioning_dims`` is 2, else it is dropped."""
    if parameter_partitioning_dims not in (1, 2):
        raise ValueError(f"parameter_partitioning_dims must be 1 or 2, got "
                         f"{parameter_partitioning_dims}")
    out = []
    for name, axes in rules:
        given = axes if isinstance(axes, tuple | list) else (axes,)
        mapped: list[str] = []
        for axis in given:
            if axis == "fsdp":
                axis = "data" if parameter_partitioning_dims == 2 else None
            if axis is not None and axis not in mapped:
                mapped.append(axis)
        out.append((name, None if not mapped else mapped[0] if len(mapped) == 1
                    else tuple(mapped)))
    return out


def logical_axis_rules(
    parameter_partitioning_dims: int = 1,
    rules: Sequence[tuple[str, Any]] | None = None,
) -> list[tuple[str, str | tuple[str, ...] | None]]:
    """T5X's ``logical_axis_rules`` for tw_jax's modules: the table in force (gin's
    ``tw_jax.models.axis_rules`` or :data:`LOGICAL_AXIS_RULES`) translated by
    :func:`translate_rules`."""
    table = axis_rules() if rules is None else rules
    return translate_rules(table, parameter_partitioning_dims=parameter_partitioning_dims)


__all__ = ["LOGICAL_AXIS_RULES", "T5X_MESH_AXES", "logical_axis_rules", "translate_rules"]
