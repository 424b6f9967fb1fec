"""Schedule-free AdamW's evaluation point, wherever its state sits in an optimizer state.

Schedule-free training (Defazio et al., "The Road Less Scheduled", 2024; ``optax.contrib.
schedule_free``) keeps three sequences: ``z`` (the base optimizer's iterate, in the state), ``y``
(where gradients are taken: the **params** the step returns and a checkpoint stores) and ``x``
(the average: where the model is evaluated, ``x = (y - (1 - b1) z) / b1``). TiC-LM
(apple/ml-tic-lm, ``training/open_lm.patch``, ``save_checkpoint``) calls ``optimizer.eval()``
before saving, so its checkpoints, the starting point of the next month and every evaluation,
hold ``x``.

:func:`eval_params` gives ``x`` for an optimizer state of any shape the trainer builds
(:mod:`tw_jax.train.optimizers`): the schedule-free state may sit inside ``optax.MultiSteps``
(accumulation), a chain (clipping) and the freezing partition (whose inner params hold
``optax.MaskedNode`` where leaves are frozen: those come back unchanged), or beside loss-term
states. Without a schedule-free state the params come back as they are, so callers need not ask
which optimizer ran.
"""

from __future__ import annotations

from typing import Any

import jax
import optax
from optax.contrib import ScheduleFreeState

__all__ = ["eval_params", "schedule_free_states"]


def _is_state(node: Any) -> bool:
    return isinstance(node, ScheduleFreeState)


def _is_masked(node: Any) -> bool:
    return isinstance(node, optax.MaskedNode)


def schedule_free_states(opt_state: Any) -> list[ScheduleFreeState]:
    """Every ``ScheduleFreeState`` in ``opt_state``, in tree order (none: an empty list)."""
    nodes = jax.tree.leaves(opt_state, is_leaf=_is_state)
    return [node for node in nodes if _is_state(node)]


def eval_params(opt_state: Any, params: Any) -> Any:
    """The params to evaluate, save as the result of training, or start the next update from:
    ``optax.contrib.schedule_free_eval_params`` applied with each schedule-free state found in
    ``opt_state`` to the leaves it covers; ``params`` unchanged when there is none.

    ``params`` is the training iterate ``y`` the train step returns with ``opt_state``. Pure
    and traceable (``jax.jit`` it with the params' shardings for big models).
    """
    # optax.contrib.schedule_free_eval_params, leaf by leaf:
    return _leafwise(opt_state, params, lambda y, z, b1: (y - (1.0 - b1) * z) / b1)


def _leafwise(opt_state: Any, params: Any, fn: Any) -> Any:
    """``fn(leaf, z, b1)`` on the leaves each schedule-free state of ``opt_state`` covers; a
    leaf masked there (frozen, or another state's) is left as it is."""
    for state in schedule_free_states(opt_state):
        b1 = state.b1

        def one(z: Any, leaf: Any, b1: Any = b1) -> Any:
            return leaf if _is_masked(z) else fn(leaf, z, b1)

        params = jax.tree.map(one, state.z, params, is_leaf=_is_masked)
    return params


# What a checkpoint's meta says when its params are the evaluation point x (the trainer's last
# checkpoint of a schedule-free run, as TiC-LM saves), not the training iterate y.
EVAL_POINT = "schedule_free_x"


def train_params(opt_state: Any, params: Any) -> Any:
    """The inverse of :func:`eval_params`: the training iterate ``y = b1 · x + (1 − b1) · z``
    from the evaluation point ``x``, to continue training from a checkpoint that holds ``x``
    (exact up to rounding); ``params`` unchanged without a schedule-free state."""
    return _leafwise(opt_state, params, lambda x, z, b1: b1 * x + (1.0 - b1) * z)
