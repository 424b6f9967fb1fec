"""Every command takes paths relative to the working folder, as a shell user types them: the
sample world, the three stages, ``tasks``, ``train`` (DATA_DIR, MODEL_DIR, vocabularies,
INITIAL_CHECKPOINT_PATH as gin strings), ``eval``, ``infer``, ``lifelong`` and ``report``,
one after the other in one folder. Each is resolved once, where the command line is read, so
what the outputs record is absolute (the gs:// form of the same chain is
tests/train/test_gcs_pipeline.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tw_jax.cli import main
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

T5 = ["--gin_file=diff.gin", "--gin_file=models/t5_tiny.gin", "--gin_file=runs/cpu_smoke.gin"]
QUIET = ["--gin.SCHEDULE='constant'", "--gin.tw_jax.train.train.progress=False"]


def test_every_command_with_relative_paths(train_data, compile_cache, tmp_path, monkeypatch,
                                           capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TW_JAX_DATA_DIR", raising=False)
    assert main(["sample-world", "--out", "world"]) == 0
    old, new = (str(wikipedia_dump("world", m)) for m in ("2021-08", "2021-09"))
    wd_old, wd_new = (str(wikidata_dump("world", m)) for m in ("2021-08", "2021-09"))
    assert not Path(old).is_absolute() and Path(old).is_file()
    assert main(["diffset", "--old", old, "--new", new, "--out", "data/0809/diffset"]) == 0
    assert main(["probes", "--old", wd_old, "--new", wd_new, "--wikipedia", new,
                 "--old-wikipedia", old, "--diffset", "data/0809/diffset",
                 "--out", "data/0809/probes"]) == 0
    assert main(["ssm", "--in", "data/0809/diffset", "--out", "data/0809/ssm"]) == 0
    stats = json.loads(Path("data/0809/ssm/stats.json").read_text())
    assert stats["examples"] > 0
    shutil.copytree(train_data["t5"].parent, "vocab/t5")
    # one process runs every command here, so the tasks `tw-jax tasks` registers stay
    # registered: the vocabulary comes from the environment, relative too
    monkeypatch.setenv("TW_JAX_T5_VOCAB", f"vocab/t5/{train_data['t5'].name}")
    capsys.readouterr()

    assert main(["tasks", "--data", "data", "--match", "0809_ssm"]) == 0
    listed = capsys.readouterr().out
    assert f"{tmp_path}/data/0809/ssm/diffset.tfrecord-" in listed  # recorded absolute

    data = ["--gin.DATA_DIR='data'",
            "--gin.MIXTURE_OR_TASK_NAME='twiki_diffset_0809_ssm'"]
    assert main(["train", *T5, *data, *QUIET, "--gin.MODEL_DIR='runs/first'",
                 "--gin.TRAIN_STEPS=2"]) == 0
    assert Path("runs/first/checkpoints/2").is_dir()
    assert main(["eval", *T5, *data, "--gin.MODEL_DIR=runs/first"]) == 0
    (scored,) = Path("runs/first/inference_eval").glob("*.step2.json")
    assert json.loads(scored.read_text())["step"] == 2
    assert main(["infer", *T5, *data, "--gin.MODEL_DIR=runs/first",
                 "--gin.tw_jax.evaluate.infer.max_examples=2"]) == 0
    (predicted,) = Path("runs/first/infer").glob("*.jsonl")
    assert len(predicted.read_text().splitlines()) == 2
    assert main(["train", *T5, *data, *QUIET, "--gin.MODEL_DIR='runs/second'",
                 "--gin.INITIAL_CHECKPOINT_PATH='runs/first/checkpoints/2'",
                 "--gin.TRAIN_STEPS=1"]) == 0
    assert Path("runs/second/checkpoints/1").is_dir()

    assert main(["lifelong", *T5, "--months", "0809", "--data", "data", "--out", "life",
                 "--initial-checkpoint", "runs/first/checkpoints/2", "--metrics", "ppl",
                 "--max-probes", "4", "--eval-batch-size", "4",
                 "--gin_bindings=TRAIN_STEPS=1", "--gin_bindings=SCHEDULE='constant'",
                 "--gin_bindings=tw_jax.train.train.progress=False"]) == 0
    rows = [json.loads(line) for line in Path("life/results.jsonl").read_text().splitlines()]
    assert {(r["method"], r["metric"]) for r in rows} >= {("initial", "ppl"), ("diff", "ppl")}
    assert main(["report", "life", "--out", "tables"]) == 0
    assert Path("tables/report.md").is_file()
