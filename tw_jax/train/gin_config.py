"""The trainer's gin configurables, and the :class:`TrainConfig` the parsed gin files describe.

Importing this module registers ``train`` (T5X's name for the trainer's arguments:
``tw_jax.train.train.progress = False``), ``make_schedule``, the optimizer configs
(``AdafactorConfig``, ``AdamWConfig``, ``RecAdamConfig``, ``SGDConfig``) and ``compile``;
:func:`tw_jax.runtime.gin_setup.register_configurables` imports it before any gin file is parsed.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import gin

from tw_jax.models import families_by_type
from tw_jax.models.sharding import axis_rules
from tw_jax.models.variants import VARIANT_FIELDS
from tw_jax.runtime.gin_setup import (
    GinConfigError,
    register_configurables,
    with_model_settings,
)
from tw_jax.train import aot, optimizers, schedules  # noqa: F401  (aot: compile; optimizers: configs)
from tw_jax.train.config import NOT_GIN_FIELDS, GinRecord, TrainConfig
from tw_jax.train.ewc import EWC
from tw_jax.train.lwf import LwF

__all__ = ["train_config"]

gin.external_configurable(schedules.make_schedule, module="tw_jax.train")
for _term in (EWC, LwF):  # the loss terms (tw_jax.train.loss_terms)
    gin.external_configurable(_term, module="tw_jax.train")
gin.external_configurable(TrainConfig, name="train", module="tw_jax.train",
                          denylist=list(NOT_GIN_FIELDS))


def train_config() -> TrainConfig:
    """The run the parsed gin files describe, as a :class:`TrainConfig` that no longer reads gin:
    a gin-configured schedule function becomes the plain function with its bound parameters
    (``functools.partial``), the optimizer is its config (an old-style name becomes one, see
    :func:`tw_jax.train.optimizers.resolve`), the sharding table is resolved, and the parsed gin
    is recorded (:class:`~tw_jax.train.config.GinRecord`) for the run's MODEL_DIR. The model
    has the run's :class:`~tw_jax.models.ModelSettings` (through ``%MODEL``; applied here too
    when a gin file wires ``model_config`` past MODEL, so they are never dropped)."""
    register_configurables(input_pipeline=False)  # gin_setup.parse registered what it parsed
    try:
        config = gin.get_configurable("tw_jax.train.train")()
        optimizer = (optimizers.from_legacy(config.optimizer_fn)  # recorded before the configs
                     if config.optimizer_fn is not None else optimizers.resolve(config.optimizer))
        config = config.replace(optimizer=optimizer, optimizer_fn=None,
                                schedule_fn=_bound(config.schedule_fn))
        rules = axis_rules()  # called through gin, so the operative record lists the table
        bound = gin.get_bindings("tw_jax.train.train")
        model = with_model_settings(config.model_config)
    except GinConfigError as error:  # raised inside gin's call, which appends its trail
        raise GinConfigError(str(error).splitlines()[0]) from None
    except (ValueError, TypeError) as error:
        raise GinConfigError(f"gin: {str(error).splitlines()[0]}") from None
    if model != config.model_config:  # so the record does not list the settings as changes
        bound = {**bound, "model_config": model}
        config = config.replace(model_config=model)
    if bound.get("optimizer_fn") is None:
        _check_no_flat_optimizer_bindings()
    _check_variants(config.model_config)
    record = GinRecord(gin.config_str(), gin.operative_config_str(), bound)
    return config.replace(axis_rules=rules, gin_record=record)


def _check_no_flat_optimizer_bindings() -> None:
    """``make_optimizer.recadam_gamma = …`` without ``optimizer_fn = @make_optimizer`` (an old
    gin file over the new base.gin) would change nothing: an error naming the new binding."""
    bound = gin.get_bindings(optimizers.make_optimizer)
    if bound:
        parameter = sorted(bound)[0]
        raise GinConfigError(
            f"gin: tw_jax.train.make_optimizer.{parameter} is bound but the optimizer is a "
            f"config now; {optimizers.flat_binding_moved(parameter)}")


def _check_variants(model_config: Any) -> None:
    """An old-style method file switches its variant on per model family (``T5Config.kadapter
    = ...`` and ``GPT2Config.kadapter = ...``; the shipped ones bind
    ``tw_jax.models.ModelSettings.kadapter`` once, which gin_setup checks against the run's
    model); a variant bound only for other families than the run's MODEL would silently train
    without it (``modular.gin`` on GPT-2)."""
    model_name = type(model_config).__name__  # gin's subclass of the config class keeps its name
    for family in families_by_type().values():
        other = family.config_class
        if isinstance(model_config, other):
            continue
        try:
            bound = gin.get_bindings(other)
        except ValueError:  # not a gin configurable
            continue
        for name in VARIANT_FIELDS:
            if bound.get(name) is not None and getattr(model_config, name, None) is None:
                has = any(f.name == name for f in dataclasses.fields(model_config))
                raise GinConfigError(
                    f"gin binds {other.__name__}.{name} (the {name} method) but the run's MODEL "
                    f"is a {model_name}, which "
                    + (f"is given none (the family may not support it; else bind "
                       f"{model_name}.{name} too)"
                       if has else f"has no {name} variant: pick another method or model"))


def _bound(fn: Any) -> Any:
    """``fn`` with gin's bindings applied now, when it is a gin configurable."""
    raw = getattr(fn, "__wrapped__", None)
    if raw is None or not callable(fn):
        return fn
    try:
        bindings = gin.get_bindings(fn)
    except ValueError:  # not a configurable after all
        return fn
    return functools.partial(raw, **bindings)
