"""Freezing parameters by label: an optax partition whose frozen side holds no state.

A method (LoRA, K-Adapter, Modular) says which parameters train through a labels tree: the same
structure as the params, each leaf ``"trainable"`` or ``"frozen"`` (a prefix tree works too).
:func:`freeze` routes trainable leaves through the optimizer and frozen ones through
``optax.set_to_zero()``, via ``optax.transforms.partition``. The partition masks frozen leaves
out before the optimizer's ``init``, so they get no moments, no factored statistics, no RecAdam
anchor and no gradient accumulator (when accumulation sits inside, as the optimizer configs put
it): for a frozen T5-large encoder that is gigabytes not allocated. ``optax.masked`` alone would
not do: it passes unselected updates through unchanged instead of zeroing them.

Parameters: the trainer passes **unboxed** params (``nn.unbox(variables["params"])``), as the
models' own helpers return them, and keeps the logical partitioning of the boxed abstract tree for
shardings. Boxed ``nn.Partitioned`` trees work too (labels then sit where the boxes are, and the
optimizer state mirrors the boxes), but the boxes' axis names would then also label state arrays
of other shapes, such as Adafactor's factored rows and columns, so they cannot be trusted there.

Gradients of frozen leaves are still whatever the loss function computes; the optimizer discards
them. Taking ``jax.grad`` only with respect to the trainable subset saves that compute too and is
the training loop's business.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import optax

TRAINABLE = "trainable"
FROZEN = "frozen"
LABELS: tuple[str, str] = (TRAINABLE, FROZEN)


def _is_box(node: Any) -> bool:
    return isinstance(node, nn.meta.AxisMetadata)


def path_name(path: tuple[Any, ...]) -> str:
    """``"encoder/layers_0/attention/query/kernel"`` for a pytree key path of nested dicts."""
    parts = []
    for key in path:
        if isinstance(key, jax.tree_util.DictKey):
            parts.append(str(key.key))
        elif isinstance(key, jax.tree_util.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, jax.tree_util.GetAttrKey):
            parts.append(key.name)
        else:
            parts.append(str(key))
    return "/".join(parts)


def labels_from_predicate(params: Any, is_trainable: Callable[[str], bool]) -> Any:
    """Labels tree for ``params``: ``"trainable"`` where ``is_trainable(path)`` is true.

    ``path`` is the slash-joined key path (see :func:`path_name`); a boxed parameter counts as
    one leaf at the box's path, so the same predicate serves boxed and unboxed trees.
    """

    def label(path: tuple[Any, ...], _: Any) -> str:
        return TRAINABLE if is_trainable(path_name(path)) else FROZEN

    return jax.tree_util.tree_map_with_path(label, params, is_leaf=_is_box)


def freeze(tx: optax.GradientTransformation, labels: Any) -> optax.GradientTransformation:
    """``tx`` on the ``"trainable"`` leaves, zero updates and no state for the ``"frozen"`` ones.

    ``labels`` must have the params' structure (or be a prefix of it); a mismatch is reported at
    ``init`` with both structures named. It may also be a function of the params (or updates)
    that returns such a tree, for optimizers built before the params exist (T5X's
    ``OptaxWrapper``, whose params are FrozenDicts).
    """
    if not callable(labels):
        _check_labels(labels)
    inner = optax.transforms.partition({TRAINABLE: tx, FROZEN: optax.set_to_zero()},
                                       _checked(labels) if callable(labels) else labels)

    def init_fn(params: Any) -> Any:
        # Checked only on failure: ``optax.tree_map_params`` calls ``init`` with a placeholder
        # that is no params tree, and the partition handles it.
        try:
            return inner.init(params)
        except (ValueError, TypeError):
            if not callable(labels):
                _check_prefix(labels, params)
            raise

    return optax.GradientTransformationExtraArgs(init_fn, inner.update)


def _check_labels(labels: Any) -> None:
    unknown = set(jax.tree.leaves(labels)) - set(LABELS)
    if unknown:
        raise ValueError(f"labels must be {LABELS}; found {sorted(map(repr, unknown))}")


def _checked(labels_fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def labels(tree: Any) -> Any:
        found = labels_fn(tree)
        _check_labels(found)
        return found

    return labels


def trainable_mask(labels: Any) -> Any:
    """Boolean tree, True where trainable (for ``optax.masked``, gradient filtering, counts)."""
    return jax.tree.map(lambda label: label == TRAINABLE, labels)


def parameter_counts(params: Any, labels: Any) -> tuple[int, int]:
    """``(trainable, total)`` parameter counts, as the papers' "# of Params" columns report them.

    Works on arrays and on ``jax.ShapeDtypeStruct`` leaves alike.
    """
    _check_prefix(labels, params)
    trainable = 0
    total = 0
    for mask, subtree in zip(
        jax.tree.leaves(trainable_mask(labels)),
        _prefix_subtrees(labels, params),
        strict=True,
    ):
        size = sum(_size(leaf) for leaf in jax.tree.leaves(subtree))
        total += size
        trainable += size if mask else 0
    return trainable, total


def optimizer_state_bytes(tx: optax.GradientTransformation, params: Any) -> int:
    """Bytes of ``tx.init(params)``, from shapes only (``jax.eval_shape``: nothing allocated).

    ``params`` may be real arrays or ``jax.ShapeDtypeStruct`` leaves, e.g. from
    ``jax.eval_shape(model.init, ...)``.
    """
    state = jax.eval_shape(tx.init, params)
    return sum(_size(leaf) * leaf.dtype.itemsize for leaf in jax.tree.leaves(state))


def _size(leaf: Any) -> int:
    size = 1
    for dim in leaf.shape:
        size *= int(dim)
    return size


def _prefix_subtrees(prefix: Any, tree: Any) -> list[Any]:
    """The subtrees of ``tree`` under each leaf of ``prefix``, in leaf order."""
    return jax.tree.structure(prefix).flatten_up_to(tree)


def _check_prefix(labels: Any, params: Any) -> None:
    try:
        _prefix_subtrees(labels, params)
    except (ValueError, TypeError) as error:
        raise ValueError(f"freeze labels do not match the params tree: {_mismatch(labels, params)}"
                         ) from error


def _mismatch(labels: Any, params: Any, shown: int = 5) -> str:
    """Which paths the labels name that params lack, and which params no label covers."""
    label_paths = [path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(labels)[0]]
    param_paths = [
        path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(params, is_leaf=_is_box)[0]
    ]

    def under(path: str, prefix: str) -> bool:
        return path == prefix or path.startswith(prefix + "/")

    extra = [lp for lp in label_paths if not any(under(pp, lp) for pp in param_paths)]
    missing = [pp for pp in param_paths if not any(under(pp, lp) for lp in label_paths)]
    if not extra and not missing:
        return "same paths, different node types (e.g. boxed vs unboxed params)"
    return f"labels without params: {extra[:shown]}; params without labels: {missing[:shown]}"
