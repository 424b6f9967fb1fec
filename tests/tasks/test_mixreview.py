"""Mix-Review: the schedule, and the share of old data measured over the mixed stream."""

from __future__ import annotations

import gin
import numpy as np
import pytest
import seqio

from tw_jax.tasks.mixreview import (
    PRESETS,
    SOURCE_FEATURE,
    TEMPORALWIKI,
    MixReviewMixture,
    MixReviewSchedule,
    choice_dataset,
    interleaving,
)

SSM_LENGTHS = {"inputs": 512, "targets": 64}


def test_presets_give_each_papers_counts_per_epoch():
    """M_e for N = 10 new examples, epoch by epoch (the module docstring's table)."""
    counts = {name: [MixReviewSchedule(preset=name).resolve().old_examples(e, 10)
                     for e in range(12)] for name in PRESETS}
    # TemporalWiki, Section 5.2: "We fix the mix-ratio as 2": 2N old examples every epoch.
    assert counts["temporalwiki"] == [20] * 12
    # TemporalWiki's code: mix_len = len(train_dataset), 1:1 and no decay.
    assert counts["temporalwiki_code"] == [10] * 12
    # CKL: N * 4 * 0.7^e, decaying towards 0. Exact: 40 * 0.7 is 28 (27.999… in floats).
    assert counts["ckl"] == [40, 28, 19, 13, 9, 6, 4, 3, 2, 1, 1, 0]
    # CKL's code computes len(new) * 4 * 0.7^epoch once, at epoch 0: 4N every epoch.
    assert counts["ckl_code"] == [40] * 12
    assert MixReviewSchedule(preset="ckl").resolve().old_counts(10) == counts["ckl"]
    assert TEMPORALWIKI.old_counts(17) == [34]
    assert [MixReviewSchedule(preset="ckl").resolve().ratio(e) for e in range(3)] == [
        4.0, pytest.approx(2.8), pytest.approx(1.96)]
    # 17 new examples: floor(68 * 0.7^e), 68 * 0.7^6 = 8.000132
    assert MixReviewSchedule(preset="ckl").resolve().old_counts(17)[:8] == [
        68, 47, 33, 23, 16, 11, 8, 5]


def test_an_epochs_examples_are_new_plus_that_epochs_old_ones():
    ckl = MixReviewSchedule(preset="ckl").resolve()
    assert TEMPORALWIKI.mixed_examples(1, 10) == 30  # one pass over new + old: 3N
    assert MixReviewSchedule(preset="temporalwiki_code").resolve().mixed_examples(2, 10) == 40
    assert ckl.mixed_examples(4, 10) == (10 + 40) + (10 + 28) + (10 + 19) + (10 + 13)
    assert ckl.mixed_examples(1.5, 10) == 50 + 0.5 * 38
    assert MixReviewSchedule(preset="ckl_code").resolve().mixed_examples(3, 10) == 150
    with pytest.raises(ValueError, match="epochs"):
        ckl.mixed_examples(-1, 10)


def test_a_preset_its_overrides_and_bad_values():
    assert MixReviewSchedule().resolve("ckl") == MixReviewSchedule("ckl", 4.0, 0.7)
    assert MixReviewSchedule(preset="ckl_code").resolve("temporalwiki").mix_ratio == 4.0
    assert MixReviewSchedule(mix_ratio=1.5).resolve("ckl") == MixReviewSchedule("ckl", 1.5, 0.7)
    assert MixReviewSchedule(mix_ratio=3, mix_decay=0.5).resolve().old_counts(4) == [
        12, 6, 3, 1, 0]
    with pytest.raises(ValueError, match="name a preset"):
        MixReviewSchedule().resolve()
    with pytest.raises(ValueError, match="name a preset"):
        MixReviewSchedule(mix_ratio=1.0).old_examples(0, 10)
    with pytest.raises(ValueError, match="unknown Mix-Review preset 'cKL'; known: temporalwiki"):
        MixReviewSchedule(preset="cKL")
    with pytest.raises(ValueError, match="the preset 'ckl'"):
        MixReviewSchedule(mix_decay=4.0)  # CKL's "mix-decay 4" is not a per-epoch factor
    with pytest.raises(ValueError, match="mix_ratio"):
        MixReviewSchedule(mix_ratio=-1)


def test_interleaving_spreads_old_examples_evenly():
    assert interleaving(5, 2).tolist() == [0, 0, 0, 1, 0, 0, 1]
    assert interleaving(2, 4).tolist() == [0, 1, 1, 0, 1, 1]
    assert interleaving(3, 0).tolist() == [0, 0, 0]
    schedule = MixReviewSchedule(mix_ratio=1.5, mix_decay=0.5)
    choices = list(choice_dataset(schedule, 4, num_epochs=5).as_numpy_iterator())
    # old per epoch: floor(4 * 1.5 * 0.5^e) = 6, 3, 1 (1.5), 0 (0.75), then 0
    expected = np.concatenate([interleaving(4, m) for m in (6, 3, 1, 0, 0)])
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
    schedule = MixReviewSchedule(mix_ratio=1.5, mix_decay=0.5)
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
    assert [old for _, old in measured] == [int(n * 1.5 * 0.5**e) for e in range(5)]
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
    n = mixture.count_new_examples(lengths, "train")
    # Unbound, a TemporalWiki mixture follows its paper: 2N old examples beside N new ones.
    assert mixture.active_schedule() == TEMPORALWIKI
    assert len(list(mixture.get_dataset(lengths, seed=3, num_epochs=2).as_numpy_iterator())) \
        == 2 * (n + 2 * n)
    assert mixture.examples(1, lengths) == 3 * n
    try:
        gin.parse_config(["tw_jax.tasks.MixReviewSchedule.preset = 'temporalwiki_code'"])
        assert mixture.active_schedule() == MixReviewSchedule("temporalwiki_code", 1.0, 1.0)
        first = list(mixture.get_dataset(lengths, seed=3, num_epochs=2).as_numpy_iterator())
        again = list(mixture.get_dataset(lengths, seed=3, num_epochs=2).as_numpy_iterator())
        gin.parse_config(["tw_jax.tasks.MixReviewSchedule.preset = 'ckl_code'"])
        assert mixture.examples(2, lengths) == 2 * (n + 4 * n)
    finally:
        gin.clear_config()
    assert len(first) == 2 * (n + n)  # 1:1 in both epochs: TemporalWiki's code
    assert all(len(ex["targets"]) == 64 for ex in first)
    assert [ex["targets"].tolist() for ex in first] == [ex["targets"].tolist() for ex in again]
    assert mixture.active_schedule() == TEMPORALWIKI
