"""Mix-Review (He et al., 2021): replay the initial snapshot beside the new data, by preset.

Schedule. Let N be the number of new examples in one epoch (one pass over the DiffSet task,
counted once per dataset, after preprocessing: packed LM blocks or SSM examples). Epoch ``e``
(0-based) is those N new examples with

    M_e = floor(N · mix_ratio · mix_decay^e)

old examples interleaved, spread evenly: after the i-th new example of the epoch come
``floor((i+1)·M_e/N) − floor(i·M_e/N)`` old ones, so the share of old data measured over any
stretch of an epoch is M_e / (N + M_e) up to one example. Old examples are drawn from the
shuffled, endlessly repeated initial-snapshot task, so each epoch reviews a fresh random subset,
as He et al. do. ``mix_ratio`` is old examples per new example in the first epoch, ``mix_decay``
(0 < d ≤ 1) multiplies it every epoch. The arithmetic is exact (the numbers as written in
decimal, then rational), and ``floor`` is the reference code's ``int()``.

Presets (:data:`PRESETS`), the papers and their reference code where the two disagree:

=====================  =====================  ==============================================
preset                 M_e                    source
=====================  =====================  ==============================================
``temporalwiki``       2·N every epoch        TemporalWiki, Section 5.2: "We fix the mix-ratio
                                              as 2 in our experiments."
``temporalwiki_code``  N every epoch          TemporalWiki's code: ``mix_len = len(train)``,
                                              the 1:1 mix, no decay
``ckl``                N·4·0.7^e              CKL, Appendix D: "The mix-decay and mix-ratio are
                                              set to 4 and 0.7"; Section 4: "As the training
                                              progresses, the mix-ratio decays towards 0"
``ckl_code``           4·N every epoch        CKL's code: ``len(new)·4·0.7^epoch`` computed
                                              once, the data never reloaded: epoch stays 0
=====================  =====================  ==============================================

For N = 10: ``temporalwiki`` 20, 20, 20, …; ``temporalwiki_code`` 10, 10, …; ``ckl`` 40, 28,
19, 13, 9, 6, 4, 3, 2, 1, 1, 0, …; ``ckl_code`` 40, 40, …

Which preset. The gin-configurable :class:`MixReviewSchedule` names one
(``tw_jax.tasks.MixReviewSchedule.preset = 'ckl'``), and ``mix_ratio`` / ``mix_decay`` override
its numbers. Unset, a mixture uses its benchmark's paper: the TemporalWiki mixtures
(``twiki_mixreview_*``) ``temporalwiki``, CKL's ``ckl_mixreview_ssm`` ``ckl``. A mixture reads
the bindings each time it builds a dataset. With a seed the stream is deterministic.

Budget. One epoch of the mixture is N + M_e examples; :meth:`MixReviewSchedule.mixed_examples`
counts them over any number of epochs, which is how the lifelong runner (``TRAIN_EPOCHS``) and
``tw-jax ckl train --epochs`` size a Mix-Review update: its passes cover the new and the old
data, as the reference code's data loader does.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

import gin
import numpy as np
import seqio
import tensorflow as tf

from tw_jax.tasks.damaged import named_read_errors

SOURCE_FEATURE = "mixreview_source"  # 0 new, 1 old; added when asked for as a passthrough
NEW, OLD = 0, 1
_MAX_SCHEDULE_EPOCHS = 10_000

# (mix_ratio, mix_decay) of each preset; see the module docstring for the sentences.
PRESETS: dict[str, tuple[float, float]] = {
    # TemporalWiki, Section 5.2: "We fix the mix-ratio as 2 in our experiments."
    "temporalwiki": (2.0, 1.0),
    # TemporalWiki's reference code: as many old examples as new ones, every epoch.
    "temporalwiki_code": (1.0, 1.0),
    # CKL, Appendix D: "The mix-decay and mix-ratio are set to 4 and 0.7, respectively";
    # Section 4: "As the training progresses, the mix-ratio decays towards 0".
    "ckl": (4.0, 0.7),
    # CKL's reference code: len(new) * 4 * 0.7**epoch, but the loader is built once (epoch 0).
    "ckl_code": (4.0, 1.0),
}


def _exact(value: float) -> Fraction:
    """The number as written (0.7 is 7/10, not the binary double nearest to it)."""
    return Fraction(repr(float(value)))


@gin.configurable(module="tw_jax.tasks")
@dataclasses.dataclass(frozen=True)
class MixReviewSchedule:
    """How much old data each epoch mixes in (see the module docstring).

    ``preset`` names a row of :data:`PRESETS` (None: the mixture's benchmark default, see
    :meth:`resolve`); ``mix_ratio`` and ``mix_decay``, when set, replace the preset's numbers.
    """

    preset: str | None = None
    mix_ratio: float | None = None
    mix_decay: float | None = None

    def __post_init__(self) -> None:
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(
                f"unknown Mix-Review preset {self.preset!r}; known: {', '.join(PRESETS)}"
            )
        if self.mix_ratio is not None and not (
            self.mix_ratio >= 0 and math.isfinite(self.mix_ratio)
        ):
            raise ValueError(f"mix_ratio must be a finite number >= 0, got {self.mix_ratio}")
        if self.mix_decay is not None and not 0 < self.mix_decay <= 1:
            raise ValueError(
                f"mix_decay must be in (0, 1] (it multiplies the old share each epoch), got "
                f"{self.mix_decay}; CKL's 'mix-decay 4, mix-ratio 0.7' is the preset 'ckl'"
            )

    def resolve(self, default_preset: str | None = None) -> MixReviewSchedule:
        """This schedule with both numbers filled in: from ``preset``, else from
        ``default_preset`` (the benchmark's), overridden by ``mix_ratio`` / ``mix_decay``."""
        name = self.preset or default_preset
        if name is None:
            if self.mix_ratio is None or self.mix_decay is None:
                raise ValueError(
                    "Mix-Review: name a preset (tw_jax.tasks.MixReviewSchedule.preset = one of "
                    f"{', '.join(PRESETS)}) or set both mix_ratio and mix_decay"
                )
            return self
        checked = MixReviewSchedule(preset=name).preset  # an unknown name is a ValueError
        ratio, decay = PRESETS[checked]
        return MixReviewSchedule(
            preset=checked,
            mix_ratio=ratio if self.mix_ratio is None else self.mix_ratio,
            mix_decay=decay if self.mix_decay is None else self.mix_decay,
        )

    def _numbers(self) -> tuple[Fraction, Fraction]:
        if self.mix_ratio is None or self.mix_decay is None:
            return self.resolve()._numbers()  # raises for a schedule with no numbers
        return _exact(self.mix_ratio), _exact(self.mix_decay)

    def ratio(self, epoch: int) -> float:
        """Old examples per new example in ``epoch``."""
        ratio, decay = self._numbers()
        return float(ratio * decay**epoch)

    def old_examples(self, epoch: int, new_examples: int) -> int:
        """M_e: old examples mixed into ``epoch`` of ``new_examples`` new ones."""
        ratio, decay = self._numbers()
        return math.floor(new_examples * ratio * decay**epoch)

    def old_counts(self, new_examples: int) -> list[int]:
        """M_0, M_1, … up to the epoch from which M_e stays the same (no decay, or 0)."""
        _, decay = self._numbers()
        counts = [self.old_examples(0, new_examples)]
        while decay != 1 and counts[-1] > 0 and len(counts) < _MAX_SCHEDULE_EPOCHS:
            counts.append(self.old_examples(len(counts), new_examples))
        return counts

    def mixed_examples(self, epochs: float, new_examples: int) -> float:
        """Examples in ``epochs`` passes over the new data, each epoch's old ones included
        (a fractional last epoch counts that share of its N + M_e)."""
        if not (epochs >= 0 and math.isfinite(epochs)):
            raise ValueError(f"epochs must be a finite number >= 0, got {epochs}")
        total, epoch = 0.0, 0
        while epoch < epochs:
            share = min(1.0, epochs - epoch)
            total += share * (new_examples + self.old_examples(epoch, new_examples))
            epoch += 1
        return total


TEMPORALWIKI = MixReviewSchedule(preset="temporalwiki").resolve()


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

    ``preset`` is the benchmark's default (``temporalwiki`` for the TemporalWiki mixtures,
    ``ckl`` for CKL's), used when gin names none. ``schedule=None`` reads the gin-configurable
    :class:`MixReviewSchedule` each time a dataset is built. ``new_examples_per_epoch`` skips
    the counting pass over the new data.
    """

    def __init__(
        self,
        name: str,
        new_task: str | seqio.Task,
        old_task: str | seqio.Task,
        *,
        preset: str,
        schedule: MixReviewSchedule | None = None,
        new_examples_per_epoch: int | None = None,
    ) -> None:
        self.preset = MixReviewSchedule(preset=preset).preset
        # seqio's mixing rate is only shown (tw-jax tasks); the stream follows the schedule.
        nominal = (schedule or MixReviewSchedule()).resolve(self.preset).ratio(0)
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
        """The schedule in force: ``schedule``, else gin's, completed by the benchmark preset."""
        return (self.schedule or MixReviewSchedule()).resolve(self.preset)

    def examples(
        self, epochs: float, sequence_length: Mapping[str, int] | None, split: str = "train"
    ) -> float:
        """Examples in ``epochs`` epochs of the mixed stream (new and old data together)."""
        new_examples = self.count_new_examples(sequence_length, split)
        return self.active_schedule().mixed_examples(epochs, new_examples)

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
            with named_read_errors(self._new_name, split, use_cached):
                self._counts[key] = int(dataset.reduce(np.int64(0),
                                                       lambda count, _: count + 1))
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
