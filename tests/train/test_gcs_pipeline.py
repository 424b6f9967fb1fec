"""The whole loop with a bucket (the local GCS server) for every path: dumps → `tw-jax diffset`,
`probes`, `ssm` into gs:// → tasks registered from the gs:// data folder → `tw-jax train` with
MODEL_DIR in the bucket (2 checkpoints, then a second invocation that resumes) → `eval` and
`infer` → `tw-jax lifelong` from that checkpoint with --out in the bucket → `tw-jax report`
from and to the bucket.

TensorFlow's own GCS client (tf.data, hence seqio's reads) cannot be pointed at a local server:
the tasks registered from the bucket are checked to hand seqio the exact gs:// file patterns, and
training reads a local copy of those very objects."""

from __future__ import annotations

import json

from gcs_compare import assert_no_local_gs_folder
from gcs_upload import upload_tree

import tw_jax.tasks
from tw_jax.cli import main
from tw_jax.io import paths
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump
from tw_jax.tasks.sources import TFRecordSource

T5 = ["--gin_file=diff.gin", "--gin_file=models/t5_tiny.gin", "--gin_file=runs/cpu_smoke.gin"]


def _download(server, url: str, local) -> None:
    bucket, _, prefix = url.removeprefix("gs://").partition("/")
    for name in server.objects(bucket, prefix + "/"):
        paths.copy(f"gs://{bucket}/{name}", local / name[len(prefix) + 1 :])


def test_every_path_in_a_bucket(sample_world, gcs_bucket, gcs_server, train_data, compile_cache,
                                tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    root, _ = sample_world
    dumps = {}
    for name, path in (("wp08", wikipedia_dump(root, "2021-08")),
                       ("wp09", wikipedia_dump(root, "2021-09")),
                       ("wd08", wikidata_dump(root, "2021-08")),
                       ("wd09", wikidata_dump(root, "2021-09"))):
        dumps[name] = f"{gcs_bucket}/dumps/{path.name}"
        paths.copy(path, dumps[name])
    data = f"{gcs_bucket}/data"
    assert main(["diffset", "--old", dumps["wp08"], "--new", dumps["wp09"],
                 "--out", f"{data}/0809/diffset"]) == 0
    assert main(["probes", "--old", dumps["wd08"], "--new", dumps["wd09"], "--wikipedia",
                 dumps["wp09"], "--old-wikipedia", dumps["wp08"], "--diffset",
                 f"{data}/0809/diffset", "--out", f"{data}/0809/probes"]) == 0
    assert main(["ssm", "--in", f"{data}/0809/diffset", "--out", f"{data}/0809/ssm"]) == 0
    for stage in ("diffset", "probes", "ssm"):
        assert paths.isfile(f"{data}/0809/{stage}/stats.json")

    vocab = f"{gcs_bucket}/vocab"
    upload_tree(train_data["t5"].parent, f"{vocab}/t5")
    upload_tree(train_data["gpt2"], f"{vocab}/gpt2")
    names = tw_jax.tasks.register_all(data, t5_vocab=f"{vocab}/t5/spiece.model",
                                      gpt2_vocab=f"{vocab}/gpt2")
    import seqio

    source = seqio.get_mixture_or_task("twiki_diffset_0809_ssm").source
    assert isinstance(source, TFRecordSource)
    assert set(source._split_to_filepattern.values()) == {  # noqa: SLF001
        f"{data}/0809/ssm/diffset.tfrecord-*-of-*"}
    assert "twiki_probes_0809_changed_ssm" in names

    local = tmp_path / "data"
    _download(gcs_server, data, local)
    monkeypatch.setenv("TW_JAX_T5_VOCAB", str(train_data["t5"]))
    monkeypatch.setenv("TW_JAX_GPT2_VOCAB", str(train_data["gpt2"]))
    assert tw_jax.tasks.register_all(str(local)) == names  # the same tasks, read locally
    model_dir = f"{gcs_bucket}/runs/diff/0809"
    common = [*T5, f"--gin.DATA_DIR='{local}'", f"--gin.MODEL_DIR={model_dir}",
              "--gin.MIXTURE_OR_TASK_NAME='twiki_diffset_0809_ssm'", "--gin.CHECKPOINT_PERIOD=2",
              "--gin.SCHEDULE='constant'", "--gin.tw_jax.train.train.progress=False"]
    assert main(["train", *common, "--gin.TRAIN_STEPS=4"]) == 0
    assert main(["train", *common, "--gin.TRAIN_STEPS=6"]) == 0
    assert "trained to step 6 (started at step 4)" in capsys.readouterr().out
    assert sorted(n for n in paths.listdir(f"{model_dir}/checkpoints") if n.isdigit()) == ["4", "6"]
    assert main(["eval", *common]) == 0
    assert main(["infer", *common, "--gin.tw_jax.evaluate.infer.max_examples=2"]) == 0
    (predictions,) = paths.glob(f"{model_dir}/infer/*.jsonl")
    assert len(paths.read_text(predictions).splitlines()) == 2

    out = f"{gcs_bucket}/lifelong"
    assert main(["lifelong", *T5, "--gin.TRAIN_STEPS=2", "--gin.SCHEDULE='constant'",
                 "--gin.tw_jax.train.train.progress=False", "--months", "0809",
                 "--data", str(local), "--out", out, "--initial-checkpoint", model_dir,
                 "--max-probes", "8", "--eval-batch-size", "8"]) == 0
    results = [json.loads(line) for line in paths.read_text(f"{out}/results.jsonl").splitlines()]
    assert {(r["method"], r["metric"]) for r in results} >= {("initial", "ppl"), ("diff", "ppl")}
    assert main(["report", out, "--out", f"{gcs_bucket}/report"]) == 0
    assert "| DIFF" in paths.read_text(f"{gcs_bucket}/report/report.md")
    assert_no_local_gs_folder()
