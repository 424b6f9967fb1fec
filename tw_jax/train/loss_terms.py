"""Loss terms a method adds to the token loss: the one place a regulariser plugs into training.

The train step's loss is the mean token loss (:mod:`tw_jax.train.steps`); a method that adds a
term to it (EWC's pull towards the previous update's weights, LwF's KL to the previous update's
predictions) is a :class:`LossTerm` listed in the run's config (``TrainConfig.loss_terms``; gin:
``LOSS_TERMS = [@tw_jax.train.EWC()]``, bound to ``train`` and ``compile``). A term has

- a **state** made once, when a run starts from its initial checkpoint (not on a resume), from
  what the run starts with (:class:`TermContext`: the starting parameters, the run's batches):
  EWC's Fisher and anchor, LwF's frozen copy of the previous model. The state rides in the
  optimizer state's slot of the checkpoint (the step's ``opt_state`` is ``(optimizer state,
  {term name: term state})`` when a run has terms), so it is saved, sharded like the
  parameters it mirrors (:func:`~tw_jax.runtime.run_model.opt_state_shardings` matches by
  parameter path) and restored exactly on resume; a run without terms keeps today's layout;
- a **value** inside the compiled step, a scalar added to the token loss, so its gradient is
  XLA's and the optimizer (clipping included) sees one gradient, as the reference code's
  ``total_loss += weight * term``. The metrics log each term as ``<name>_loss`` beside
  ``loss``, which stays the token loss, comparable across methods.

A term's weight belongs to the term; at weight 0 a run trains as if it had none (the gradient
gains exact zeros). To add a term: a frozen dataclass with ``name``, ``abstract_state``,
``init_state`` and ``__call__`` in a module of its own, registered with gin in
:mod:`tw_jax.train.gin_config`, plus a method entry in :mod:`tw_jax.methods` and its gin file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import jax

from tw_jax.models import BaseModel
from tw_jax.runtime.score_step import Batch


@dataclasses.dataclass(frozen=True)
class TermContext:
    """What a term's state may be made from when a run starts.

    ``params``: the parameters the run starts from (the previous update's, for a lifelong
    update); ``trainable``: booleans like the params; ``batches(seed)``: the run's training
    stream from its first batch, drawn with ``seed`` (placed on the mesh); ``param_shardings``:
    where each parameter lives, for a state shaped like the parameters; ``seed``: the run's."""

    model: BaseModel
    params: Any
    trainable: Any
    batches: Callable[[int], Iterator[Batch]]
    param_shardings: Any
    seed: int
    # A term's state in the checkpoint the run starts from (the update before), by the term's
    # name, or None (online EWC carries its precision over); read only when asked.
    previous: Callable[[str], Any] = lambda name: None


class LossTerm(Protocol):
    """A term of the training loss (see the module docstring)."""

    name: str

    def abstract_state(self, abstract_params: Any) -> Any:
        """The state's shapes and dtypes (``jax.ShapeDtypeStruct`` leaves), for the step's
        compilation and a checkpoint's restore, before any state exists."""
        ...

    def init_state(self, context: TermContext) -> Any:
        """The state, made once when a run starts from its initial parameters."""
        ...

    def __call__(self, model: BaseModel, params: Any, state: Any, batch: Batch,
                 logits: jax.Array, weights: jax.Array) -> jax.Array:
        """The term's weighted value, for the run's ``model``, at ``params`` (frozen leaves already behind
        ``stop_gradient``) on ``batch``, given the run's ``logits`` and the loss ``weights`` of
        its tokens: a scalar added to the mean token loss."""
        ...


def extra_flops(terms: Sequence[Any], flops_per_step: float, steps: int) -> float:
    """Model FLOPs the terms add to a run of ``steps`` train steps of ``flops_per_step`` each
    (a term's optional ``extra_flops(flops_per_step, steps)``: EWC's precision batches, LwF's
    second forward pass), so an update's cost counts them."""
    return float(sum(getattr(term, "extra_flops", lambda f, s: 0.0)(flops_per_step, steps)
                     for term in terms))


def check_terms(terms: Sequence[Any]) -> tuple[LossTerm, ...]:
    """``terms`` as a tuple, each with a distinct ``name`` (the state's key and the metric's)."""
    terms = tuple(terms or ())
    names = [getattr(term, "name", None) for term in terms]
    for term, name in zip(terms, names, strict=True):
        if not isinstance(name, str) or not callable(getattr(term, "init_state", None)):
            raise TypeError(f"loss term {term!r} is not a LossTerm (name, abstract_state, "
                            f"init_state, __call__)")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"loss terms named {', '.join(repeated)} more than once")
    return terms


def like_params(abstract_params: Any) -> Any:
    """A state leaf per parameter, float32 as the optimizer's moments."""
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, jax.numpy.float32),
                        abstract_params)


def same_as_params(abstract_params: Any) -> Any:
    """A state leaf per parameter of its own shape and dtype (a copy of the parameters)."""
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype),
                        abstract_params)


def saved_states(initial_checkpoint: str | None) -> Callable[[str], Any]:
    """``previous(name)``: the state of the term ``name`` saved in ``initial_checkpoint`` (a
    tw_jax MODEL_DIR or step folder whose run had that term), as numpy arrays, else None (no
    checkpoint, a Hugging Face folder, a run without the term)."""

    def previous(name: str) -> Any:
        from tw_jax.io import paths
        from tw_jax.runtime import checkpoints

        if not initial_checkpoint or checkpoints.is_hf_folder(initial_checkpoint):
            return None
        folder = paths.join(checkpoints.step_folder(initial_checkpoint), "opt_state")
        if not paths.isdir(folder):
            return None
        return _find_state(checkpoints.read_tree(folder), name)

    return previous


def _find_state(tree: Any, name: str) -> Any:
    """The value under key ``name`` in the terms' dict of a restored ``(tx state, terms)``
    tree (orbax gives the tuple back as a list or a dict of indices)."""
    parts = list(tree.values()) if isinstance(tree, Mapping) else tree
    if isinstance(parts, (list, tuple)) and len(parts) == 2 and isinstance(parts[1], Mapping):
        return parts[1].get(name)
    return None
