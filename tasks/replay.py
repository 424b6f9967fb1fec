"""Replay (TiC-LM, Li et al., ACL 2025): each update's examples partly drawn from earlier data.

For a period P of a chain (``0809`` → ``0910`` → ``1011`` …, the initial snapshot ``08`` before
it) the mixture ``twiki_replay_<P>_<objective>`` (:func:`tw_jax.tasks.names.replay`) draws

- the period's DiffSet (the new data) with rate ``1 − ratio``;
- the old data with rate ``ratio``: every earlier DiffSet of P's chain (the periods that end at or
  before ``P.old``, walked back as :meth:`tw_jax.tasks.layout.Layout.initial_snapshot` walks)
  and the initial snapshot's full snapshot (``twiki_full_<S>_<objective>``, what INITIAL
  trained on), the ``ratio`` split between them by a weighting (below). For the chain's first
  period the old data is the initial snapshot alone.

What a share is a share of. The rates are seqio mixture rates, so ``ratio`` is the expected
share of *examples drawn* from the old sources (each example is drawn from one member, the
member picked at random by its rate: ``tf.data.Dataset.sample_from_datasets``; every member
repeats forever). A causal-LM example is one packed block of exactly the sequence length
(:func:`tw_jax.tasks.preprocessors.pack_lm`), so for ``_lm`` tasks it is the share of tokens
too; an SSM example is one masked sentence span, of varying length.

Weightings of the old share (:class:`ReplaySettings` ``weighting``), over the K old sources:

============  ===================================================================================
``uniform``   ``ratio / K`` each (the default)
``tokens``    proportional to each source's size as its stage's ``stats.json`` records it: the
              DiffSet stage's ``tokens`` of the text (``diffset`` of ``<P>/diffset``, ``full``
              of the snapshot's folder) for ``lm`` objectives, the SSM stage's ``examples``
              for ``ssm``; so old data is drawn as if pooled (read once, when a dataset is first
              built; the published files record no sizes)
``recent``    geometric: the most recent old source (the previous period's DiffSet) weight 1,
              each step back in time ``decay`` times the one after it, the initial snapshot
              the oldest (``decay`` = 1 is ``uniform``)
============  ===================================================================================

Configuration. The gin-configurable :class:`ReplaySettings` (``tw_jax.tasks.ReplaySettings.ratio
= 0.5``, ``.weighting = 'uniform'``, ``.decay = 0.5``) is read each time a mixture computes its
rates (each dataset it builds), as :class:`tw_jax.tasks.mixreview.MixReviewSchedule` is; a
mixture built with ``settings=`` keeps its own.

Presets (:data:`PRESETS`, ``ReplaySettings.preset``): the two ratios TiC-LM compares (Li et al.,
ACL 2025, Section 4, data replay: a share α_t of update t's tokens from the current month, the
rest spread uniformly over the earlier months; its Table 2 rows "Replay (α=1/2)" and
"Replay (α=1/t)"; its code mixes them into the monthly manifests, ``training/README.md`` of
apple/ml-tic-lm):

===================  ====================================================================
``tic_lm_half``      α = 1/2: half the examples new, half old, ``uniform`` (ratio 1/2)
``tic_lm_1_over_t``  α_t = 1/t: every month seen so far the same share, the new one
                     included: with K old sources each member 1/(K + 1) (ratio K/(K + 1)),
                     so 1/2, 1/3, 1/4 … of the new DiffSet along a chain
===================  ====================================================================

A preset fixes the ratio and the weighting: naming one beside another ``ratio`` or
``weighting`` is an error. Unset, ``ratio`` is a plain number (0.5, ``tic_lm_half``'s, unless
set).

Budget. A pass over a replay mixture is open-ended (every member repeats); :meth:`ReplayMixture.
examples` counts ``epochs`` passes as the examples among which N new ones (one pass over the
DiffSet task) are expected: ``epochs · N / (1 − ratio)``. A fixed ``TRAIN_STEPS`` is TiC-LM's
fixed token budget per update, of which ``ratio`` goes to old data.

Ask for ``passthrough_features=["replay_source"]`` to get each example's member: its index in
:attr:`ReplayMixture.members` (0 the new data, 1 … the old sources, oldest first).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

import gin
import numpy as np
import seqio
import tensorflow as tf

from tw_jax.io import paths
from tw_jax.tasks.damaged import named_read_errors
from tw_jax.time import Period, Snapshot

SOURCE_FEATURE = "replay_source"  # index into ReplayMixture.members; added when asked for
UNIFORM, TOKENS, RECENT = "uniform", "tokens", "recent"
WEIGHTINGS = (UNIFORM, TOKENS, RECENT)
DEFAULT_RATIO = 0.5
# TiC-LM (Li et al., ACL 2025), Section 4 and Table 2: α, the current month's share, is 1/2 or
# 1/t (t months so far, the current one included); the rest uniformly over the earlier months.
TIC_LM_HALF, TIC_LM_1_OVER_T = "tic_lm_half", "tic_lm_1_over_t"
PRESETS: dict[str, str] = {
    TIC_LM_HALF: "TiC-LM's Replay (α=1/2): half the examples from earlier months, uniformly",
    TIC_LM_1_OVER_T: "TiC-LM's Replay (α=1/t): every month so far, the new one included, "
                     "the same share",
}


def _exact(value: float) -> Fraction:
    """The number as written (0.1 is 1/10, not the binary double nearest to it)."""
    return Fraction(repr(float(value)))


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"replay {name} must be a finite number, got {value!r}")
    return float(value)


@gin.configurable(module="tw_jax.tasks")
@dataclasses.dataclass(frozen=True)
class ReplaySettings:
    """How much old data a replay mixture draws and how it splits it (module docstring).

    ``ratio``: the share of examples drawn from old data, 0 ≤ ratio < 1 (0: the DiffSet alone).
    ``weighting``: ``uniform``, ``tokens`` or ``recent`` (:data:`WEIGHTINGS`). ``decay``: the
    factor per step back in time of ``recent`` (0 < decay ≤ 1). ``preset``: one of
    :data:`PRESETS` (TiC-LM's two ratios), which fixes ``ratio`` and ``weighting``.
    """

    ratio: float = DEFAULT_RATIO
    weighting: str = UNIFORM
    decay: float = 0.5
    preset: str | None = None

    def __post_init__(self) -> None:
        ratio = _number("ratio", self.ratio)
        if not 0 <= ratio < 1:
            raise ValueError(f"replay ratio must be in [0, 1) (the old share of the examples "
                             f"drawn; 1 would leave no new data), got {self.ratio}")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"unknown replay weighting {self.weighting!r}; known: "
                             f"{', '.join(WEIGHTINGS)}")
        decay = _number("decay", self.decay)
        if not 0 < decay <= 1:
            raise ValueError(f"replay decay must be in (0, 1] (each older source's weight over "
                             f"the next one's), got {self.decay}")
        if self.preset is None:
            return
        if self.preset not in PRESETS:
            raise ValueError(f"unknown replay preset {self.preset!r}; known: "
                             f"{', '.join(PRESETS)}")
        if ratio != DEFAULT_RATIO or self.weighting != UNIFORM:
            raise ValueError(f"replay preset {self.preset!r} fixes the ratio and the weighting; "
                             f"leave ratio ({self.ratio}) and weighting ({self.weighting!r}) "
                             "unset, or drop the preset")

    def old_ratio(self, count: int) -> Fraction:
        """The old share with ``count`` old sources: ``ratio``, or the preset's (``1/t``:
        count/(count + 1), each of the count + 1 months alike)."""
        if self.preset == TIC_LM_1_OVER_T:
            return Fraction(count, count + 1)
        if self.preset == TIC_LM_HALF:
            return Fraction(1, 2)
        return _exact(self.ratio)

    def old_weights(self, sizes: Sequence[int] | None, count: int) -> list[Fraction]:
        """The split of the old share over ``count`` sources, oldest first (sums to 1);
        ``sizes`` (oldest first) is what ``tokens`` weighs by."""
        if count <= 0:
            raise ValueError("replay needs at least one old source")
        if self.weighting == UNIFORM:
            return [Fraction(1, count)] * count
        if self.weighting == RECENT:
            decay = _exact(self.decay)
            raw = [decay ** (count - 1 - i) for i in range(count)]  # the newest weighs 1
        else:
            if sizes is None or len(sizes) != count:
                raise ValueError("replay weighting 'tokens' needs every old source's size; "
                                 "these sources record none (use 'uniform' or 'recent')")
            if any(s < 0 for s in sizes) or sum(sizes) <= 0:
                raise ValueError(f"replay weighting 'tokens': the sizes {list(sizes)} are not "
                                 "counts with a positive sum")
            raw = [Fraction(int(s)) for s in sizes]
        total = sum(raw)
        return [w / total for w in raw]

    def shares(self, sizes: Sequence[int] | None, count: int) -> list[Fraction]:
        """``[new, old_1, …, old_count]`` (old oldest first): the members' exact rates."""
        ratio = self.old_ratio(count)
        return [1 - ratio, *(ratio * w for w in self.old_weights(sizes, count))]


@dataclasses.dataclass(frozen=True)
class ReplaySource:
    """One old source: its task, what it holds (the initial snapshot or an earlier period) and,
    for ``tokens``, a function giving its size (None: unknown)."""

    task: str
    holds: Snapshot | Period
    size: Callable[[], int] | None = dataclasses.field(default=None, compare=False)


def chain(period: Period, periods: Iterable[Period]) -> tuple[Snapshot, list[Period]]:
    """The initial snapshot of ``period``'s chain and the chain's periods before ``period``,
    oldest first: walked back from ``period.old`` through the period that ends at each snapshot
    (the earliest such when several do), as :meth:`Layout.initial_snapshot` walks."""
    ending_in: dict[Snapshot, Period] = {}
    for found in sorted(periods):
        ending_in.setdefault(found.new, found)
    earlier: list[Period] = []
    snapshot = period.old
    while snapshot in ending_in:
        previous = ending_in[snapshot]
        earlier.append(previous)
        snapshot = previous.old
    return snapshot, earlier[::-1]


def recorded_size(folder: str, name: str, field: str) -> Callable[[], int]:
    """A function reading ``stats.json[name][field]`` of ``folder`` (a stage's record)."""

    def read() -> int:
        path = paths.join(folder, "stats.json")
        try:
            value = json.loads(paths.read_text(path))[name][field]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"replay weighting 'tokens': no {name}.{field} in {path} "
                             f"({type(error).__name__}: {error}); use 'uniform' or 'recent'"
                             ) from None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"replay weighting 'tokens': {name}.{field} in {path} is "
                             f"{value!r}, not a count")
        return value

    return read


class ReplayMixture(seqio.Mixture):
    """A period's DiffSet mixed with earlier data at a fixed ratio (module docstring).

    ``old``: the old sources, oldest first (the initial snapshot, then the earlier DiffSets).
    ``settings=None`` reads the gin-configurable :class:`ReplaySettings` whenever the rates
    are computed. ``new_examples_per_epoch`` skips the counting pass of :meth:`examples`.
    """

    def __init__(
        self,
        name: str,
        new_task: str,
        old: Sequence[ReplaySource],
        *,
        settings: ReplaySettings | None = None,
        new_examples_per_epoch: int | None = None,
    ) -> None:
        if not old:
            raise ValueError(f"{name}: replay needs at least one old source")
        self.new_name = new_task
        self.old = tuple(old)
        self.members = (new_task, *(source.task for source in self.old))
        if len(set(self.members)) != len(self.members):
            raise ValueError(f"{name}: a task appears twice among {self.members}")
        self.settings = settings
        self.new_examples_per_epoch = new_examples_per_epoch
        self._sizes: list[int] | None = None
        self._counts: dict[tuple, int] = {}
        super().__init__(name, [(member, self._rate) for member in self.members])

    # --- rates -----------------------------------------------------------------------------

    def active_settings(self) -> ReplaySettings:
        """The settings in force: ``settings``, else gin's :class:`ReplaySettings`."""
        return self.settings or ReplaySettings()

    def sizes(self) -> list[int] | None:
        """The old sources' sizes (oldest first), read once; None when one records none."""
        if self._sizes is None:
            if any(source.size is None for source in self.old):
                return None
            self._sizes = [source.size() for source in self.old]  # type: ignore[misc]
        return self._sizes

    def exact_shares(self, settings: ReplaySettings | None = None) -> dict[str, Fraction]:
        """``{member task: its share of the examples drawn}`` (sums to 1)."""
        settings = settings or self.active_settings()
        sizes = self.sizes() if settings.weighting == TOKENS else None
        return dict(zip(self.members, settings.shares(sizes, len(self.old)), strict=True))

    def shares(self, settings: ReplaySettings | None = None) -> dict[str, float]:
        return {name: float(share) for name, share in self.exact_shares(settings).items()}

    def _rate(self, task: seqio.Task) -> float:
        return self.shares()[task.name]

    @property
    def new_task(self) -> seqio.Task:
        return self._task_map[self.new_name]

    # --- data ------------------------------------------------------------------------------

    def get_task_dataset(
        self, task: seqio.Task, output_feature_keys: set[str], *args, **kwargs
    ) -> tf.data.Dataset:
        """A member's stream, with its index in :attr:`members` as ``replay_source`` when that
        passthrough feature is asked for."""
        keys = set(output_feature_keys)
        marked = SOURCE_FEATURE in keys
        dataset = super().get_task_dataset(task, keys - {SOURCE_FEATURE}, *args, **kwargs)
        if not marked:
            return dataset
        index = tf.constant(self.members.index(task.name), tf.int32)
        return dataset.map(lambda ex: {**ex, SOURCE_FEATURE: index})

    def count_new_examples(
        self, sequence_length: Mapping[str, int] | None, split: str = "train",
        use_cached: bool = False,
    ) -> int:
        """N: examples in one pass over the new task (after preprocessing, e.g. packing)."""
        if self.new_examples_per_epoch:
            return self.new_examples_per_epoch
        key = (tuple(sorted((sequence_length or {}).items())), split, use_cached)
        if key not in self._counts:
            dataset = self.new_task.get_dataset(
                sequence_length=sequence_length, split=split, use_cached=use_cached,
                shuffle=False, num_epochs=1,
            )
            with named_read_errors(self.new_name, split, use_cached):
                self._counts[key] = int(dataset.reduce(np.int64(0),
                                                       lambda count, _: count + 1))
        return self._counts[key]

    def examples(
        self, epochs: float, sequence_length: Mapping[str, int] | None, split: str = "train"
    ) -> float:
        """Examples in ``epochs`` passes: those among which ``epochs · N`` new ones are
        expected, ``epochs · N / (1 − ratio)`` (the preset's ratio where one is named)."""
        if not (epochs >= 0 and math.isfinite(epochs)):
            raise ValueError(f"epochs must be a finite number >= 0, got {epochs}")
        new_share = self.exact_shares()[self.new_name]
        return float(epochs * self.count_new_examples(sequence_length, split) / new_share)
