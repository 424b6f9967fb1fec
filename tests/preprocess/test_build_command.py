"""``tw-jax build`` on a sample world that crosses a year: every stage of every period named from
the dumps' dates, the same files as each stage's own command writes, finished stages skipped
and a removed one rebuilt; twice-monthly dumps make a 19-day period whose tasks register; the
stages alone name their folders under ``--data`` and refuse dumps of the wrong dates in one
line."""

from __future__ import annotations

import contextlib
import filecmp
import io
import re
import shutil
from pathlib import Path

import pytest

from tw_jax.cli import main
from tw_jax.sample_world.build import build_sample_world, wikidata_dump, wikipedia_dump
from tw_jax.sample_world.span import Span
from tw_jax.time import Snapshot

PERIODS = ("2021-11→2021-12", "2021-12→2022-01")
STAGE_LINE = re.compile(r"^tw-jax build: \[(\d+)/8\] (\S+) (\w+): built in \d+\.\d s: (.*) "
                        r"\((.*)\)$")


def _run(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.strip()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("build_world")
    build_sample_world(root, seed=0, n_entities=60, span=Span(Snapshot.parse("2021-11"), 3))
    return root


@pytest.fixture(scope="module")
def built(world, tmp_path_factory) -> dict:
    data = tmp_path_factory.mktemp("build_data") / "data"
    buffer = io.StringIO()  # a module fixture has no capsys
    with contextlib.redirect_stdout(buffer):
        code = main(["build", "--dumps", str(world), "--data", str(data), "--unchanged-rate",
                     "1", "--workers", "1"])
    return {"code": code, "lines": buffer.getvalue().splitlines(), "data": data}


def test_every_period_is_built_in_date_order_one_line_per_stage(built, world):
    assert built["code"] == 0
    lines, data = built["lines"], built["data"]
    assert lines[0] == (f"tw-jax build: {world}: 3 snapshots (2021-11-01, 2021-12-01, "
                        "2022-01-01), 2 periods; 3 copies in another compression not read")
    stages = [STAGE_LINE.match(line).groups() for line in lines[1:-1]]
    assert [(n, when, kind, Path(folder).relative_to(data).as_posix())
            for n, when, kind, _, folder in stages] == [
        ("1", "2021-11", "full", "2021-11/full"), ("2", "2021-11", "ssm", "2021-11/ssm"),
        ("3", PERIODS[0], "diffset", "2021-11_2021-12/diffset"),
        ("4", PERIODS[0], "probes", "2021-11_2021-12/probes"),
        ("5", PERIODS[0], "ssm", "2021-11_2021-12/ssm"),
        ("6", PERIODS[1], "diffset", "2021-12_2022-01/diffset"),
        ("7", PERIODS[1], "probes", "2021-12_2022-01/probes"),
        ("8", PERIODS[1], "ssm", "2021-12_2022-01/ssm")]
    figures = {(when, kind): text for _, when, kind, text, _ in stages}
    assert re.fullmatch(r"\d+ new \+ \d+ changed articles, \d+ tokens",
                        figures[(PERIODS[0], "diffset")])
    assert re.fullmatch(r"\d+ unchanged, \d+ updated, \d+ new, \d+ deleted",
                        figures[(PERIODS[1], "probes")])
    assert re.fullmatch(r"\d+ diffset examples, \d+ full examples", figures[(PERIODS[0], "ssm")])
    assert re.fullmatch(r"tw-jax build: 8 stages built, 0 complete, in \d+\.\d s: .*", lines[-1])
    for folder in ("2021-11/full", "2021-11/ssm", "2021-12_2022-01/probes"):
        assert (data / folder / "stats.json").is_file()


def test_the_build_writes_what_each_stage_writes_alone(built, world, tmp_path, capsys):
    """The stages alone, with ``--data`` naming the folders from the dumps' dates."""
    old, new = Snapshot.parse("2021-11"), Snapshot.parse("2021-12")
    data = tmp_path / "data"
    common = ["--workers", "1"]
    assert _run(capsys, "diffset", "--old", str(wikipedia_dump(world, old)), "--new",
                str(wikipedia_dump(world, new)), "--data", str(data), *common)[0] == 0
    assert _run(capsys, "probes", "--old", str(wikidata_dump(world, old)), "--new",
                str(wikidata_dump(world, new)), "--wikipedia", str(wikipedia_dump(world, new)),
                "--old-wikipedia", str(wikipedia_dump(world, old)), "--data", str(data),
                "--unchanged-rate", "1", *common)[0] == 0
    assert _run(capsys, "diffset", "--new", str(wikipedia_dump(world, old)), "--data",
                str(data), *common)[0] == 0
    # Alone, two dumps of TemporalWiki's months (2021-08 ... 2021-12) have the 2021 layout's
    # names; the build saw 2022-01 too, so its periods have years.
    alone = {"11/full": "2021-11/full", "1112/diffset": "2021-11_2021-12/diffset",
             "1112/probes": "2021-11_2021-12/probes"}
    assert sorted(p.relative_to(data).as_posix() for p in data.glob("*/*")) == sorted(alone)
    for folder, in_build in alone.items():
        names = sorted(p.name for p in (data / folder).iterdir() if p.name != "stats.json")
        match, mismatch, errors = filecmp.cmpfiles(data / folder, built["data"] / in_build,
                                                   names, shallow=False)
        assert (mismatch, errors) == ([], []) and len(match) == len(names) > 3, folder


def test_a_rerun_skips_what_is_complete_and_rebuilds_what_is_not(built, world, tmp_path,
                                                                 capsys):
    data = tmp_path / "data"
    shutil.copytree(built["data"], data)
    (data / "2021-12_2022-01" / "probes" / "stats.json").unlink()
    code, lines, _ = _run(capsys, "build", "--dumps", str(world), "--data", str(data),
                          "--unchanged-rate", "1", "--workers", "1")
    assert code == 0
    assert [line.split(": ", 2)[1] for line in lines[1:-1]] == [
        f"[{n}/8] {title}" for n, title in enumerate(
            ["2021-11 full", "2021-11 ssm", *(f"{p} {k}" for p in PERIODS
                                              for k in ("diffset", "probes", "ssm"))], start=1)]
    assert [line for line in lines[1:-1] if "complete, skipped" not in line] == [
        line for line in lines if "[7/8] 2021-12→2022-01 probes: built" in line]
    assert lines[-1].startswith("tw-jax build: 1 stages built, 7 complete, in ")
    assert filecmp.cmp(data / "2021-12_2022-01" / "probes" / "updated.csv",
                       built["data"] / "2021-12_2022-01" / "probes" / "updated.csv",
                       shallow=False)


def test_twice_monthly_dumps_make_a_period_of_19_days(world, tmp_path, capsys):
    """The sample world's dumps renamed to Wikimedia's days of 2024-02 (1st and 20th) and
    Wikidata's weeks: the period between them has its folders and its tasks."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    for month, (wp_day, wd_day) in zip(("2021-11", "2021-12"),
                                       (("20240201", "20240205"), ("20240220", "20240219")),
                                       strict=True):
        shutil.copy(wikipedia_dump(world, month), dumps / f"enwiki-{wp_day}-pages-articles.xml.bz2")
        shutil.copy(wikidata_dump(world, month), dumps / f"wikidata-{wd_day}-all.json.bz2")
    data = tmp_path / "data"
    code, lines, _ = _run(capsys, "build", "--dumps", str(dumps), "--data", str(data), "--no-ssm",
                          "--unchanged-rate", "1", "--workers", "1")
    assert code == 0, lines
    assert sorted(p.relative_to(data).as_posix() for p in data.glob("*/*")) == [
        "2024-02/full", "2024-02_2024-02-20/diffset", "2024-02_2024-02-20/probes"]
    code, lines, _ = _run(capsys, "tasks", "--data", str(data), "--match", "diffset")
    assert [line.split()[0] for line in lines] == ["twiki_diffset_202402_20240220_lm"]


def test_dumps_of_the_wrong_dates_are_one_line(world, tmp_path, capsys):
    old, new = Snapshot.parse("2021-11"), Snapshot.parse("2021-12")
    code, _, err = _run(capsys, "diffset", "--old", str(wikipedia_dump(world, new)), "--new",
                        str(wikipedia_dump(world, old)), "--data", str(tmp_path / "d"))
    assert (code, err) == (2, (
        f"tw-jax diffset: error: the old dump {wikipedia_dump(world, new)} (2021-12-01) is not "
        f"before the new one {wikipedia_dump(world, old)} (2021-11-01): give the earlier dump "
        "as --old"))
    code, _, err = _run(capsys, "probes", "--old", str(wikidata_dump(world, old)), "--new",
                        str(wikidata_dump(world, Snapshot.parse("2022-01"))), "--wikipedia",
                        str(wikipedia_dump(world, new)), "--data", str(tmp_path / "d"))
    assert code == 2 and err.startswith("tw-jax probes: error: the Wikidata dump ") and err.endswith(
        "is 31 days from the Wikipedia dump "
        f"{wikipedia_dump(world, new)} (2021-12-01), more than --max-date-gap 7: give the dumps "
        "of one snapshot")
    renamed = tmp_path / "old.xml.bz2"
    shutil.copy(wikipedia_dump(world, old), renamed)
    code, _, err = _run(capsys, "diffset", "--old", str(renamed), "--new",
                        str(wikipedia_dump(world, new)), "--data", str(tmp_path / "d"))
    assert code == 2 and "old.xml.bz2 has no date in its name" in err and err.endswith(
        "give --period OLD_NEW (e.g. 2024-12_2025-01) to name its folder under --data")
    assert not (tmp_path / "d").exists()  # nothing written by a refusal
    code, _, _ = _run(capsys, "diffset", "--old", str(renamed), "--new",
                      str(wikipedia_dump(world, new)), "--data", str(tmp_path / "d"),
                      "--period", "2021-11_2021-12", "--workers", "1")
    assert code == 0 and (tmp_path / "d" / "2021-11_2021-12" / "diffset" / "stats.json").is_file()


def test_on_beam_the_build_writes_the_same_files(built, world, tmp_path, capsys):
    """``--runner beam`` (DirectRunner): each period's stages as Beam pipelines, the first
    snapshot's export locally (a Beam DiffSet compares two dumps), the same files."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    for month in ("2021-11", "2021-12"):
        for dump in (wikipedia_dump(world, month), wikidata_dump(world, month)):
            (dumps / dump.name).symlink_to(dump)
    data = tmp_path / "data"
    code, lines, _ = _run(capsys, "build", "--dumps", str(dumps), "--data", str(data), "--no-ssm",
                          "--unchanged-rate", "1", "--runner", "beam")
    assert code == 0
    assert lines[1].startswith("tw-jax build: [1/3] 11 full: built locally (Beam needs two "
                               "dumps) in ")
    assert STAGE_LINE.match(built["lines"][4]).group(4) == re.match(  # the probes' counts
        r".*: built in \d+\.\d s: (.*) \(", lines[3]).group(1)
    for folder, in_build in (("11/full", "2021-11/full"), ("1112/diffset", "2021-11_2021-12/diffset"),
                             ("1112/probes", "2021-11_2021-12/probes")):
        names = sorted(p.name for p in (data / folder).iterdir()
                       if p.suffix in (".jsonl", ".csv"))
        assert filecmp.cmpfiles(data / folder, built["data"] / in_build, names,
                                shallow=False)[0] == names != []
