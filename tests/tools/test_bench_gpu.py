"""tools/bench_gpu.py: the GPU suite's code path on CPU (tiny models) where TensorFlow and seqio
are not installed, as on an accelerator image; rows recorded as they complete, rows past the
budget not started, and the shipped GPU table generated from the shipped records."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# An image without TensorFlow and seqio: importing them fails as for a package not installed.
NO_TENSORFLOW = '''import sys
for name in ("tensorflow", "seqio", "tensorflow_text", "tensorflow_datasets", "apache_beam",
             "t5x"):
    sys.modules[name] = None
'''


def _tool():
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "tools" / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_dry_run_trains_and_records_rows_without_tensorflow(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(NO_TENSORFLOW)
    doc = tmp_path / "performance.md"
    doc.write_text((ROOT / "docs" / "performance.md").read_text())
    records = tmp_path / "gpu.jsonl"
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    rows = ("gpt2_large diff jax,gpt2_large diff torch.compile,llama3_2_1b diff jax,"
            "llama3_2_1b diff torch.compile,llama3_2_1b lora jax,gpt2_large probe eval")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_gpu.py"), "--dry-run", "--rows", rows,
         "--records", str(records), "--doc", str(doc)],
        env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-2])
    assert summary["done"] == ["gpt2_large diff jax", "gpt2_large diff torch.compile",
                               "llama3_2_1b diff jax", "llama3_2_1b diff torch.compile",
                               "llama3_2_1b lora jax"]
    assert summary["skipped"] == ["gpt2_large probe eval"] and not summary["failed"]
    assert "skipped  gpt2_large probe eval: seqio is not installed here" in done.stdout
    written = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["suite_row"], r["stack"], r["model"], r["freeze"]) for r in written] == [
        ("gpt2_large diff jax", "jax", "gpt2_tiny", "none"),
        ("gpt2_large diff torch.compile", "pytorch-eager", "gpt2_tiny", "none"),
        ("llama3_2_1b diff jax", "jax", "llama_tiny", "none"),
        ("llama3_2_1b diff torch.compile", "pytorch-eager", "llama_tiny", "none"),
        ("llama3_2_1b lora jax", "jax", "llama_tiny", "base")]
    # The same Llama on both stacks: every parameter trains, as many of them.
    jax_row, torch_row = written[2], written[3]
    assert jax_row["params_total"] == torch_row["params_total"] == jax_row["params_trainable"]
    assert written[4]["params_trainable"] < written[4]["params_total"]
    assert all(r["suite_dry_run"] and r["tokens_per_second"] > 0 for r in written)
    assert len({r["suite_run"] for r in written}) == 1
    # Dry-run records never reach the table.
    tool = _tool()
    assert tool.gpu_table(written).startswith("No GPU row is recorded yet")
    assert tool.gpu_table(written) in doc.read_text()


def test_the_llama_rows_follow_gpt2_large_diff_and_dry_run_the_tiny_llama():
    tool = _tool()
    names = [row.name for row in tool.ROWS]
    assert names[:5] == ["gpt2_large diff jax", "gpt2_large diff torch.compile",
                         "llama3_2_1b diff jax", "llama3_2_1b diff torch.compile",
                         "llama3_2_1b lora jax"]
    llama = {row.name: row for row in tool.ROWS if row.name.startswith("llama")}
    for row in llama.values():
        assert row.argv[:2] == ("--model", "llama3_2_1b")
        assert row.dry_argv[:2] == ("--model", "llama_tiny")
        assert row.argv[4:8] == ("--batch", "16", "--seq", "1024")
    assert llama["llama3_2_1b diff torch.compile"].argv[-1] == "--compile"


def test_a_row_past_the_budget_is_not_started_and_the_rest_go_on(tmp_path):
    tool = _tool()
    tiny = ("--model", "gpt2_tiny", "--method", "diff", "--batch", "2", "--seq", "16",
            "--steps", "3", "--warmup", "1")
    rows = [tool.Row("too long", "bench_train.py", tiny, tiny, estimate_s=10 ** 6),
            tool.Row("fits", "bench_train.py", tiny, tiny, estimate_s=0),
            tool.Row("needs a module", "bench_train.py", tiny, tiny, 0, needs="no_such_mod")]
    records = tmp_path / "gpu.jsonl"
    outcome = tool.run_suite(rows, dry_run=False, records=records, budget_s=600,
                             row_timeout_s=600)
    assert outcome == {"done": ["fits"], "failed": [], "skipped": ["needs a module"],
                       "not run": ["too long"]}
    assert [r["suite_row"] for r in tool.read_records(records)] == ["fits"]


def test_the_table_keeps_the_newest_measured_record_of_each_device_and_row():
    tool = _tool()
    base = {"device_kind": "NVIDIA H100 80GB HBM3", "date": "2026-12-01",
            "step_time_median_s": 0.0812, "mfu": 0.4567, "peak_memory_bytes": 3 * 2 ** 30,
            "suite_dry_run": False}
    records = [
        {**base, "suite_row": "t5_large diff jax", "tokens_per_second": 50_000.4},
        {**base, "suite_row": "gpt2_large diff jax", "tokens_per_second": 90_000.0},
        {**base, "suite_row": "gpt2_large diff jax", "tokens_per_second": 101_234.6,
         "date": "2026-12-02"},
        {**base, "suite_row": "gpt2_large diff jax", "tokens_per_second": 1.0,
         "suite_dry_run": True},
        {"device_kind": "NVIDIA H100 80GB HBM3", "date": "2026-12-02", "suite_dry_run": False,
         "suite_row": "dpr encoders bf16", "passages_per_second_build": 4000,
         "questions_per_second": 812.5},
    ]
    assert tool.gpu_table(records).splitlines() == [
        "| device | row | date | throughput | step time | MFU | peak memory |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        "| NVIDIA H100 80GB HBM3 | gpt2_large diff jax | 2026-12-02 | 101,235 tokens/s | "
        "81.2 ms | 45.7% | 3.0 GiB |",
        "| NVIDIA H100 80GB HBM3 | t5_large diff jax | 2026-12-01 | 50,000 tokens/s | 81.2 ms | "
        "45.7% | 3.0 GiB |",
        "| NVIDIA H100 80GB HBM3 | dpr encoders bf16 | 2026-12-02 | 4,000 passages/s encoded, "
        "812 questions/s | – | – | – |",
    ]


def test_the_shipped_gpu_table_is_generated_from_the_shipped_records():
    tool = _tool()
    text = (ROOT / "docs" / "performance.md").read_text()
    shipped = text.split(tool.BEGIN, 1)[1].split(tool.END, 1)[0].strip()
    assert shipped == tool.gpu_table(tool.read_records(tool.RECORDS))
