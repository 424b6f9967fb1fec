"""FUAR reproduces CKL Table 2's FUAR column; multi-phase sums, undefined tasks and no gain."""

from __future__ import annotations

import math

import pytest

from tw_jax.evaluate.fuar import (
    fuar,
    single_phase_fuar,
    stability_plasticity_final,
    stability_plasticity_preprint,
)

# CKL (Jang et al., 2022) Table 2, EM on IL / UL / NL / NLE and the FUAR column, from
# /work/shared/papers/ckl.txt ("Method | # of Params | IL | UL | NL | NLE | FUAR").
# FUAR there uses T^F_0 = IL, T^U_1 = UL, T^A_1 = NL (NLE is not part of it).
INITIAL = {"unchanged": 24.17, "updated": 1.62, "new": 1.88, "new_easy": 10.32}
TABLE_2 = {
    "T5-Vanilla": ((12.89, 10.17, 3.77, 17.75), "1.08"),
    "T5-RecAdam": ((13.20, 12.55, 4.02, 17.85), "0.84"),
    "T5-MixReview": ((13.92, 6.49, 2.89, 14.86), "1.74"),
    "T5-LoRA": ((16.58, 12.77, 4.52, 19.56), "0.55"),
    "T5-Kadapters (k=2)": ((19.59, 12.34, 5.03, 18.75), "0.33"),
    "T5-Kadapters (k=3)": ((19.76, 12.66, 4.02, 19.00), "0.33"),
    "T5-Modular": ((20.29, 12.66, 4.65, 19.24), "0.28"),
}


@pytest.mark.parametrize("method", list(TABLE_2))
def test_ckl_table_2_fuar_column(method):
    scores, expected = TABLE_2[method]
    updated = dict(zip(("unchanged", "updated", "new", "new_easy"), scores, strict=True))
    assert str(single_phase_fuar(INITIAL, updated)) == expected


def test_vanilla_sums_match_the_notes():
    vanilla = dict(zip(("unchanged", "updated", "new"), TABLE_2["T5-Vanilla"][0][:3], strict=True))
    result = single_phase_fuar(INITIAL, vanilla)
    assert result.forgotten == pytest.approx(11.28)
    assert result.gained == pytest.approx(8.55 + 1.89)
    assert result.value == pytest.approx(11.28 / 10.44)


def test_two_phases_sum_every_earlier_forget_task():
    # Phases 0, 1, 2. T^F_0 = "a", T^F_1 = "b"; T^U_1 = "u1", T^A_2 = "n2".
    scores = {
        "a": [50.0, 40.0, 30.0],   # forgets 10 by phase 1 and 20 by phase 2 -> 30
        "b": [0.0, 20.0, 15.0],    # learned in phase 1, 5 forgotten by phase 2
        "u1": [1.0, 6.0, 2.0],     # +5 at phase 1 (later losses are not gains' concern)
        "n2": [0.0, 3.0, 8.0],     # +5 at phase 2 relative to phase 1
    }
    result = fuar(scores, ["a", "b", None], [None, "u1", None], [None, None, "n2"])
    assert result.forgotten == pytest.approx(35.0)
    assert result.gained == pytest.approx(10.0)
    assert str(result) == "3.50"


def test_negative_gaps_count_as_zero_and_zero_denominator_is_no_gain():
    scores = {"il": [10.0, 12.0], "ul": [5.0, 4.0], "nl": [3.0, 3.0]}
    result = fuar(scores, ["il"], [None, "ul"], [None, "nl"])
    assert result.forgotten == 0.0 and result.gained == 0.0
    assert result.no_gain and math.isinf(result.value) and str(result) == "no gain"
    # Forgetting with no gain is also "no gain", never a division by zero.
    assert str(fuar({"il": [10.0, 1.0], "ul": [5.0, 5.0]}, ["il"], [None, "ul"], [])) == "no gain"


def test_zero_forgetting_with_gain_is_zero():
    assert fuar({"il": [1.0, 2.0], "nl": [0.0, 4.0]}, ["il"], [], [None, "nl"]).value == 0.0


def test_undefined_tasks_are_skipped_and_missing_scores_are_errors():
    result = single_phase_fuar(INITIAL, {"unchanged": 20.17, "new": 3.88}, update=None)
    assert result.forgotten == pytest.approx(4.0) and result.gained == pytest.approx(2.0)
    with pytest.raises(ValueError, match="'updated' under LM_1"):
        single_phase_fuar(INITIAL, {"unchanged": 20.0, "new": 3.0})
    with pytest.raises(ValueError, match="one score per phase"):
        fuar({"a": [1.0, 2.0], "b": [1.0]}, ["a"], [], [])
    with pytest.raises(ValueError, match="two phases"):
        fuar({"a": [1.0]}, ["a"], [], [])


def test_stability_plasticity_averages_of_both_versions():
    # TemporalWiki preprint Table 3, DIFF on 0809: Un 395.33, Up 246.49, N 301.05.
    assert stability_plasticity_preprint(395.33, 246.49, 301.05) == pytest.approx(334.55)
    assert stability_plasticity_final(300.0, 200.0) == 250.0
