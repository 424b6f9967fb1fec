"""The trainer's gin configurables, and the :class:`TrainConfig` the parsed gin files describe.

Importing this module registers ``train`` (T5X's name for the trainer's arguments:
``tw_jax.train.train.progress = False``), ``make_schedule``, ``make_optimizer`` and ``compile``;
:func:`tw_jax.runtime.gin_setup.register_configurables` imports it before any gin file is parsed.
"""

from __future__ import annotations

import functools
from typing import Any

import gin

from tw_jax.runtime.gin_setup import GinConfigError, register_configurables
from tw_jax.train import aot, optimizers, schedules  # noqa: F401  (aot declares ``compile``)
from tw_jax.train.config import TrainConfig

__all__ = ["train_config"]

gin.external_configurable(schedules.make_schedule, module="tw_jax.train")
gin.external_configurable(optimizers.make_optimizer, module="tw_jax.train")
gin.external_configurable(TrainConfig, name="train", module="tw_jax.train")


def train_config() -> TrainConfig:
    """The run the parsed gin files describe, as a :class:`TrainConfig` that no longer reads gin:
    a gin-configured optimizer or schedule function becomes the plain function with its bound
    parameters (``functools.partial``)."""
    register_configurables()
    try:
        config = gin.get_configurable("tw_jax.train.train")()
    except (ValueError, TypeError) as error:
        raise GinConfigError(f"gin: {str(error).splitlines()[0]}") from None
    return config.replace(optimizer_fn=_bound(config.optimizer_fn),
                          schedule_fn=_bound(config.schedule_fn))


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
