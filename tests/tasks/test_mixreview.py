"""Mix-Review: the schedule, and the share of old data measured over the mixed stream."""

from __future__ import annotations

import gin
import numpy as np
import pytest
import seqio

from tw_jax.tasks.mixreview import (
    SOURCE_FEATURE,
    TEMPORALWIKI,
    MixReviewMixture,
    MixReviewSchedule,
    choice_dataset,
    interleaving,
)

SSM_LENGTHS = {"inputs": 512, "targets": 64}


def test_schedule_follows_the_formula():
    ckl = MixReviewSchedule()
    assert (ckl.mix_ratio, ckl.mix_decay) == (0.7, 4.0)
    assert [ckl.ratio(e) for e in range(3)] == pytest.approx([0.7, 0.175, 0.04375])
    # floor(17·0.7 + ½) = 12, floor(17·0.175 + ½) = 3, floor(17·0.04375 + ½) = 1, then 0
    assert ckl.old_counts(17) == [12, 3, 1, 0]
    assert TEMPORALWIKI.old_counts(17) == [17]
    assert MixReviewSchedule(mix_ratio=4, mix_decay=1 / 0.7).old_counts(10)[:3] == [40, 28, 20]
    with pytest.raises(ValueError, match="mix_decay = 1/d"):
        MixReviewSchedule(mix_decay=0.7)
    with pytest.raises(ValueError, match="mix_ratio"):
        MixReviewSchedule(mix_ratio=-1)


def test_interleaving_spreads_old_examples_evenly():
    assert interleaving(5, 2).tolist() == [0, 0, 0, 1, 0, 0, 1]
    assert interleaving(2, 4).tolist() == [0, 1, 1, 0, 1, 1]
    assert interleaving(3, 0).tolist() == [0, 0, 0]
    schedule = MixReviewSchedule(mix_ratio=1.5, mix_decay=2)
    choices = list(choice_dataset(schedule, 4, num_epochs=4).as_numpy_iterator())
    # old per epoch: 6, 3, 2 (floor(1.5 + ½)), 1 (floor(0.75 + ½))
    expected = np.concatenate([interleaving(4, m) for m in (6, 3, 2, 1)])
    assert choices == expected.tolist()
    with pytest.raises(ValueError, match="at least one new example"):
        choice_dataset(schedule, 0, None)


def epochs_of(sources: list[int], new_per_epoch: int) -> list[tuple[int, int]]:
    """(new, old) counts of each epoch: an epoch ends after its last new example's old ones."""
    epochs, new, old = [], 0, 0
    for source in sources:
        if source == 0 and new == new_per_epoch:
            epochs.append((new, old))
            new, old = 0, 0
        new += source == 0
        old += source == 1
    epochs.append((new, old))
    return epochs


def test_share_of_old_data_decays_per_epoch_over_the_stream(twiki):
    mixture = seqio.get_mixture_or_task("twiki_mixreview_0809_ssm")
    assert isinstance(mixture, MixReviewMixture)
    schedule = MixReviewSchedule(mix_ratio=1.5, mix_decay=2)
    mixture.schedule = schedule
    try:
        n = mixture.count_new_examples(SSM_LENGTHS, "train")
        assert n == len(twiki["ssm"]["0809"])
        stream = list(
            mixture.get_dataset(
                SSM_LENGTHS, seed=7, num_epochs=5, passthrough_features=[SOURCE_FEATURE]
            ).as_numpy_iterator()
        )
    finally:
        mixture.schedule = None
    sources = [int(ex[SOURCE_FEATURE]) for ex in stream]
    measured = epochs_of(sources, n)
    assert measured == [(n, schedule.old_examples(e, n)) for e in range(5)]
    shares = [old / (new + old) for new, old in measured]
    assert shares == sorted(shares, reverse=True)
    # The origin flag tells the truth: new examples are DiffSet SSM examples, old ones come
    # from the initial snapshot (compared on their first 32 input tokens).
    vocabulary = mixture.output_features["inputs"].vocabulary

    def heads(records):
        return {
            tuple((list(vocabulary.encode(r["inputs"])) + [vocabulary.eos_id])[:32])
            for r in records
        }

    new_heads, old_heads = heads(twiki["ssm"]["0809"]), heads(twiki["ssm"]["08"])
    for example, source in zip(stream, sources, strict=True):
        assert tuple(example["inputs"][:32].tolist()) in (old_heads if source else new_heads)
    assert set(stream[0]) == {"inputs", "targets", SOURCE_FEATURE}


def test_gin_binds_the_schedule_and_a_seed_fixes_the_stream(twiki):
    mixture = seqio.get_mixture_or_task("twiki_mixreview_0809_lm")
    lengths = {"targets": 64}
    try:
        gin.parse_config(
            [
                "tw_jax.tasks.MixReviewSchedule.mix_ratio = 1.0",
                "tw_jax.tasks.MixReviewSchedule.mix_decay = 1.0",
            ]
        )
        assert mixture.active_schedule() == TEMPORALWIKI
        first = list(mixture.get_dataset(lengths, seed=3, num_epochs=2).as_numpy_iterator())
        again = list(mixture.get_dataset(lengths, seed=3, num_epochs=2).as_numpy_iterator())
    finally:
        gin.clear_config()
    n = mixture.count_new_examples(lengths, "train")
    assert len(first) == 2 * (n + n)  # 1:1 in both epochs: TemporalWiki's mix
    assert all(len(ex["targets"]) == 64 for ex in first)
    assert [ex["targets"].tolist() for ex in first] == [ex["targets"].tolist() for ex in again]
    assert mixture.active_schedule() == MixReviewSchedule()
