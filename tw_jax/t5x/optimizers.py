"""Optimizers for tw_jax's models under T5X: our optax chain through T5X's ``OptaxWrapper``, or
T5X's own Adafactor with factor rules for our axis names; both freeze what the method freezes.

- :func:`optax_optimizer` — ``tw-jax train``'s optimizer (a config of
  :mod:`tw_jax.train.optimizers`: Adafactor, AdamW, RecAdam or SGD, clipping, accumulation) and schedule
  (:func:`tw_jax.train.make_schedule` over ``total_steps``), freezing by the model's trainable
  predicate, wrapped in ``t5x.optimizers.OptaxWrapper``. T5X's ``learning_rate_fn`` is then only
  logged; :func:`learning_rate_fn` gives it the same schedule so the logs say what is applied.
- :func:`adafactor` — ``t5x.adafactor.Adafactor`` with :func:`factor_rules` (T5X's standard
  rules plus our names), applied through ``t5x.optimizers.MultiOptimizer`` to the trainable
  parameters only: the frozen ones get no update and no optimizer state.

T5X partitions an ``OptaxWrapper``'s state by rules per optax state type
(``OptaxStatePartitionRules._RULES``, the extension point its docstring names). Importing this
module adds rules for the states our chain makes that T5X does not know: optax's factored
Adafactor state (replicated: its row and column statistics have no parameter's shape), RecAdam's
anchor (the parameters' axes), and the ``as_matrices`` view, which keeps optax's own states.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import flax.traverse_util
import jax
import optax
from optax._src import factorized
from t5x import adafactor as t5x_adafactor
from t5x import optimizers as t5x_optimizers

from tw_jax.models import model_for
from tw_jax.models.variants import trainable_predicate
from tw_jax.train.freezing import FROZEN
from tw_jax.train.optimizers import resolve
from tw_jax.train.recadam import RecallState
from tw_jax.train.schedules import make_schedule

# Our logical axis names (tw_jax.models.sharding) as Adafactor factor dimensions: rows are the
# model width, columns the wide side; tables, norms and the low LoRA rank stay unfactored.
TW_JAX_FACTOR_RULES: dict[str, Any] = {
    "position": t5x_adafactor.FactorDim.NONE,
    "norm": t5x_adafactor.FactorDim.NONE,
    "lora_rank": t5x_adafactor.FactorDim.NONE,
    "modular_embed": t5x_adafactor.FactorDim.COLUMN,
}


def factor_rules() -> dict[str, Any]:
    """T5X's ``standard_logical_factor_rules()`` with tw_jax's names added."""
    return {**t5x_adafactor.standard_logical_factor_rules(), **TW_JAX_FACTOR_RULES}


def _freezes_anything(model_config: Any) -> bool:
    tw_model = model_for(model_config)
    params = tw_model.abstract_variables()["params"]
    labels = tw_model.param_labels(params)
    return any(label == FROZEN for label in jax.tree.leaves(labels))


def learning_rate_fn(schedule_fn: Callable[..., optax.Schedule] | None = None,
                     total_steps: int = 1) -> optax.Schedule:
    """The schedule :func:`optax_optimizer` applies (for T5X's ``Trainer.learning_rate_fn``,
    which only logs it under an ``OptaxWrapper``)."""
    make = schedule_fn or (lambda total_steps: make_schedule("constant", 1e-3, total_steps))
    return make(total_steps=int(total_steps))


def optax_optimizer(
    model_config: Any,
    total_steps: int,
    optimizer: Callable[..., optax.GradientTransformation] | None = None,
    schedule_fn: Callable[..., optax.Schedule] | None = None,
    accumulate_steps: int = 1,
) -> t5x_optimizers.OptaxWrapper:
    """``tw-jax train``'s optimizer for ``model_config`` as a T5X ``optimizer_def``:
    ``optimizer(schedule=..., labels=..., accumulate_steps=...)`` (gin's ``%OPTIMIZER``, an
    optimizer config such as ``@tw_jax.train.AdamWConfig()``; default Adafactor), the schedule
    over ``total_steps`` optimizer updates, and freezing by the model's trainable predicate when
    it freezes any parameter (as ``tw-jax train`` builds it)."""
    build = resolve(optimizer)
    updates = max(int(total_steps) // int(accumulate_steps), 1)
    schedule = learning_rate_fn(schedule_fn, updates)
    # The model's own labels, as a function: T5X hands the optimizer FrozenDicts of params.
    labels = model_for(model_config).param_labels if _freezes_anything(model_config) else None
    tx = build(schedule=schedule, labels=labels, accumulate_steps=accumulate_steps)
    return t5x_optimizers.OptaxWrapper(tx)


def trainable_traversal(model_config: Any) -> flax.traverse_util.Traversal:
    """The parameters ``model_config``'s method trains, as a T5X/Flax traversal."""
    trains = trainable_predicate(model_for(model_config).config)
    return flax.traverse_util.ModelParamTraversal(
        lambda path, _: trains(tuple(part for part in path.split("/") if part)))


def adafactor(model_config: Any, **adafactor_kwargs: Any) -> t5x_optimizers.MultiOptimizer:
    """T5X's Adafactor (``adafactor_kwargs`` are its own: ``decay_rate``, ``step_offset``,
    ``multiply_by_parameter_scale``...) with :func:`factor_rules`, on the trainable parameters
    of ``model_config``'s method."""
    adafactor_kwargs.setdefault("logical_factor_rules", factor_rules())
    base = t5x_adafactor.Adafactor(**adafactor_kwargs)
    return t5x_optimizers.MultiOptimizer([(trainable_traversal(model_config), base)])


def _replicated(state: Any, params_axes: Any) -> Any:
    del params_axes
    return jax.tree.map(lambda _: None, state)


def _recall_axes(state: RecallState, params_axes: Any) -> RecallState:
    return RecallState(
        count=None,
        anchor=t5x_optimizers.OptaxStatePartitionRules.derive_params_axes(state.anchor,
                                                                          params_axes))


def _partition_axes(state: Any, params_axes: Any) -> Any:
    derive = t5x_optimizers.OptaxStatePartitionRules.derive_optax_logical_axes
    return type(state)(**{name: derive(value, params_axes)
                          for name, value in state._asdict().items()})


_EXTRA_RULES: Mapping[type, Callable[[Any, Any], Any]] = {
    factorized.FactoredState: _replicated,
    RecallState: _recall_axes,
}


def register_state_rules() -> None:
    """Add our optax states to T5X's ``OptaxStatePartitionRules`` (idempotent)."""
    rules = t5x_optimizers.OptaxStatePartitionRules._RULES  # noqa: SLF001 (T5X's extension point)
    for state_type, rule in _EXTRA_RULES.items():
        rules.setdefault(state_type, rule)
    partition_state = getattr(optax.transforms, "PartitionState", None)
    if partition_state is not None:
        rules.setdefault(partition_state, _partition_axes)


register_state_rules()

__all__ = [
    "TW_JAX_FACTOR_RULES",
    "adafactor",
    "factor_rules",
    "learning_rate_fn",
    "optax_optimizer",
    "register_state_rules",
    "trainable_traversal",
]
