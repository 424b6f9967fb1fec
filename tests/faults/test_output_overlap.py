"""A command never writes where it reads: an output that is one of its inputs (however spelt),
a stage's own folder that contains one, or an output inside an input folder read whole is
refused in one line, exit 2, before anything is written (before: ``tw-jax ssm --in D --out D``
replaced the DiffSet with exit 0)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tw_jax.cli import main
from tw_jax.io.cli_paths import InputFolder, InputPath, OutputFolder, OutputPath, overlap


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture()
def diffset(tmp_path) -> Path:
    folder = tmp_path / "data" / "0809" / "diffset"
    folder.mkdir(parents=True)
    (folder / "diffset.jsonl").write_text('{"id": 1}\n')
    (folder / "stats.json").write_text("{}\n")
    return folder


@pytest.mark.parametrize(("out", "how"), [
    ("{d}", "is the input --in"),
    ("{d}/../diffset", "is the input --in"),  # the same folder spelt another way
    ("{link}", "is the input --in"),  # through a symbolic link
    ("{d}/ssm", "lies inside the input folder, read whole, --in"),
    ("{d}/..", "contains the input --in"),
])
def test_an_output_over_an_input_is_refused_before_anything_is_written(diffset, tmp_path,
                                                                      capsys, out, how):
    link = tmp_path / "link"
    os.symlink(diffset, link)
    before = _files(tmp_path / "data")
    out = out.format(d=diffset, link=link)
    assert main(["ssm", "--in", str(diffset), "--out", out]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert error.startswith(f"tw-jax ssm: error: --out {os.path.abspath(out)} {how} {diffset}:")
    assert error.endswith("a command never writes where it reads; choose another --out")
    assert _files(tmp_path / "data") == before  # no lock, no output, nothing replaced


def test_which_places_overlap():
    run = "/runs/kadapter"
    # a report inside the run folder it reads a file of: fine; a folder read whole: refused
    assert overlap({"OUT_DIR": [InputPath(run)], "--out": OutputPath(f"{run}/report")}) is None
    assert overlap({"--in": InputFolder(run), "--out": OutputPath(f"{run}/report")})
    assert overlap({"--data": InputPath("/data"), "--out": OutputPath("/data2")}) is None
    # a folder the command adds files to may hold an input; a stage's own folder may not
    assert overlap({"--probes": InputPath("/data/twiki"), "--data": OutputPath("/data")}) is None
    assert overlap({"--diffset": InputPath("/d/0809/diffset"),
                    "--out": OutputFolder("/d/0809")}) == (
        "--out /d/0809 contains the input --diffset /d/0809/diffset: a command never writes "
        "where it reads; choose another --out")
    assert overlap({"--in": InputFolder("gs://b/data/0809/diffset/"),
                    "--out": OutputPath("gs://b/data/0809/diffset")})
    assert overlap({"--in": InputFolder("gs://b/data/0809/diffset"),
                    "--out": OutputPath("gs://b/data/0809/diffset2")}) is None
