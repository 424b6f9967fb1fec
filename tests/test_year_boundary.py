"""The whole loop across a year boundary, as a user with dumps from 2021-11 on runs it: the sample
world from 2021-11 (three monthly snapshots), ``tw-jax build`` (its periods 2021-11_2021-12 and
2021-12_2022-01, named from the dumps' dates), the SeqIO tasks and a TFDS config of the period
that crosses the year, a lifelong run through the chain (``--months 2021-11,2021-12,2022-01``)
and its report, ordered by date and labelled with years.

The tiny GPT-2 trains two steps per update with the demo data's vocabulary (the shapes of
tests/evaluate/test_lifelong.py, so the session's compile cache serves both)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from tw_jax.cli import main
from tw_jax.sample_world.build import build_sample_world
from tw_jax.sample_world.span import Span
from tw_jax.time import BASE, Period, Snapshot

PERIODS = ("2021-11_2021-12", "2021-12_2022-01")


def _main(*argv: str) -> tuple[int, str]:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(list(argv))
    return code, buffer.getvalue()


@pytest.fixture(scope="module")
def data(tmp_path_factory, demo_data) -> Path:
    root = tmp_path_factory.mktemp("year_boundary")
    build_sample_world(root / "world", seed=0, n_entities=60,
                       span=Span(Snapshot.parse("2021-11"), 3))
    code, _ = _main("build", "--dumps", str(root / "world"), "--data", str(root / "data"),
                    "--no-ssm", "--unchanged-rate", "1", "--workers", "1")
    assert code == 0
    shutil.copytree(demo_data / "data" / "vocab", root / "data" / "vocab")
    return root / "data"


def test_the_periods_tasks_carry_their_years(data):
    import tw_jax.tasks

    names = set(tw_jax.tasks.register_all(str(data)))
    assert {"twiki_full_202111_lm", "twiki_diffset_202111_202112_lm",
            "twiki_diffset_202112_202201_lm", "twiki_probes_202112_202201_updated",
            "twiki_full_202201_lm"} <= names
    assert not any("_1112" in name or "_1201" in name for name in names)


def test_tfds_builds_the_period_that_crosses_the_year(data, tmp_path):
    import tensorflow_datasets as tfds

    import tw_jax.datasets  # noqa: F401  (registers temporal_wiki)

    builder = tfds.builder("temporal_wiki/202112_202201", data_dir=str(tmp_path))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(data)))
    texts = [ex["text"].decode() for ex in tfds.as_numpy(
        tfds.load("temporal_wiki/202112_202201", split="diffset", data_dir=str(tmp_path)))]
    lines = (data / PERIODS[1] / "diffset" / "diffset.jsonl").read_text(encoding="utf-8")
    assert texts == [json.loads(line)["text"] for line in lines.splitlines()]


def test_a_lifelong_run_through_the_year_and_its_report(data, tmp_path, compile_cache):
    from tw_jax.evaluate.results import read_results

    out = tmp_path / "run"
    code, _ = _main(
        "lifelong", "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin",
        "--gin_file=runs/cpu_smoke.gin", "--gin.TRAIN_STEPS=2", "--gin.BATCH_SIZE=2",
        "--gin.SCHEDULE=constant", "--gin.tw_jax.train.train.progress=False",
        f"--gin.tw_jax.models.GPT2Config.vocab_size={_vocab_size(data)}",
        "--months", "2021-11,2021-12,2022-01", "--data", str(data), "--out", str(out),
        "--max-probes", "16", "--eval-batch-size", "16", "--eval-matrix")
    assert code == 0
    rows = read_results([out / "results.jsonl"])
    periods = [Period.parse(p) for p in PERIODS]
    assert sorted({r.trained_through for r in rows}, key=lambda t: (t != BASE, t)) == [
        BASE, *periods]
    assert {(r.trained_through, r.eval_month) for r in rows if r.metric == "ppl"} == {
        (trained, month) for trained in (BASE, *periods) for month in periods}
    assert (out / "checkpoints" / "initial" / "2021-11" / "config.gin").is_file()
    assert (out / "checkpoints" / "diff" / PERIODS[1] / "config.gin").is_file()

    code, _ = _main("report", str(out), "--out", str(tmp_path / "report"))
    assert code == 0
    report = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "### Summary: what each update learned and kept (2021-12→2022-01)" in report
    table = report[report.index("### Zero-shot perplexity"):]
    header = [cell.strip("| ") for cell in table.splitlines()[2].split(" | ")]
    assert [cell.split(" (")[0] for cell in header[2:]] == [
        f"{period} {column}" for period in ("2021-11→2021-12", "2021-12→2022-01")
        for column in ("Un", "Up", "New", "Del", "Chg", "Avg")]
    assert "1112" not in report and "1201" not in report


def _vocab_size(data: Path) -> int:
    from tw_jax.data.vocabularies import gpt2_vocabulary

    return int(gpt2_vocabulary(str(data / "vocab" / "gpt2")).vocab_size)
