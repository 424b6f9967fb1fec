"""Mix-Review (He et al., 2021): replay the initial snapshot beside the new data, less each epoch.

Schedule. Let N be the number of new examples in one epoch (one pass over the DiffSet task,
counted once per dataset). Epoch ``e`` (0-based) is those N new examples with

    M_e = floor(N · mix_ratio · mix_decay^(−e) + 1/2)

old examples interleaved, spread evenly: after the i-th new example of the epoch come
``floor((i+1)·M_e/N) − floor(i·M_e/N)`` old ones, so the share of old data measured over any
stretch of an epoch is M_e / (N + M_e) up to one example. Old examples are drawn from the
shuffled, endlessly repeated initial-snapshot task, so each epoch reviews a fresh random subset,
as He et al. do.

Parameters. ``mix_ratio`` is the amount of old data at the first epoch relative to the new
data; ``mix_decay`` (≥ 1) divides it every epoch. Defaults follow the CKL paper's reading
(mix-ratio 0.7, mix-decay 4: 0.7 N, 0.175 N, 0.044 N, …); TemporalWiki's fixed 1:1 mix is
``mix_ratio=1, mix_decay=1`` (:data:`TEMPORALWIKI`). He et al.'s own notation multiplies by a
decay d < 1 per epoch (``r · d^e``); that is ``mix_ratio=r, mix_decay=1/d`` here — the CKL
reference code's ``len(new) · 0.7^e · 4`` is ``mix_ratio=4, mix_decay=1/0.7``. The reference
implementations computed the amount from the epoch counter but never rebuilt their data loader,
so the decay never happened; here the schedule is part of the tf.data stream itself.

Both are gin-configurable (``MixReviewSchedule.mix_ratio = 1.0``); a mixture reads the bindings
when it builds a dataset. With a seed the stream is deterministic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import gin
import numpy as np
import seqio
import tensorflow as tf

SOURCE_FEATURE = "mixreview_source"  # 0 new, 1 old; added when asked for as a passthrough
NEW, OLD = 0, 1
_MAX_SCHEDULE_EPOCHS = 10_000


@gin.configurable(module="tw_jax.tasks")
@dataclasses.dataclass(frozen=True)
class MixReviewSchedule:
    """How much old data each epoch mixes in (see the module docstring)."""

    mix_ratio: float = 0.7
    mix_decay: float = 4.0

    def __post_init__(self) -> None:
        if not (self.mix_ratio >= 0 and math.isfinite(self.mix_ratio)):
            raise ValueError(f"mix_ratio must be a finite number >= 0, got {self.mix_ratio}")
        if not (self.mix_decay >= 1 and math.isfinite(self.mix_decay)):
            raise ValueError(
                f"mix_decay must be >= 1 (it divides the old share each epoch), got "
                f"{self.mix_decay}; He et al.'s multiplicative decay d < 1 is mix_decay = 1/d"
            )

    def ratio(self, epoch: int) -> float:
        """Old examples per new example in ``epoch``."""
        return self.mix_ratio * self.mix_decay ** (-epoch)

    def old_examples(self, epoch: int, new_examples: int) -> int:
        """M_e: old examples mixed into ``epoch`` of ``new_examples`` new ones."""
        return math.floor(new_examples * self.ratio(epoch) + 0.5)

    def old_counts(self, new_examples: int) -> list[int]:
        """M_0, M_1, … up to the epoch from which M_e no longer changes (0, or constant)."""
        counts = [self.old_examples(0, new_examples)]
        while len(counts) < _MAX_SCHEDULE_EPOCHS:
            following = self.old_examples(len(counts), new_examples)
            if following == counts[-1]:
                break
            counts.append(following)
        return counts


TEMPORALWIKI = MixReviewSchedule(mix_ratio=1.0, mix_decay=1.0)


def interleaving(new_examples: int, old_examples: int) -> np.ndarray:
    """The choice sequence of one epoch (0 new, 1 old), old examples spread evenly."""
    i = np.arange(new_examples, dtype=np.int64)
    choices = np.ones(new_examples + old_examples, dtype=np.int64)
    choices[i + (i * old_examples) // new_examples] = NEW
    return choices


def choice_dataset(
    schedule: MixReviewSchedule, new_examples: int, num_epochs: int | None
) -> tf.data.Dataset:
    """Choices (0 new, 1 old) for ``num_epochs`` epochs (``None``: forever)."""
    if new_examples <= 0:
        raise ValueError("Mix-Review needs at least one new example per epoch")
    counts = tf.constant(schedule.old_counts(new_examples), tf.int64)
    last = tf.size(counts, out_type=tf.int64) - 1
    n = tf.constant(new_examples, tf.int64)

    def epoch(e: tf.Tensor) -> tf.data.Dataset:
        m = counts[tf.minimum(e, last)]
        i = tf.range(n, dtype=tf.int64)
        positions = i + (i * m) // n
        choices = tf.tensor_scatter_nd_update(
            tf.ones([n + m], tf.int64), positions[:, None], tf.zeros([n], tf.int64)
        )
        return tf.data.Dataset.from_tensor_slices(choices)

    epochs = tf.data.Dataset.range(num_epochs) if num_epochs else tf.data.Dataset.counter()
    return epochs.flat_map(epoch)


class MixReviewMixture(seqio.Mixture):
    """A DiffSet task mixed with an initial-snapshot task on the Mix-Review schedule.

    ``schedule=None`` reads the gin-configurable :class:`MixReviewSchedule` each time a dataset
    is built. ``new_examples_per_epoch`` skips the counting pass over the new data.
    """

    def __init__(
        self,
        name: str,
        new_task: str | seqio.Task,
        old_task: str | seqio.Task,
        schedule: MixReviewSchedule | None = None,
        new_examples_per_epoch: int | None = None,
    ) -> None:
        nominal = (schedule or MixReviewSchedule()).mix_ratio
        super().__init__(name, [(new_task, 1.0), (old_task, nominal)])
        self._new_name = new_task if isinstance(new_task, str) else new_task.name
        self._old_name = old_task if isinstance(old_task, str) else old_task.name
        self.schedule = schedule
        self.new_examples_per_epoch = new_examples_per_epoch
        self._counts: dict[tuple, int] = {}

    @property
    def new_task(self) -> seqio.Task:
        return self._task_map[self._new_name]

    @property
    def old_task(self) -> seqio.Task:
        return self._task_map[self._old_name]

    def active_schedule(self) -> MixReviewSchedule:
        return self.schedule or MixReviewSchedule()

    def count_new_examples(
        self,
        sequence_length: Mapping[str, int] | None,
        split: str,
        shard_info: seqio.ShardInfo | None = None,
        use_cached: bool = False,
    ) -> int:
        """N: examples in one pass over the new task (after preprocessing, e.g. packing)."""
        if self.new_examples_per_epoch:
            return self.new_examples_per_epoch
        shard = (shard_info.index, shard_info.num_shards) if shard_info else None
        key = (tuple(sorted((sequence_length or {}).items())), split, shard, use_cached)
        if key not in self._counts:
            dataset = self.new_task.get_dataset(
                sequence_length=sequence_length,
                split=split,
                use_cached=use_cached,
                shuffle=False,
                shard_info=shard_info,
                num_epochs=1,
            )
            self._counts[key] = int(dataset.reduce(np.int64(0), lambda count, _: count + 1))
        return self._counts[key]

    def get_dataset(
        self,
        sequence_length: Mapping[str, int] | None = None,
        split: str = "train",
        use_cached: bool = False,
        shuffle: bool = True,
        seed: int | None = None,
        shard_info: seqio.ShardInfo | None = None,
        num_epochs: int | None = None,
        copy_pretokenized: bool = False,
        compute_stats_empirically: bool = False,
        log_mixing_proportions: bool = True,
        passthrough_features: Sequence[str] | None = None,
        trim_output_features: bool = True,
        try_in_mem_cache: bool = True,
    ) -> tf.data.Dataset:
        """The mixed stream; ``num_epochs`` counts epochs of the new data (``None``: forever).

        Ask for ``passthrough_features=["mixreview_source"]`` to get each example's origin
        (0 new, 1 old), e.g. to log the share of old data.
        """
        del compute_stats_empirically, log_mixing_proportions
        self._check_compatible_features()
        passthrough = list(passthrough_features or [])
        with_source = SOURCE_FEATURE in passthrough
        keys = set(self.output_features) | (set(passthrough) - {SOURCE_FEATURE})
        if copy_pretokenized:
            keys |= {f"{k}_pretokenized" for k in self.output_features}
        new_examples = self.count_new_examples(sequence_length, split, shard_info, use_cached)
        common = dict(
            sequence_length=sequence_length,
            split=split,
            use_cached=use_cached,
            shuffle=shuffle,
            shard_info=shard_info,
            trim_output_features=trim_output_features,
            try_in_mem_cache=try_in_mem_cache,
        )
        new = self.get_task_dataset(self.new_task, keys, seed=seed, num_epochs=num_epochs, **common)
        old = self.get_task_dataset(
            self.old_task, keys, seed=None if seed is None else seed + 1, num_epochs=None, **common
        )
        if with_source:
            new = new.map(lambda ex: {**ex, SOURCE_FEATURE: tf.constant(NEW, tf.int32)})
            old = old.map(lambda ex: {**ex, SOURCE_FEATURE: tf.constant(OLD, tf.int32)})
        choices = choice_dataset(self.active_schedule(), new_examples, num_epochs)
        return tf.data.Dataset.choose_from_datasets([new, old], choices, stop_on_empty_dataset=True)
