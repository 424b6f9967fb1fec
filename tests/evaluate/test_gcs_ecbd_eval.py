"""``tw-jax ecbd eval`` and ``ecbd report`` on a bucket of a real local GCS server (data read
from it, outputs written to it): the same files, byte for byte, as the same commands on local
folders, a rerun's results appended (the object rewritten whole), the report read back."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tw_jax.cli import main
from tw_jax.io import paths

ROWS = {
    "2019/np_spans_test.json": [
        {"ex_id": "Barack Obama_1_2_0", "masked_sentence": "Barack Obama met <extra_id_0> in "
         "Paris on Monday.", "answer_str": "<extra_id_0> Angela Merkel <extra_id_1>",
         "answer_d": {"<extra_id_0>": "Angela Merkel"}, "span_type": "NP-PROPER",
         "definition": ["Barack Obama was born in Honolulu."], "entity_span_str": "Barack Obama"}],
    "2020/random_spans_test.json": [
        {"ex_id": "Microsoft_2_1_0", "masked_sentence": "Microsoft and Google opened "
         "<extra_id_0> in London.", "answer_str": "<extra_id_0> offices <extra_id_1>",
         "answer_d": {"<extra_id_0>": "offices"}, "span_type": "RANDOM",
         "definition": ["Microsoft opened offices in London."], "entity_span_str": "Microsoft"}],
}


def _files(root: str, server=None) -> dict[str, bytes]:
    """Relative name → bytes of every file below ``root`` (a bucket's listed by the server)."""
    if paths.is_url(root):
        bucket, _, prefix = root.removeprefix("gs://").partition("/")
        return {name[len(prefix) + 1 :]: paths.read_bytes(f"gs://{bucket}/{name}")
                for name in server.objects(bucket, prefix + "/")}
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            full = Path(folder, name)
            found[full.relative_to(root).as_posix()] = full.read_bytes()
    return found


@pytest.fixture()
def model_and_data(random_t5, t5_vocab, tmp_path) -> tuple[Path, Path]:
    from tw_jax.models.t5_io import save_t5

    model, params = random_t5
    hf = tmp_path / "tiny-t5"
    save_t5(hf, model.config, params)
    shutil.copy(t5_vocab.sentencepiece_model_file, hf / "spiece.model")
    data = tmp_path / "ecbd"
    for name, rows in ROWS.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return hf, data


def test_ecbd_eval_and_report_into_a_bucket_equal_the_local_run(model_and_data, gcs_bucket,
                                                                 gcs_server, tmp_path, capsys):
    hf, data = model_and_data
    for name in ROWS:  # the bucket run reads its data from the bucket too
        paths.copy(data / name, f"{gcs_bucket}/ecbd/{name}")
    local, remote = str(tmp_path / "out"), f"{gcs_bucket}/out"
    for inputs in ("original", "original,no_ent"):  # the second run appends its results
        for source, out in ((str(data), local), (f"{gcs_bucket}/ecbd", remote)):
            assert main(["ecbd", "eval", "--data", source, "--out", out, "--model", str(hf),
                         "--inputs", inputs, "--batch-size", "8"]) == 0
    written = _files(remote, gcs_server)
    # Each scored example names the file and line it came from: the bucket's copy there.
    examples = written["ecbd_examples.tiny-t5.jsonl"]
    assert examples.count(f'"source": "{gcs_bucket}/ecbd/'.encode()) == 4  # the last run's
    renamed = examples.replace(f"{gcs_bucket}/ecbd/".encode(), f"{data}/".encode())
    assert {**written, "ecbd_examples.tiny-t5.jsonl": renamed} == _files(local)
    assert sorted(written) == sorted([
        "ecbd_examples.tiny-t5.jsonl", "ecbd_report.md", "results.jsonl",
        *(f"ecbd_tables/ecbd_table{n}_test.csv" for n in ("3", "5", "5_micro", "6"))])
    lines = [json.loads(line) for line in written["results.jsonl"].splitlines()]
    inputs = [r["slice"]["input"] for r in lines]
    assert set(inputs[: len(lines) // 3]) == {"original"}  # the first run's
    assert set(inputs) == {"original", "no_ent"}
    assert {r["method"] for r in lines} == {"tiny-t5"}

    capsys.readouterr()
    assert main(["ecbd", "report", remote, "--out", f"{gcs_bucket}/report"]) == 0
    printed = capsys.readouterr().out
    report = _files(f"{gcs_bucket}/report", gcs_server)
    assert report == {n: d for n, d in written.items()
                      if n == "ecbd_report.md" or n.startswith("ecbd_tables/")}
    assert printed == written["ecbd_report.md"].decode("utf-8")
