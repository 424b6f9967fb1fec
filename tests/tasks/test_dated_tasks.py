"""A data folder named with years (``2021-11_2021-12/``, ``2021-11/``) registers the same tasks as
the 2021 layout, under names that carry the years, across the year boundary; one period in two
spellings is an error."""

from __future__ import annotations

from pathlib import Path

import pytest
import seqio
from dated_data import dated_copy, renamed

import tw_jax.tasks
from tw_jax.tasks import names
from tw_jax.tasks.layout import LayoutError, discover, spelled
from tw_jax.time import Period, Snapshot


@pytest.fixture(scope="module")
def dated(task_data, tmp_path_factory) -> dict:
    folder = dated_copy(task_data["data_dir"], tmp_path_factory.mktemp("dated") / "data")
    legacy = tw_jax.tasks.register_all(task_data["data_dir"], t5_vocab=str(task_data["t5"]),
                                       gpt2_vocab=str(task_data["gpt2"]))
    found = tw_jax.tasks.register_all(folder, t5_vocab=str(task_data["t5"]),
                                      gpt2_vocab=str(task_data["gpt2"]))
    return {"folder": folder, "legacy": legacy, "names": found}


def test_every_task_of_the_2021_layout_is_there_with_its_years(dated):
    assert sorted(dated["names"]) == sorted(renamed(n) for n in dated["legacy"])
    assert {"twiki_diffset_202111_202112_ssm", "twiki_diffset_202112_202201_lm",
            "twiki_full_202111_lm", "twiki_full_202201_ssm", "twiki_probes_202112_202201",
            "twiki_probes_202112_202201_updated_object", "twiki_lighttuning_202111_202112_all",
            "twiki_mixreview_202201_202202_lm"} <= set(dated["names"])


def test_periods_cross_the_year_and_mix_review_replays_the_first_snapshot(dated):
    layout = discover(dated["folder"])
    assert [p.name for p in layout.pairs] == ["2021-11_2021-12", "2021-12_2022-01",
                                              "2022-01_2022-02"]
    crossing = layout.pair(Period.parse("2021-12_2022-01"))
    assert layout.initial_snapshot(crossing) == Snapshot.parse("2021-11")
    mixture = seqio.get_mixture_or_task(names.mixreview(crossing.period, "lm"))
    assert [t.name for t in mixture.tasks] == ["twiki_diffset_202112_202201_lm",
                                               "twiki_full_202111_lm"]


def test_the_examples_are_the_2021_folders(dated, task_data):
    def first(name: str, data_dir: Path) -> dict:
        tw_jax.tasks.register_all(data_dir, t5_vocab=str(task_data["t5"]),
                                  gpt2_vocab=str(task_data["gpt2"]))
        dataset = seqio.get_mixture_or_task(name).get_dataset(
            None, split="validation", shuffle=False, num_epochs=1)
        return {k: v.tolist() for k, v in next(dataset.as_numpy_iterator()).items()
                if not isinstance(v, bytes)}

    for legacy in ("twiki_probes_0910_new", "twiki_diffset_0910_ssm"):
        assert first(renamed(legacy), dated["folder"]) == first(legacy, task_data["data_dir"])


def test_one_period_in_two_spellings_is_an_error(task_data, tmp_path):
    folder = dated_copy(task_data["data_dir"], tmp_path / "data")
    (folder / "0809").symlink_to(task_data["data_dir"] / "0809", target_is_directory=True)
    (folder / "2021-08_2021-09").symlink_to(task_data["data_dir"] / "0809",
                                            target_is_directory=True)
    with pytest.raises(LayoutError, match="0809/ and 2021-08_2021-09/ are one period"):
        discover(folder)


def test_a_period_is_found_in_either_spelling(task_data):
    data_dir = task_data["data_dir"]
    assert spelled(data_dir, Period.parse("2021-09_2021-10")).name == "0910"
    assert spelled(data_dir, Period.parse("2024-12_2025-01")).name == "2024-12_2025-01"
