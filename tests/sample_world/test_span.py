"""The sample world at any start: its calendar names dumps, truth files and periods by date, a
world that starts in November crosses the year with every date it writes, and the command line
refuses a start or a length it cannot have in one line."""

from __future__ import annotations

import bz2
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tw_jax.sample_world.build import build_sample_world, truth_file, wikidata_dump, wikipedia_dump
from tw_jax.sample_world.span import DEFAULT_SPAN, Span, SpanError
from tw_jax.time import Period, Snapshot


@pytest.fixture(scope="module")
def november(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("november")
    return root, build_sample_world(root, seed=0, n_entities=60,
                                    span=Span(Snapshot.parse("2021-11"), 3))


def test_the_default_span_is_the_2021_benchmarks():
    assert [s.iso for s in DEFAULT_SPAN.snapshots] == ["2021-08", "2021-09", "2021-10", "2021-11"]
    assert [p.name for p in DEFAULT_SPAN.periods] == ["0809", "0910", "1011"]
    assert [p.name for p in Span(Snapshot.parse("2021-09"), 4).periods] == [
        "0910", "1011", "1112"]  # still the benchmark's own months
    assert [p.name for p in Span(Snapshot.parse("2024-11"), 3).periods] == [
        "2024-11_2024-12", "2024-12_2025-01"]
    assert Span(Snapshot.parse("2030-01")).year(2015) == 2024  # history moves with the start


def test_a_world_from_november_names_its_files_and_periods_with_years(november):
    root, world = november
    assert world["months"] == ["2021-11", "2021-12", "2022-01"]
    assert world["pairs"] == ["2021-11_2021-12", "2021-12_2022-01"]
    assert sorted(p.name for p in (root / "wikipedia").iterdir()) == [
        f"enwiki-{d}-pages-articles.xml.bz2" for d in ("20211101", "20211201", "20220101")]
    assert wikipedia_dump(root, "2022-01").is_file()
    assert wikidata_dump(root, Snapshot.parse("2021-12"), "gz").is_file()
    assert truth_file(root, "diffset", Period.parse("2021-12_2022-01")).name == (
        "diffset-2021-12_2022-01.jsonl")
    assert truth_file(root, "articles", "2022-01").is_file()
    assert Snapshot.of_dump(wikipedia_dump(root, "2022-01").name) == Snapshot.parse("2022-01")


def test_what_changed_over_december_is_dated_december_2021(november):
    """The period 2021-12 → 2022-01 changes the world during December 2021: its Wikidata
    statements start then, its articles say so; nothing is dated in the default world's year."""
    root, _ = november
    statements = bz2.decompress(wikidata_dump(root, "2022-01").read_bytes()).decode()
    assert re.search(r'"\+2021-12-\d\dT00:00:00Z"', statements)
    assert not re.search(r'"\+2021-0[89]-\d\dT00:00:00Z"', statements)  # the default's months
    text = bz2.decompress(wikipedia_dump(root, "2022-01").read_bytes()).decode()
    assert re.search(r"\d+ December 2021", text)
    changes = [json.loads(line) for line in truth_file(
        root, "changes", "2021-12_2022-01").read_text().splitlines()]
    assert changes  # the period changed something


@pytest.mark.parametrize(("argv", "message"), [
    (["--start", "2021-11-05"], "first of a month"),
    (["--start", "11"], "with its year"),
    (["--start", "2021-13"], "--start 2021-13"),
    (["--months", "1"], "at least 2 months"),
    (["--months", "two"], "--months two: not a whole number"),
])
def test_the_cli_refuses_a_span_it_cannot_build_in_one_line(tmp_path, argv, message):
    done = subprocess.run([sys.executable, "-m", "tw_jax.cli", "sample-world", "--out",
                           str(tmp_path / "w"), *argv], capture_output=True, text=True)
    assert done.returncode != 0 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w" / "world.json").exists()


def test_span_errors_are_value_errors():
    with pytest.raises(SpanError, match="at least 2 months"):
        Span(Snapshot.parse("2024-01"), 1)
