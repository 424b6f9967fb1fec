"""``tw-jax lifelong --data gs://… --out gs://…`` (the local GCS server): INITIAL given as a
Hugging Face folder in the bucket, scored on the bucket's probes and corpora; the runner's files
(results, state, proper-noun blocks) land in the bucket with the numbers of the same run on
local folders, and a rerun reads its state back from the bucket and does nothing.

Training reads TFRecords through tf.data, whose GCS client cannot be pointed at a local server,
so the runs here score a given checkpoint; the trainer's MODEL_DIR in a bucket is tested with
the trainer."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
from gcs_upload import upload_tree

from tw_jax.cli import main
from tw_jax.evaluate.per_probe import read_file
from tw_jax.io import paths

MONTHS = "0809,0910"
GIN = ["--gin_file=initial.gin", "--gin_file=models/gpt2_tiny.gin",
       "--gin_file=runs/cpu_smoke.gin"]


@pytest.fixture(scope="module")
def local_setup(tmp_path_factory, demo_data) -> dict:
    """The demo's data folder and a randomly initialised tiny GPT-2 exported as INITIAL."""
    import flax.linen as nn
    import gin
    import jax
    import jax.numpy as jnp

    from tw_jax.models import GPT2
    from tw_jax.models.hf_io import save_gpt2
    from tw_jax.runtime import gin_setup

    root = tmp_path_factory.mktemp("lifelong_gcs")
    shutil.copytree(demo_data, root / "demo")  # what run_demo(root / "demo") writes
    data = str(root / "demo" / "data")
    gin_setup.parse([g.split("=", 1)[1] for g in GIN], ["MODEL_DIR='unused'"])
    config = gin.query_parameter("%MODEL").scoped_configurable_fn()
    model = GPT2(config)
    params = nn.unbox(jax.jit(model.init)(jax.random.key(5), jnp.zeros((1, 8), jnp.int32))["params"])
    save_gpt2(root / "initial_hf", config, params)
    return {"data": data, "initial": str(root / "initial_hf")}


def _argv(data: str, out: str, initial: str) -> list[str]:
    return ["lifelong", *GIN, "--gin.tw_jax.train.train.progress=False", "--months", MONTHS,
            "--data", data, "--out", out, "--initial-checkpoint", initial,
            "--max-probes", "8", "--eval-batch-size", "8", "--metrics", "ppl,propn",
            "--propn-instances", "4", "--propn-length", "32"]


def _blocks(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data)) as stored:
        return {k: stored[k] for k in stored.files}


def test_lifelong_reads_and_writes_a_bucket(local_setup, gcs_bucket, gcs_server, tmp_path,
                                            capsys):
    data, initial = local_setup["data"], local_setup["initial"]
    upload_tree(data, f"{gcs_bucket}/data")
    upload_tree(initial, f"{gcs_bucket}/initial_hf")
    local_out, remote_out = str(tmp_path / "out"), f"{gcs_bucket}/out"

    assert main(_argv(data, local_out, initial)) == 0
    assert main(_argv(f"{gcs_bucket}/data/", remote_out + "/", f"{gcs_bucket}/initial_hf")) == 0
    printed = capsys.readouterr().out
    assert f"results appended to {remote_out}/results.jsonl" in printed

    local_files = sorted(str(p.relative_to(tmp_path / "out")) for p in
                         (tmp_path / "out").rglob("*") if p.is_file())
    remote_files = [n[len("out/"):] for n in gcs_server.objects(gcs_bucket[5:], "out/")]
    assert remote_files == local_files  # no temporaries, nothing written elsewhere
    assert "results.jsonl" in remote_files and "state/initial/base.json" in remote_files
    assert len([n for n in remote_files if n.startswith("propn_blocks/")]) == 4  # 2 months × 2

    local_lines = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text(
        encoding="utf-8").splitlines()]
    remote_lines = [json.loads(x) for x in paths.read_text(f"{remote_out}/results.jsonl")
                    .splitlines()]
    assert remote_lines == local_lines
    metrics = {(line["eval_month"], line["metric"]) for line in remote_lines}
    assert metrics >= {(m, k) for m in ("0809", "0910")
                       for k in ("ppl", "propn_ppl_diffset", "propn_ppl_nondiff")}

    state = json.loads(paths.read_text(f"{remote_out}/state/initial/base.json"))
    assert state["model_dir"] == f"{gcs_bucket}/initial_hf"
    local_state = json.loads((tmp_path / "out" / "state" / "initial" / "base.json").read_text())
    assert {**local_state, "model_dir": state["model_dir"]} == state
    per_probe = [n for n in remote_files if n.startswith("per_probe/")]
    assert len(per_probe) == 2  # INITIAL's scores of each month
    for name in per_probe:
        remote, local = read_file(f"{remote_out}/{name}"), read_file(str(tmp_path / "out" / name))
        assert remote.keys() == local.keys() and ("unchanged", "ppl") in local
        for key, scores in local.items():
            assert remote[key].mean() == scores.mean() and remote[key].pairs_with(scores)
    for name in (n for n in remote_files if n.startswith("propn_blocks/")):
        remote = _blocks(paths.read_bytes(f"{remote_out}/{name}"))
        local = _blocks((tmp_path / "out" / name).read_bytes())
        assert remote.keys() == local.keys() == {"index", "ids", "propn"}
        for key in local:
            np.testing.assert_array_equal(remote[key], local[key])

    before = paths.read_bytes(f"{remote_out}/results.jsonl")
    assert main(_argv(f"{gcs_bucket}/data", remote_out, f"{gcs_bucket}/initial_hf")) == 0
    assert "0 results appended" in capsys.readouterr().out
    assert paths.read_bytes(f"{remote_out}/results.jsonl") == before


def test_a_missing_bucket_is_one_line(local_setup, gcs_bucket, capsys):
    with pytest.raises(SystemExit) as exited:
        main(_argv(local_setup["data"], "gs://no-such-bucket-tw/out", local_setup["initial"]))
    assert exited.value.code == 2
    assert "--out: gs://no-such-bucket-tw/out: bucket 'no-such-bucket-tw' does not exist" in \
        capsys.readouterr().err
