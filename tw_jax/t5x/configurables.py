"""What the gin files under ``gin/t5x/`` bind T5X's scripts to, registered with gin under
``tw_jax.t5x.*`` (importing this module imports T5X; ``tw_jax.t5x`` gives these names lazily).
Importing it also makes tw_jax's own gin names known (model configs and variants,
the optimizer configs ``tw_jax.train.AdamWConfig`` ..., ``make_schedule``, ``tw_jax.tasks``)."""


from __future__ import annotations

from typing import Any

from tw_jax.runtime.gin_setup import register_configurables
from tw_jax.t5x.models import DecoderOnlyModel, EncoderDecoderModel, FeatureConverter, model
from tw_jax.t5x.optimizers import (
    adafactor,
    factor_rules,
    learning_rate_fn,
    optax_optimizer,
    trainable_traversal,
)
from tw_jax.t5x.partitioning import logical_axis_rules

register_configurables()


def task_name(name: str, model_config: Any, use_cached: bool = False) -> str:
    """``name`` with ``{objective}`` made the model's (``ssm`` for T5, ``lm`` for GPT-2), as
    ``tw-jax train`` reads the method files' defaults (``twiki_mixreview_0809_{objective}``);
    the data folder's tasks are registered first (``$TW_JAX_DATA_DIR`` or gin's
    ``tw_jax.tasks.register_all``) and an unknown name is an error naming the closest ones.
    With ``use_cached`` (``USE_CACHED_TASKS``) a missing or stale cache is a one-line error
    naming the command that builds it, before T5X asks seqio for the data."""
    import tw_jax.tasks
    from tw_jax.runtime.task_data import task_name as resolved
    from tw_jax.tasks.cache import check_cached

    name = resolved(name, model_config)
    tw_jax.tasks.require(name)
    if use_cached:
        check_cached(name)
    return name


def task_vocabulary(name: str, model_config: Any = None) -> Any:
    """The ``targets`` vocabulary of the task or mixture ``name`` (see :func:`task_name`)."""
    import seqio

    if model_config is not None:
        name = task_name(name, model_config)
    else:
        import tw_jax.tasks

        tw_jax.tasks.require(name)
    return seqio.get_mixture_or_task(name).output_features["targets"].vocabulary


def _register_with_gin() -> None:
    """tw_jax.t5x's builders under their import paths (``tw_jax.t5x.model``...), so gin files
    with and without dynamic registration name them alike."""
    import gin

    module = globals()
    for name in ("model", "optax_optimizer", "learning_rate_fn", "adafactor",
                 "logical_axis_rules", "task_name", "task_vocabulary"):
        module[name] = gin.configurable(module[name], module="tw_jax.t5x")


_register_with_gin()

__all__ = [
    "DecoderOnlyModel",
    "EncoderDecoderModel",
    "FeatureConverter",
    "adafactor",
    "factor_rules",
    "learning_rate_fn",
    "logical_axis_rules",
    "model",
    "optax_optimizer",
    "task_name",
    "task_vocabulary",
    "trainable_traversal",
]
