"""tw_jax.time: snapshots and periods in every spelling, the 2021 layout read as dates, chains,
the results marks, and a 14-month chain named and ordered end to end (no training)."""

from __future__ import annotations

import datetime
import random

import pytest

from tw_jax.evaluate.report import ResultIndex, probe_table
from tw_jax.evaluate.results import Result
from tw_jax.tasks import names
from tw_jax.time import (
    BASE,
    NO_MONTH,
    Period,
    Snapshot,
    TimeError,
    benchmark_spelling,
    check_chain,
    parse_chain,
    parse_evaluated,
    parse_trained,
    parse_years,
    periods_between,
    release_full_snapshot,
    release_probe_period,
    wikidata_date,
)


def _day(text: str) -> datetime.date:
    return datetime.date.fromisoformat(text)


@pytest.mark.parametrize(("text", "date", "name", "token"), [
    ("2024-12", "2024-12-01", "2024-12", "202412"),
    ("2024-12-01", "2024-12-01", "2024-12", "202412"),
    ("202412", "2024-12-01", "2024-12", "202412"),
    ("20241220", "2024-12-20", "2024-12-20", "20241220"),
    ("2024-02-20", "2024-02-20", "2024-02-20", "20240220"),
    ("08", "2021-08-01", "08", "08"),
    ("12", "2021-12-01", "12", "12"),
    ("01", "2022-01-01", "01", "01"),
    ("07", "2022-07-01", "07", "07"),
    ("00", "2021-07-01", "00", "00"),
])
def test_snapshots_in_every_spelling(text, date, name, token):
    snapshot = Snapshot.parse(text)
    assert (snapshot.date, snapshot.name, snapshot.token) == (_day(date), name, token)
    assert Snapshot.parse(snapshot.name) == snapshot  # the name reads back


def test_a_snapshot_of_the_2021_layout_equals_its_dated_spelling():
    assert Snapshot.parse("08") == Snapshot.parse("2021-08") == Snapshot.month(2021, 8)
    assert hash(Snapshot.parse("08")) == hash(Snapshot.parse("2021-08"))
    assert Snapshot.parse("2021-08").in_2021_layout().name == "08"
    assert Snapshot.parse("08").dated().name == "2021-08"
    with pytest.raises(TimeError, match="no name in the 2021 layout"):
        Snapshot.parse("2024-12").in_2021_layout()


@pytest.mark.parametrize("text", ["13", "2024-13", "2024-02-30", "2024", "Dec 2024", "",
                                  "2024-12-1"])
def test_bad_snapshots_say_the_forms(text):
    with pytest.raises(TimeError, match="snapshot|not a date|not a month"):
        Snapshot.parse(text)


def test_dump_names_carry_their_snapshot():
    assert Snapshot.of_dump("enwiki-20241201-pages-articles-multistream.xml.bz2").iso == "2024-12"
    assert Snapshot.of_dump("gs://b/dumps/wikidata-20241202-all.json.bz2").iso == "2024-12-02"
    assert Snapshot.of_dump("enwiki-20240220-pages-articles.xml.bz2").dump == "20240220"
    assert Snapshot.of_dump("pages-articles.xml") is None
    assert Snapshot.of_dump("enwiki-20241301-pages-articles.xml.bz2") is None  # no 13th month
    assert Snapshot.month(2021, 8).long_name == "August 2021"
    assert Snapshot.parse("2024-02-20").long_name == "20 February 2024"
    assert Snapshot.parse("2024-11").plus_months(3).iso == "2025-02"
    assert Snapshot.parse("2024-01-31").plus_months(1).iso == "2024-02-29"


@pytest.mark.parametrize(("text", "old", "new", "name", "token", "label"), [
    ("2024-12_2025-01", "2024-12-01", "2025-01-01", "2024-12_2025-01", "202412_202501",
     "2024-12→2025-01"),
    ("202412_202501", "2024-12-01", "2025-01-01", "2024-12_2025-01", "202412_202501",
     "2024-12→2025-01"),
    ("2024-02_2024-02-20", "2024-02-01", "2024-02-20", "2024-02_2024-02-20", "202402_20240220",
     "2024-02→2024-02-20"),
    ("20240201_20240220", "2024-02-01", "2024-02-20", "2024-02_2024-02-20", "202402_20240220",
     "2024-02→2024-02-20"),
    ("0809", "2021-08-01", "2021-09-01", "0809", "0809", "0809"),
    ("1201", "2021-12-01", "2022-01-01", "1201", "1201", "1201"),
    ("0102", "2022-01-01", "2022-02-01", "0102", "0102", "0102"),
    ("0810", "2021-08-01", "2021-10-01", "0810", "0810", "0810"),
    ("0001", "2021-07-01", "2022-01-01", "0001", "0001", "0001"),  # CKL's first phase
])
def test_periods_in_every_spelling(text, old, new, name, token, label):
    period = Period.parse(text)
    assert (period.old.date, period.new.date) == (_day(old), _day(new))
    assert (period.name, period.token, period.label) == (name, token, label)
    assert Period.parse(period.name) == Period.parse(period.token) == period


def test_a_19_day_period_and_the_2021_layout_as_dates():
    twice = Period.parse("2024-02_2024-02-20")
    assert twice.days == 19 and Period.parse("2024-02-20_2024-03").follows(twice)
    assert Period.parse("0809") == Period.parse("2021-08_2021-09")  # one period, two spellings
    assert Period.parse("0809").legacy and not Period.parse("2021-08_2021-09").legacy
    assert Period.parse("2021-08_2021-09").in_2021_layout().name == "0809"
    assert Period.parse("0808").days == 365  # to the first August after: a year
    assert sorted(Period.parse(p) for p in ("0102", "1112", "1201", "0809")) == [
        Period.parse(p) for p in ("0809", "1112", "1201", "0102")]  # by date, not as strings


@pytest.mark.parametrize(("text", "message"), [
    ("2025-01_2024-12", "not before"),
    ("2024-12_2024-12", "not before"),
    ("1301", "not a month"),
    ("0813", "not a month"),
    ("2024-12", "not a period"),
    ("2024-12_08", "not a period"),
    ("2024-12__2025-01", "not a period"),
])
def test_bad_periods_say_what_is_wrong(text, message):
    with pytest.raises(TimeError, match=message):
        Period.parse(text)


def test_chains_from_periods_or_the_snapshots_between_them():
    assert [p.name for p in parse_chain(["2024-11", "2024-12", "2025-01"])] == [
        "2024-11_2024-12", "2024-12_2025-01"]
    assert [p.name for p in parse_chain(["1112", "1201", "0102"])] == ["1112", "1201", "0102"]
    assert [p.name for p in parse_chain(["2024-02", "2024-02-20", "2024-03"])] == [
        "2024-02_2024-02-20", "2024-02-20_2024-03"]
    with pytest.raises(TimeError, match="0809 then 1011: a chain continues from .* \\(09\\)"):
        parse_chain(["0809", "1011"])
    with pytest.raises(TimeError, match="one snapshot is no period"):
        parse_chain(["2024-12"])
    with pytest.raises(TimeError, match="not in date order"):
        parse_chain(["2025-01", "2024-12"])
    with pytest.raises(TimeError, match="given twice"):
        periods_between([Snapshot.parse("08"), Snapshot.parse("2021-08")])


def test_a_build_of_the_2021_benchmark_keeps_its_names():
    dumps = [Snapshot.of_dump(f"enwiki-2021{m}01-pages-articles.xml.bz2") for m in ("08", "09")]
    assert [p.name for p in periods_between(benchmark_spelling(dumps))] == ["0809"]
    crossing = [Snapshot.month(2021, 11), Snapshot.month(2021, 12), Snapshot.month(2022, 1)]
    assert [p.name for p in periods_between(benchmark_spelling(crossing))] == [
        "2021-11_2021-12", "2021-12_2022-01"]


def test_results_marks_order_with_periods():
    assert parse_trained("base") is BASE and parse_evaluated("-") is NO_MONTH
    assert parse_trained("0809") == Period.parse("0809")
    assert sorted([NO_MONTH, Period.parse("0910"), BASE, Period.parse("0809")]) == [
        BASE, Period.parse("0809"), Period.parse("0910"), NO_MONTH]
    with pytest.raises(TimeError, match="neither a period .* nor 'base'"):
        parse_trained("-")
    with pytest.raises(TimeError, match="neither a period .* nor '-'"):
        parse_evaluated("base")


def test_the_release_names_and_ecbds_years():
    assert release_probe_period("0801", "0901") == Period.parse("0809")
    with pytest.raises(TimeError, match="first of a month"):
        release_probe_period("0815", "0901")
    assert release_full_snapshot(["wikipedia_08"]).name == "08"
    assert release_full_snapshot(["dump_202110"]).name == "10"
    assert release_full_snapshot(["parts"]) is None
    assert parse_years("2017") == (2017, 2017) and parse_years("2017..2019") == (2017, 2019)
    assert parse_years("all") is None
    assert wikidata_date("+2021-08-00T00:00:00Z") == (2021, 8, 0)
    assert wikidata_date("-0300-00-00T00:00:00Z") == (-300, 0, 0)


def test_a_14_month_chain_is_named_and_ordered_by_date():
    """Fourteen monthly periods from 2024-06 to 2025-08, across a year: folder, task, TFDS and
    table names carry the years, and the report orders them by date whatever their order."""
    snapshots = [Snapshot.parse("2024-06").plus_months(i) for i in range(15)]
    chain = check_chain(periods_between(snapshots))
    assert len(chain) == 14 and chain[0].name == "2024-06_2024-07"
    assert chain[6].name == "2024-12_2025-01" and chain[-1].name == "2025-07_2025-08"
    assert len({p.name for p in chain}) == 14  # no name repeats across the year
    assert names.diffset(chain[6], "ssm") == "twiki_diffset_202412_202501_ssm"
    assert names.probes(chain[6], "updated", "_object") == (
        "twiki_probes_202412_202501_updated_object")
    assert names.full(chain[6].new, "lm") == "twiki_full_202501_lm"
    assert names.config("probes", chain[6]) == "202412_202501_probes"
    assert names.parse_config("202412_202501_probes").period == chain[6]
    shuffled = list(chain)
    random.Random(0).shuffle(shuffled)
    assert sorted(shuffled) == chain
    results = [Result("diff", p, p, c, "ppl", 10.0 + i) for i, p in enumerate(shuffled)
               for c in ("unchanged", "updated")]
    index = ResultIndex(results)
    assert index.eval_months() == chain and index.trained_months("diff") == chain
    headers = probe_table(index, "ppl").headers
    assert headers[2:6] == ["2024-06→2024-07 Un", "2024-06→2024-07 Up", "2024-07→2024-08 Un",
                            "2024-07→2024-08 Up"]
    assert headers[-1] == "2025-07→2025-08 Up"
