"""The real T5X runs tw_jax's models on tw_jax's tasks (``python -m t5x.train``, ``t5x.eval``,
``t5x.infer``, ``t5x.main``); see ``docs/t5x.md``.

T5X is imported only when one of the names below is first used (``bash tools/setup.sh t5x``
installs it), so ``tw-jax``'s own commands, ``tw-jax t5x-checkpoint`` included, never load it.
``gin/t5x/*.gin`` import :mod:`tw_jax.t5x.configurables`, which registers these names with gin
(``tw_jax.t5x.model`` ...) and tw_jax's own (model configs and variants,
the optimizer configs ``tw_jax.train.AdamWConfig`` ..., ``make_schedule``, ``tw_jax.tasks``):

- :func:`model` — T5X's ``EncoderDecoderModel`` / ``DecoderOnlyModel`` of a tw_jax config
  (:mod:`tw_jax.t5x.models`);
- :func:`logical_axis_rules` — our sharding table on T5X's mesh (:mod:`tw_jax.t5x.partitioning`);
- :func:`optax_optimizer`, :func:`learning_rate_fn`, :func:`adafactor`, :func:`factor_rules` —
  optimizers and freezing (:mod:`tw_jax.t5x.optimizers`);
- :func:`task_name`, :func:`task_vocabulary` — a task's name with ``{objective}`` resolved, and
  its vocabulary, registering the data folder's tasks;
- :mod:`tw_jax.t5x.checkpoints` — checkpoints both ways (``tw-jax t5x-checkpoint``).
"""

from __future__ import annotations

from typing import Any

_LAZY = ("DecoderOnlyModel", "EncoderDecoderModel", "FeatureConverter", "adafactor",
         "factor_rules", "learning_rate_fn", "logical_axis_rules", "model", "optax_optimizer",
         "task_name", "task_vocabulary", "trainable_traversal")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from tw_jax.t5x import configurables

        return getattr(configurables, name)
    raise AttributeError(f"module 'tw_jax.t5x' has no attribute {name!r}")


__all__ = list(_LAZY)
