"""Replay (TiC-LM): each period's mixture of its DiffSet with every earlier month's data, its
exact rates, and the shares measured over the mixed stream."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from fractions import Fraction

import gin
import pytest
import seqio

from tw_jax.tasks import names
from tw_jax.tasks.replay import SOURCE_FEATURE, ReplayMixture, ReplaySettings, chain
from tw_jax.time import Period, Snapshot

SSM_LENGTHS = {"inputs": 512, "targets": 64}
DRAWS = 2500


def period(text: str) -> Period:
    return Period.parse(text)


def rates(mixture: seqio.Mixture) -> dict[str, float]:
    """What seqio samples by: each member task's rate."""
    return {task.name: mixture.get_rate(task) for task in mixture.tasks}


@pytest.fixture()
def bound():
    """gin bindings for one test, cleared after it."""

    def bind(*lines: str) -> None:
        gin.parse_config(list(lines))

    yield bind
    gin.clear_config()


def test_names_and_the_chain_of_earlier_periods():
    assert names.replay(period("0809")) == "twiki_replay_0809_{objective}"
    assert names.replay(period("2024-12_2025-01"), "lm_llama_3_2_1b") == \
        "twiki_replay_202412_202501_lm_llama_3_2_1b"
    periods = [period(p) for p in ("1011", "0809", "0910")]
    assert chain(period("0809"), periods) == (Snapshot.parse("08"), [])
    assert chain(period("1011"), periods) == (Snapshot.parse("08"),
                                              [period("0809"), period("0910")])
    # a gap ends the chain: 2025-03's period starts where no period ends
    dated = [period(p) for p in ("2024-12_2025-01", "2025-01_2025-02", "2025-03_2025-04")]
    assert chain(dated[1], dated) == (Snapshot.parse("2024-12"), [dated[0]])
    assert chain(dated[2], dated) == (Snapshot.parse("2025-03"), [])


def test_settings_split_the_old_share_exactly_and_refuse_bad_values():
    f = Fraction
    assert ReplaySettings().shares(None, 1) == [f(1, 2), f(1, 2)]
    assert ReplaySettings().shares(None, 3) == [f(1, 2), f(1, 6), f(1, 6), f(1, 6)]
    # recent: the newest old source (last) weighs 1, each older one decay times the next
    assert ReplaySettings(ratio=0.7, weighting="recent", decay=0.5).shares(None, 3) == [
        f(3, 10), f(7, 10) * f(1, 7), f(7, 10) * f(2, 7), f(7, 10) * f(4, 7)]
    assert ReplaySettings(weighting="recent", decay=1).shares(None, 2) == [f(1, 2), f(1, 4),
                                                                          f(1, 4)]
    assert ReplaySettings(ratio=0.1, weighting="tokens").shares([30, 10], 2) == [
        f(9, 10), f(3, 40), f(1, 40)]
    assert ReplaySettings(ratio=0).shares(None, 2) == [1, 0, 0]
    for bad, message in ((dict(ratio=1.0), r"\[0, 1\)"), (dict(ratio=-0.1), r"\[0, 1\)"),
                         (dict(ratio=True), "finite number"),
                         (dict(weighting="Uniform"), "unknown replay weighting 'Uniform'; "
                                                     "known: uniform, tokens, recent"),
                         (dict(decay=0), r"\(0, 1\]"), (dict(decay=1.5), r"\(0, 1\]")):
        with pytest.raises(ValueError, match=message):
            ReplaySettings(**bad)
    with pytest.raises(ValueError, match="'tokens' needs every old source's size"):
        ReplaySettings(weighting="tokens").shares(None, 2)


def test_tic_lm_presets_give_its_two_ratios():
    """TiC-LM's Replay (α=1/2): half new, the old half uniform; Replay (α=1/t): with K old
    sources, each of the K + 1 months 1/(K + 1)."""
    f = Fraction
    half, per_month = ReplaySettings(preset="tic_lm_half"), ReplaySettings(preset="tic_lm_1_over_t")
    assert half.shares(None, 3) == ReplaySettings().shares(None, 3) == [f(1, 2)] + [f(1, 6)] * 3
    assert per_month.shares(None, 1) == [f(1, 2), f(1, 2)]
    assert per_month.shares(None, 2) == [f(1, 3)] * 3
    assert per_month.shares(None, 113) == [f(1, 114)] * 114  # TiC-LM's last month
    for bad, message in (
        (dict(preset="tic_lm_third"), "unknown replay preset 'tic_lm_third'; known: "
                                      "tic_lm_half, tic_lm_1_over_t"),
        (dict(preset="tic_lm_1_over_t", ratio=0.25), r"fixes the ratio and the weighting; "
                                                     r"leave ratio \(0.25\)"),
        (dict(preset="tic_lm_half", weighting="recent"), "weighting \\('recent'\\)"),
    ):
        with pytest.raises(ValueError, match=message):
            ReplaySettings(**bad)


def test_members_and_rates_of_the_first_and_second_period(twiki, bound):
    registered = set(twiki["names"])
    assert {names.replay(period(p), objective) for p in ("0809", "0910", "1011")
            for objective in ("lm", "ssm")} <= registered
    for objective in ("lm", "ssm"):
        diffset_0809, diffset_0910 = (names.diffset(period(p), objective)
                                      for p in ("0809", "0910"))
        initial = names.full(Snapshot.parse("08"), objective)
        first = seqio.get_mixture_or_task(names.replay(period("0809"), objective))
        second = seqio.get_mixture_or_task(names.replay(period("0910"), objective))
        assert isinstance(first, ReplayMixture) and isinstance(second, ReplayMixture)
        # the first period replays the initial snapshot alone; the second adds 0809's DiffSet
        assert first.members == (diffset_0809, initial)
        assert second.members == (diffset_0910, initial, diffset_0809)
        assert rates(first) == {diffset_0809: 0.5, initial: 0.5}
        assert rates(second) == {diffset_0910: 0.5, initial: 0.25, diffset_0809: 0.25}
        # Mix-Review's mixture of the same period is untouched
        assert [t.name for t in seqio.get_mixture_or_task(
            names.mixreview(period("0910"), objective)).tasks] == sorted([diffset_0910, initial])
        bound("tw_jax.tasks.ReplaySettings.ratio = 0.25",
              "tw_jax.tasks.ReplaySettings.weighting = 'recent'")
        assert rates(first) == {diffset_0809: 0.75, initial: 0.25}
        assert second.exact_shares() == {diffset_0910: Fraction(3, 4), diffset_0809: Fraction(1, 6),
                                         initial: Fraction(1, 12)}
        assert rates(second) == {diffset_0910: 0.75, diffset_0809: 1 / 6, initial: 1 / 12}
        # tokens: each source's size as its stage's stats.json records it
        bound("tw_jax.tasks.ReplaySettings.weighting = 'tokens'")
        data = twiki["data_dir"]
        if objective == "lm":
            stats = [(data / "08/full/stats.json", "full", "tokens"),
                     (data / "0809/diffset/stats.json", "diffset", "tokens")]
        else:
            stats = [(data / "08/ssm/stats.json", "full", "examples"),
                     (data / "0809/ssm/stats.json", "diffset", "examples")]
        sizes = [json.loads(path.read_text())[name][field] for path, name, field in stats]
        assert second.exact_shares() == {
            diffset_0910: Fraction(3, 4), initial: Fraction(1, 4) * Fraction(sizes[0], sum(sizes)),
            diffset_0809: Fraction(1, 4) * Fraction(sizes[1], sum(sizes))}
        assert rates(first) == {diffset_0809: 0.75, initial: 0.25}
        gin.clear_config()
    assert rates(second) == {names.diffset(period("0910"), "ssm"): 0.5,
                             names.full(Snapshot.parse("08"), "ssm"): 0.25,
                             names.diffset(period("0809"), "ssm"): 0.25}


def within_binomial(count: int, draws: int, share: float, sigmas: float = 4.0) -> bool:
    return abs(count - draws * share) <= sigmas * math.sqrt(draws * share * (1 - share))


def test_the_stream_draws_old_data_at_the_ratio_and_each_old_month_by_its_weight(twiki, bound):
    """Over DRAWS examples of period 1011's SSM mixture: the old share is the ratio and each old
    source (08, 0809, 0910) has its weight's share, within 4 binomial sigmas; each example's
    origin flag tells the truth (its first 32 input tokens are an example of that source)."""
    mixture = seqio.get_mixture_or_task("twiki_replay_1011_ssm")
    sources = ("1011", "08", "0809", "0910")  # members: the new DiffSet, then oldest first
    vocabulary = mixture.output_features["inputs"].vocabulary

    def heads(records):
        return {tuple((list(vocabulary.encode(r["inputs"])) + [vocabulary.eos_id])[:32])
                for r in records}

    own = [heads(twiki["ssm"][source]) for source in sources]
    for settings, ratio, weights in (
        ("weighting = 'uniform'", 0.4, [Fraction(1, 3)] * 3),
        ("weighting = 'recent'", 0.4, [Fraction(1, 7), Fraction(2, 7), Fraction(4, 7)]),
        # TiC-LM's α = 1/t: the 4 months 1011, 08, 0809, 0910 a quarter each
        ("preset = 'tic_lm_1_over_t'", 0.75, [Fraction(1, 3)] * 3),
    ):
        bound(f"tw_jax.tasks.ReplaySettings.{settings}",
              *(["tw_jax.tasks.ReplaySettings.ratio = 0.4"] if ratio == 0.4 else []))
        stream = list(mixture.get_dataset(SSM_LENGTHS, seed=11,
                                          passthrough_features=[SOURCE_FEATURE])
                      .take(DRAWS).as_numpy_iterator())
        counts = Counter(int(example[SOURCE_FEATURE]) for example in stream)
        assert len(stream) == DRAWS and set(counts) == {0, 1, 2, 3}
        old = DRAWS - counts[0]
        assert within_binomial(old, DRAWS, ratio), (settings, counts)
        for index, weight in enumerate(weights, start=1):
            assert within_binomial(counts[index], DRAWS, float(ratio * weight)), (settings,
                                                                                 counts)
        for example in stream:
            assert tuple(example["inputs"][:32].tolist()) in own[int(example[SOURCE_FEATURE])]
        assert set(stream[0]) == {"inputs", "targets", SOURCE_FEATURE}
        gin.clear_config()


def test_lm_stream_is_blocks_of_the_members_and_a_pass_counts_new_over_its_share(twiki):
    """Causal LM: every example is a full block (so example shares are token shares) of text of
    the member its flag names (each stretch between two EOS, 8 tokens or more, opens with 8
    tokens of one of that member's articles); a pass is N / (1 - ratio) examples."""
    mixture = seqio.get_mixture_or_task("twiki_replay_0910_lm")
    vocabulary = mixture.output_features["targets"].vocabulary
    eos, lengths, data = vocabulary.eos_id, {"targets": 64}, twiki["data_dir"]

    def grams(jsonl) -> set[tuple[int, ...]]:
        found = set()
        for line in jsonl.read_text(encoding="utf-8").splitlines():
            tokens = list(vocabulary.encode(json.loads(line)["text"]))
            found |= {tuple(tokens[i:i + 8]) for i in range(len(tokens) - 7)}
        return found

    own = [grams(data / path) for path in (
        "0910/diffset/diffset.jsonl", "08/full/full.jsonl", "0809/diffset/diffset.jsonl")]
    stream = list(mixture.get_dataset(lengths, seed=5, passthrough_features=[SOURCE_FEATURE])
                  .take(600).as_numpy_iterator())
    assert {len(example["targets"]) for example in stream} == {64}
    checked = 0
    for example in stream:
        tokens, source = example["targets"].tolist(), int(example[SOURCE_FEATURE])
        cuts = [-1, *(i for i, t in enumerate(tokens) if t == eos), len(tokens)]
        for start, end in itertools.pairwise(cuts):
            if end - start > 8:
                assert tuple(tokens[start + 1:start + 9]) in own[source]
                checked += 1
    assert checked > len(stream)
    counts = Counter(int(example[SOURCE_FEATURE]) for example in stream)
    assert within_binomial(counts[0], 600, 0.5) and within_binomial(counts[2], 600, 0.25)
    new = sum(1 for _ in mixture.new_task.get_dataset(lengths, shuffle=False, num_epochs=1))
    assert mixture.count_new_examples(lengths) == new
    assert mixture.examples(2, lengths) == 2 * new / 0.5
    fixed = ReplayMixture("twiki_replay_test", mixture.members[0], mixture.old,
                          settings=ReplaySettings(ratio=0.75), new_examples_per_epoch=10)
    assert fixed.examples(1, lengths) == 40
    assert rates(fixed) == {mixture.members[0]: 0.25, mixture.members[1]: 0.375,
                            mixture.members[2]: 0.375}


def test_the_gin_files_train_diff_on_the_replay_mixture_at_the_macro_ratio(bound):
    from tw_jax.runtime import gin_setup

    for model in ("t5_tiny", "gpt2_tiny"):
        gin_setup.parse(["replay.gin", f"models/{model}.gin", "runs/cpu_smoke.gin"],
                        ["MODEL_DIR='m'", "REPLAY_RATIO = 0.25"],
                        required_macros=gin_setup.MACROS_TRAIN)
        assert gin.query_parameter("%MIXTURE_OR_TASK_NAME") == "twiki_replay_0809_{objective}"
        assert gin.query_parameter("tw_jax.models.ModelSettings.freeze") == "none"
        assert ReplaySettings() == ReplaySettings(ratio=0.25, weighting="uniform")
        gin.clear_config()
    gin_setup.parse(["replay.gin", "models/t5_tiny.gin"], ["MODEL_DIR='m'"])
    assert ReplaySettings() == ReplaySettings(ratio=0.5)
    gin.clear_config()
    gin_setup.parse(["replay.gin", "models/t5_tiny.gin"],
                    ["MODEL_DIR='m'", "REPLAY_PRESET = 'tic_lm_1_over_t'"])
    assert ReplaySettings() == ReplaySettings(preset="tic_lm_1_over_t")
