"""The dates of dumps, from their Wikimedia names: how a folder of dumps is found and paired into
snapshots, what its periods are called, and the one-line refusals (an old dump not before the
new one, Wikipedia and Wikidata of different weeks, a dump without a date, a split dump). The
files here are empty: only their names are read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tw_jax.errors import UsageError
from tw_jax.preprocess.build.dumps import find_dumps
from tw_jax.preprocess.build.plan import plan
from tw_jax.preprocess.dump_dates import (
    check_order,
    check_same_snapshot,
    dump_date,
    period_of_dumps,
    stage_folder,
)
from tw_jax.preprocess.probes.cli import check_dates

WP = "enwiki-{}-pages-articles-multistream.xml.bz2"
WD = "wikidata-{}-all.json.bz2"


def _folder(root: Path, *names: str) -> Path:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    return root


def _titles(stages) -> list[str]:
    return [f"{s.title}: {Path(s.folder).relative_to(Path(s.folder).parents[1])}"
            for s in stages]


def test_a_dumps_date_is_read_from_its_wikimedia_name():
    assert dump_date("/d/enwiki-20241201-pages-articles-multistream.xml.bz2").iso == "2024-12"
    assert dump_date("gs://b/wikidata-20241220-all.json.gz").iso == "2024-12-20"
    assert dump_date("/d/latest-all.json.bz2") is None
    assert period_of_dumps(WP.format("20241201"), WP.format("20250101")).name == (
        "2024-12_2025-01")
    assert period_of_dumps(WP.format("20240201"), WP.format("20240220")).name == (
        "2024-02_2024-02-20")  # twice-monthly dumps: a period of 19 days
    assert period_of_dumps(WP.format("20240201"), WP.format("20240220")).days == 19
    assert period_of_dumps(WP.format("20210801"), WP.format("20210901")).name == "0809"
    assert period_of_dumps("old.xml.bz2", WP.format("20210901")) is None


def test_dates_that_cannot_be_one_period_are_one_line():
    with pytest.raises(UsageError, match=r"^the old dump a/enwiki-20250101-pages-articles"
                       r"-multistream.xml.bz2 \(2025-01-01\) is not before the new one .*"
                       r"\(2024-12-01\): give the earlier dump as --old$"):
        check_order(f"a/{WP.format('20250101')}", f"a/{WP.format('20241201')}")
    check_order("old.xml", "new.xml")  # names without dates are not checked
    with pytest.raises(UsageError, match=r"^the Wikidata dump wikidata-20241212-all.json.bz2 "
                       r"\(2024-12-12\) is 11 days from the Wikipedia dump enwiki-20241201.* "
                       r"\(2024-12-01\), more than --max-date-gap 7: give the dumps of one "
                       r"snapshot$"):
        check_same_snapshot(WD.format("20241212"), WP.format("20241201"))
    check_same_snapshot(WD.format("20241204"), WP.format("20241201"))
    check_same_snapshot(WD.format("20241212"), WP.format("20241201"), max_gap=11)
    with pytest.raises(UsageError, match="the old Wikidata dump"):
        check_dates(WD.format("20250102"), WD.format("20241202"), WP.format("20241201"), None, 7)
    with pytest.raises(UsageError, match="wikidata-20241125-all.json.bz2 .* 6 days"):
        check_dates(WD.format("20241125"), WD.format("20241202"), WP.format("20241201"),
                    WP.format("20241119"), 5)


def test_a_folder_of_dumps_becomes_snapshots_in_date_order(tmp_path):
    found = find_dumps(str(_folder(
        tmp_path,
        f"wp/{WP.format('20250101')}", f"wp/{WP.format('20241201')}",
        f"wp/{WP.format('20241101')}", "wp/enwiki-20241101-pages-articles.xml.bz2",
        "wp/enwiki-20241101-pages-articles-multistream-index.txt.bz2",
        f"wd/{WD.format('20241230')}", f"wd/{WD.format('20241202')}",
        f"wd/{WD.format('20241104')}", "wd/wikidata-20241104-all.json.gz",
        f"wd/{WD.format('20240701')}", "README.txt", "enwiki-20241101-sha1sums.txt")))
    assert [(s.snapshot.iso, Path(s.wikipedia).name, Path(s.wikidata).name)
            for s in found.snapshots] == [
        ("2024-11", WP.format("20241101"), WD.format("20241104")),
        ("2024-12", WP.format("20241201"), WD.format("20241202")),
        ("2025-01", WP.format("20250101"), WD.format("20241230"))]
    assert sorted(Path(p).name for p in found.copies) == [  # multistream and bz2 preferred
        "enwiki-20241101-pages-articles.xml.bz2", "wikidata-20241104-all.json.gz"]
    assert [Path(p).name for p in found.unpaired_wikidata] == [WD.format("20240701")]
    assert _titles(plan(str(tmp_path / "data"), found.snapshots)) == [
        "2024-11 full: 2024-11/full", "2024-11 ssm: 2024-11/ssm",
        "2024-11→2024-12 diffset: 2024-11_2024-12/diffset",
        "2024-11→2024-12 probes: 2024-11_2024-12/probes",
        "2024-11→2024-12 ssm: 2024-11_2024-12/ssm",
        "2024-12→2025-01 diffset: 2024-12_2025-01/diffset",
        "2024-12→2025-01 probes: 2024-12_2025-01/probes",
        "2024-12→2025-01 ssm: 2024-12_2025-01/ssm"]


def test_twice_monthly_dumps_and_the_2021_benchmarks_names(tmp_path):
    twice = find_dumps(str(_folder(
        tmp_path / "twice", WP.format("20240201"), WP.format("20240220"), WP.format("20240301"),
        WD.format("20240205"), WD.format("20240219"), WD.format("20240304"))))
    assert _titles(plan(str(tmp_path / "d"), twice.snapshots, ssm=False))[1:] == [
        "2024-02→2024-02-20 diffset: 2024-02_2024-02-20/diffset",
        "2024-02→2024-02-20 probes: 2024-02_2024-02-20/probes",
        "2024-02-20→2024-03 diffset: 2024-02-20_2024-03/diffset",
        "2024-02-20→2024-03 probes: 2024-02-20_2024-03/probes"]
    legacy = find_dumps(str(_folder(tmp_path / "2021", *(
        name.format(f"2021{m}01") for m in ("08", "09", "10") for name in (WP, WD)))))
    assert _titles(plan(str(tmp_path / "d"), legacy.snapshots, ssm=False)) == [
        "08 full: 08/full", "0809 diffset: 0809/diffset", "0809 probes: 0809/probes",
        "0910 diffset: 0910/diffset", "0910 probes: 0910/probes"]


def test_a_data_folders_existing_spelling_is_kept(tmp_path):
    """Next month's dumps added to the 2021 benchmark's: its periods now have years, and the
    folders already built keep their names (one period never gets two folders)."""
    (tmp_path / "data" / "0809").mkdir(parents=True)
    (tmp_path / "data" / "08").mkdir()
    found = find_dumps(str(_folder(tmp_path / "dumps", *(
        name.format(day) for day in ("20210801", "20210901", "20220101")
        for name in (WP, WD)))))
    assert _titles(plan(str(tmp_path / "data"), found.snapshots, ssm=False)) == [
        "2021-08 full: 08/full", "2021-08→2021-09 diffset: 0809/diffset",
        "2021-08→2021-09 probes: 0809/probes",
        "2021-09→2022-01 diffset: 2021-09_2022-01/diffset",
        "2021-09→2022-01 probes: 2021-09_2022-01/probes"]
    assert stage_folder(str(tmp_path / "data"), period_of_dumps(
        WP.format("20210801"), WP.format("20210901")).dated(), "ssm").endswith("/0809/ssm")


@pytest.mark.parametrize(("names", "message"), [
    ((WP.format("20241201"), WD.format("20241202"), WD.format("20250103")),
     r"1 Wikipedia dump\(s\) found, a build needs two days at least"),
    ((WP.format("20241201"), WP.format("20250101"), WD.format("20241202"),
      WD.format("20250110")),
     r"enwiki-20250101-pages-articles-multistream.xml.bz2: no Wikidata dump within "
     r"--max-date-gap 7 days of 2025-01-01 \(the nearest unused is .*wikidata-20250110-all."
     r"json.bz2, 9 days away\); add wikidata-YYYYMMDD-all.json.bz2 of that week$"),
    ((WP.format("20241201"), WP.format("20250101"), WD.format("20241202"),
      "latest-all.json.bz2", "wikidata-latest-all.json.bz2"),
     r"/latest-all.json.bz2 has no date in its name .*: rename it with its dump's date$"),
    ((WP.format("20241201"), "enwiki-20250101-pages-articles-multistream1.xml-p1p41242.bz2",
      "enwiki-20250101-pages-articles-multistream2.xml-p41243p151573.bz2",
      WD.format("20241202"), WD.format("20250101")),
     r"multistream1.xml-p1p41242.bz2 is one part of a split Wikipedia dump \(2 such files\): "
     r"give the one-file dump"),
])
def test_a_folder_that_cannot_be_built_is_one_line(tmp_path, names, message):
    with pytest.raises(UsageError, match=message):
        find_dumps(str(_folder(tmp_path, *names)))
