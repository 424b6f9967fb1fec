"""The input pipeline of training and evaluation: a seqio task or mixture → fixed-shape numpy
batches, exactly resumable.

The model turns task features into model features (its ``convert_features``: see
:mod:`tw_jax.models.features`), so this file never asks which family it feeds.

Exact resume. The stream is a pure function of (task, lengths, seed, shard): seqio shuffles
files and examples with the given seed, tf.data keeps element order deterministic, the stream
repeats forever. Resuming after ``n`` batches skips ``n`` batches of that same stream
(:func:`batches` with ``start_batch=n``). Skipping re-reads what was consumed, which costs
preprocessing time proportional to the position, but it needs no state besides one integer and
is immune to the pitfalls of checkpointing a tf.data iterator (shuffle buffers serialised into
every checkpoint, the iterator tied to the exact graph and TF version). For a DiffSet (one pass
of ~12K steps) that is minutes at most.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

import tw_jax.tasks
from tw_jax.errors import UsageError
from tw_jax.models import model_for
from tw_jax.tasks.cache import check_cached
from tw_jax.tasks.damaged import named_read_errors, read_checked


def task_name(name: str, config: Any) -> str:
    """``name`` with ``{objective}`` replaced by the model's objective, ``ssm`` (T5) or ``lm``
    (GPT-2), so one method gin file names the right task for either model
    (``twiki_diffset_0809_{objective}``)."""
    return name.replace("{objective}", model_for(config).objective)


def _deterministic(dataset: Any) -> Any:
    import tensorflow as tf

    options = tf.data.Options()
    options.deterministic = True
    return dataset.with_options(options)


def task_dataset(
    name: str,
    lengths: Mapping[str, int],
    *,
    split: str = "train",
    shuffle: bool = True,
    seed: int | None = 0,
    num_epochs: int | None = None,
    shard_index: int = 0,
    num_shards: int = 1,
    use_cached: bool = False,
) -> Any:
    """The task's or mixture's tf.data stream of task features (seqio), deterministic order.

    ``use_cached`` reads seqio's offline cache (T5X's ``USE_CACHED_TASKS``); a task without
    one, or with one older than its files, is a one-line error with the command that builds it
    (:func:`tw_jax.tasks.cache.check_cached`)."""
    import seqio

    if use_cached:
        check_cached(name)
    provider = seqio.get_mixture_or_task(name)
    shard = seqio.ShardInfo(index=shard_index, num_shards=num_shards) if num_shards > 1 else None
    dataset = provider.get_dataset(
        dict(lengths),
        split=split,
        shuffle=shuffle,
        seed=seed,
        num_epochs=num_epochs,
        shard_info=shard,
        use_cached=use_cached,
    )
    return _deterministic(dataset)


def check_task_features(name: str, model: Any) -> None:
    """A model whose task lacks a feature it reads (T5 on an LM task has no ``inputs``) is a
    one-line :class:`UsageError`, not a KeyError from inside the tf.data graph."""
    import seqio

    have = set(seqio.get_mixture_or_task(name).output_features)
    missing = [feature for feature in model.task_features if feature not in have]
    if missing:
        raise UsageError(
            f"{name} gives the features {sorted(have)}, but a {type(model).__name__} reads "
            f"{list(model.task_features)} (missing {missing}): pick a task with them; this "
            f"model's tasks end in _{model.objective} (`tw-jax tasks` lists them)"
        )


def check_examples(
    name: str, lengths: Mapping[str, int], needed: int, *, split: str = "train",
    shard_index: int = 0, num_shards: int = 1, use_cached: bool = False,
) -> None:
    """At least ``needed`` examples in one pass over this host's shard of ``split``: an empty
    split (or a batch that one pass cannot fill, which would repeat examples within a batch)
    is a one-line :class:`UsageError`. Reads at most ``needed`` examples."""
    dataset = task_dataset(name, lengths, split=split, shuffle=False, num_epochs=1,
                           shard_index=shard_index, num_shards=num_shards, use_cached=use_cached)
    with named_read_errors(name, split, use_cached):
        found = int(dataset.take(needed).reduce(0, lambda count, _: count + 1))
    shard = f" (host {shard_index}'s shard of {num_shards})" if num_shards > 1 else ""
    if found == 0:
        raise UsageError(f"the {split!r} split of {name}{shard} has no examples")
    if found < needed:
        raise UsageError(
            f"a batch of {needed} examples per host is larger than the {found} examples of the "
            f"{split!r} split of {name}{shard}: lower BATCH_SIZE to at most {found}"
        )


def batches(
    name: str,
    lengths: Mapping[str, int],
    batch_size: int,
    model: Any,
    *,
    split: str = "train",
    seed: int = 0,
    start_batch: int = 0,
    shuffle: bool = True,
    num_epochs: int | None = None,
    shard_index: int = 0,
    num_shards: int = 1,
    drop_remainder: bool = True,
    pack: bool = False,
    use_cached: bool = False,
) -> Iterator[dict[str, np.ndarray]]:
    """Numpy batches of ``model``'s features (a :class:`tw_jax.models.BaseModel`) of this
    host's shard, from batch ``start_batch`` on.

    ``batch_size`` is the per-host batch. With ``num_epochs=None`` the stream never ends;
    an evaluation pass uses ``num_epochs=1, shuffle=False, drop_remainder=False``. With
    ``pack`` each row holds as many examples as fit (the model's packed features); with
    ``use_cached`` the examples come from seqio's offline cache (:func:`task_dataset`).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    check_task_features(name, model)
    check_examples(name, lengths, batch_size if num_epochs is None else 1, split=split,
                   shard_index=shard_index, num_shards=num_shards, use_cached=use_cached)
    dataset = task_dataset(
        name, lengths, split=split, shuffle=shuffle, seed=seed, num_epochs=num_epochs,
        shard_index=shard_index, num_shards=num_shards, use_cached=use_cached,
    )
    dataset = model.convert_features(dataset, lengths, pack=pack)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if start_batch:
        dataset = dataset.skip(start_batch)
    dataset = _deterministic(dataset.prefetch(2))
    # a damaged record is one line naming its file, not a DataLossError from the iterator
    yield from read_checked(dataset.as_numpy_iterator(), name, split, use_cached)


def vocabulary(name: str) -> Any:
    """The output vocabulary of a task or mixture's ``targets``."""
    import seqio

    return seqio.get_mixture_or_task(name).output_features["targets"].vocabulary


def ensure_tasks(name: str, model_config: Any = None, *, model_dir: str | None = None,
                 initial_checkpoint: str | None = None, keep_tokenizer: bool = False) -> None:
    """Register the data folder's tasks (``tw_jax.tasks.register_all``, gin- or env-configured)
    unless ``name`` is registered already; an unknown name is a one-line
    :class:`tw_jax.tasks.UnknownTaskError` with the closest names and the data folder.

    A model with a tokenizer of its own (``model_config.tokenizer``) has its tasks registered
    from wherever its files are (:func:`tw_jax.runtime.model_tokenizer.use_model_tokenizer`:
    the starting model folder, the run's ``MODEL_DIR/tokenizer/``, …); ``keep_tokenizer``
    copies them into ``MODEL_DIR/tokenizer/`` so the run's checkpoints carry them."""
    if model_config is not None:
        from tw_jax.runtime.model_tokenizer import use_model_tokenizer

        use_model_tokenizer(model_config, model_dir=model_dir,
                            initial_checkpoint=initial_checkpoint, keep=keep_tokenizer)
    tw_jax.tasks.require(name)
