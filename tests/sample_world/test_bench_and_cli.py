"""The benchmark pair generator (``tools/bench_pair.py``), the ``sample-world`` subcommand and the
tools script."""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from pathlib import Path

import pytest
from sw_helpers import xml_pages
from sw_plain import to_paragraphs

from tw_jax.sample_world import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from bench_pair import write_bench_pair  # noqa: E402


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    old, new = write_bench_pair(out, n_articles=400, seed=3, threads=2)
    return xml_pages(old), xml_pages(new)


def test_bench_pair_sizes_and_changes(bench):
    old, new = bench
    assert len(old) == 400 and len(new) == 420
    assert all(p["ns"] == 0 and p["redirect"] is None for p in old + new)
    assert 3000 <= statistics.mean(p["bytes"] for p in old) <= 4200
    before = {p["id"]: p for p in old}
    added = [p for p in new if p["id"] not in before]
    assert len(added) == 20 and min(p["id"] for p in added) > max(before)
    edited = [p for p in new if p["id"] in before and p["text"] != before[p["id"]]["text"]]
    assert len(edited) == 20
    changed_plain = [p for p in edited if to_paragraphs(p["text"]) != to_paragraphs(before[p["id"]]["text"])]
    assert len(changed_plain) == 20
    titles = [p["title"] for p in new]
    assert len(titles) == len(set(titles))


def test_bench_pair_is_deterministic(bench, tmp_path):
    old, new = write_bench_pair(tmp_path, n_articles=400, seed=3, threads=1)
    assert xml_pages(old) == bench[0] and xml_pages(new) == bench[1]


def test_cli_builds_and_summarises(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sample-world", "--out", str(tmp_path), "--seed", "2", "--entities", "70"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "2021-08" in out and "0809" in out and "DiffSet" in out
    assert (tmp_path / "world.json").is_file()


def test_tools_script_runs(tmp_path, capsys):
    path = Path(__file__).resolve().parents[2] / "tools" / "make_sample_world.py"
    spec = importlib.util.spec_from_file_location("make_sample_world", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--out", str(tmp_path / "b"), "--bench-pair", "--articles", "100"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert (tmp_path / "b" / "enwiki-20210901-pages-articles.xml.bz2").is_file()
