"""Every accelerator row of docs/performance.md in one command, for the rare, short GPU window.

    python tools/bench_gpu.py                  # on one H100/H200: every row within --budget s
    python tools/bench_gpu.py --dry-run        # any CPU, tiny models: the same code path (tests)
    python tools/bench_gpu.py --table          # rewrite docs/performance.md's GPU table only

Rows run most valuable first (the issue's targets: GPT-2 Large DIFF against PyTorch's
``torch.compile``, Llama 3.2 1B DIFF against it too and its LoRA, T5-large DIFF; then K-Adapter
and LoRA, then DPR's encoder), each in a child process of its own (``tools/bench_train.py``,
``bench_train_reference.py``, ``bench_retrieval.py``), so an out-of-memory or a crash costs one
row. A row's JSON line is appended to ``--records`` (default ``tools/records/gpu.jsonl``) the
moment it completes, with ``suite_row`` and ``suite_run`` beside the benchmark's own fields: a
run the lease cuts off leaves complete rows and no half row. A row starts only while its
estimate fits in what is left of ``--budget`` (default 480 s: the 8 minutes of the issue,
compilation included); the others are listed as not run (the rows after the Llama ones need a
larger ``--budget``, or ``--rows``). Then the GPU table in docs/performance.md (between its two
``gpu-table`` markers) is written from every record of the file (:func:`gpu_table`), so the
shipped table is always the shipped records' (tests/tools/test_bench_gpu.py checks it).

The training rows need JAX, flax, optax, orbax and gin only: the benchmarks parse the gin files
without the input pipeline (``gin_setup.parse(..., input_pipeline=False)``), because an
accelerator image may have JAX and PyTorch but not TensorFlow or seqio. The probe-evaluation row
scores through seqio, so it runs only where seqio imports and is otherwise listed as skipped,
with that reason.

``--dry-run`` swaps in the tiny models, two steps and short sequences, and writes to a
temporary records file and table unless ``--records``/``--doc`` are given: CI runs exactly
this code without a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
RECORDS = TOOLS / "records" / "gpu.jsonl"
DOC = REPO / "docs" / "performance.md"
BEGIN, END = "<!-- gpu-table: begin (tools/bench_gpu.py) -->", "<!-- gpu-table: end -->"


@dataclass(frozen=True)
class Row:
    """One measurement: a benchmark script, its flags, the flags of its dry run, and the
    seconds it is expected to take on one H100 (compilation included)."""

    name: str
    script: str
    argv: tuple[str, ...]
    dry_argv: tuple[str, ...]
    estimate_s: float
    needs: str | None = None  # a module the row cannot run without

    def command(self, dry_run: bool, records: str) -> list[str]:
        argv = self.dry_argv if dry_run else self.argv
        return [sys.executable, str(TOOLS / self.script), *argv, "--jsonl", records]


# The tiny model of the same family that a dry run trains instead (gin/models/*.gin).
DRY_MODELS = {"llama3_2_1b": "llama_tiny"}


def _dry_model(model: str) -> str:
    return DRY_MODELS.get(model, model.replace("_large", "_tiny"))


def _train(model: str, method: str, shape: Sequence[str], dry: Sequence[str]) -> tuple:
    return (("--model", model, "--method", method, *shape, "--steps", "30", "--warmup", "3"),
            ("--model", _dry_model(model), "--method", method, *dry,
             "--steps", "3", "--warmup", "1"))


GPT2_SHAPE, T5_SHAPE = ("--batch", "16", "--seq", "512"), ("--batch", "32", "--seq", "350",
                                                            "--targets-len", "350")
# Llama 3.2 1B (1.24B parameters) on one 80 GB H100, bfloat16 compute with remat: float32
# parameters, gradients and AdamW's two moments take ~20 GB, and the float32 logits over its
# 128,256-token vocabulary ~8 GB per 16k tokens (about three times that with their bfloat16 copy
# and gradient). 16 x 1024 (16k tokens, twice GPT-2 Large's row) leaves room on either stack;
# 16 x 2048 would put the logits alone near 50 GB.
LLAMA_SHAPE = ("--batch", "16", "--seq", "1024")
GPT2_DRY, T5_DRY = ("--batch", "2", "--seq", "32"), ("--batch", "2", "--seq", "16")


def _diff_rows(model: str, shape: Sequence[str], dry: Sequence[str], jax_s: float,
               torch_s: float) -> list[Row]:
    """A model's DIFF step on our stack, then PyTorch's ``torch.compile`` of the same run."""
    jax_argv, jax_dry = _train(model, "diff", shape, dry)
    # The dry run keeps PyTorch eager: torch.compile of even a tiny model takes minutes of
    # CPU, and the flag changes nothing in the suite's own code path.
    return [Row(f"{model} diff jax", "bench_train.py", jax_argv, jax_dry, jax_s),
            Row(f"{model} diff torch.compile", "bench_train_reference.py",
                (*jax_argv, "--compile"), jax_dry, torch_s, needs="torch")]


def _rows() -> list[Row]:
    rows = _diff_rows("gpt2_large", GPT2_SHAPE, GPT2_DRY, 75, 110)
    # About 2.5 x GPT-2 Large's FLOPs a step (1.6 x the parameters, 2 x the tokens): ~0.3 s a
    # step at 40% MFU, so compiling (JAX ~40 s, Inductor ~60 s) is most of each row.
    rows += _diff_rows("llama3_2_1b", LLAMA_SHAPE, GPT2_DRY, 90, 140)
    argv, dry_argv = _train("llama3_2_1b", "lora", LLAMA_SHAPE, GPT2_DRY)
    rows.append(Row("llama3_2_1b lora jax", "bench_train.py", argv, dry_argv, 80))
    rows += _diff_rows("t5_large", T5_SHAPE, T5_DRY, 75, 110)
    for model, method, shape, dry in (("gpt2_large", "kadapter", GPT2_SHAPE, GPT2_DRY),
                                      ("gpt2_large", "lora", GPT2_SHAPE, GPT2_DRY),
                                      ("t5_large", "kadapter", T5_SHAPE, T5_DRY)):
        argv, dry_argv = _train(model, method, shape, dry)
        rows.append(Row(f"{model} {method} jax", "bench_train.py", argv, dry_argv, 70))
    rows.append(Row("dpr encoders bf16", "bench_retrieval.py",
                    ("--retriever", "dpr", "--random-encoders", "base", "--dtype", "bfloat16",
                     "--passages", "100000", "--questions", "2000", "--batch-size", "256"),
                    ("--retriever", "dpr", "--random-encoders", "tiny", "--passages", "40",
                     "--questions", "8", "--repeats", "1"), 60))
    rows.append(Row("gpt2_large probe eval", "bench_eval.py",
                    ("--model", "gpt2_large", "--method", "diff", "--probes", "13000",
                     "--batch", "256"),
                    ("--model", "gpt2_tiny", "--method", "diff", "--probes", "8", "--batch", "4",
                     "--repeats", "1"), 60, needs="seqio"))
    return rows


ROWS = _rows()


def _missing(module: str | None) -> bool:
    return module is not None and importlib.util.find_spec(module) is None


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def _error_line(output: str) -> str:
    """The line of a failed row's output that says what went wrong (its last error line)."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    errors = [line for line in lines if not line.startswith(" ") and "rror" in line]
    return (errors or lines or [""])[-1]


def run_suite(rows: Sequence[Row], *, dry_run: bool, records: Path, budget_s: float,
              row_timeout_s: float) -> dict[str, list[str]]:
    """Run the rows in order (module docstring); returns row names by outcome."""
    run_id = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    outcome: dict[str, list[str]] = {"done": [], "failed": [], "skipped": [], "not run": []}
    records.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    for row in rows:
        left = budget_s - (time.monotonic() - start)
        if _missing(row.needs):
            print(f"skipped  {row.name}: {row.needs} is not installed here", flush=True)
            outcome["skipped"].append(row.name)
            continue
        if row.estimate_s > left and not dry_run:
            print(f"not run  {row.name}: about {row.estimate_s:.0f} s, {left:.0f} s left",
                  flush=True)
            outcome["not run"].append(row.name)
            continue
        # A real run stops a row at the budget's end (the lease); a dry run only at its timeout.
        timeout = row_timeout_s if dry_run else min(row_timeout_s, max(left, 60))
        with tempfile.TemporaryDirectory() as scratch:
            one = Path(scratch) / "row.jsonl"
            began = time.monotonic()
            try:
                done = subprocess.run(row.command(dry_run, str(one)), capture_output=True,
                                      text=True, timeout=timeout,
                                      env={**os.environ, "PYTHONUNBUFFERED": "1"})
                code, tail = done.returncode, _error_line(done.stderr or done.stdout)
            except subprocess.TimeoutExpired:
                code, tail = -1, f"stopped after {timeout:.0f} s"
            record = _last_json(one.read_text()) if one.is_file() else None
        seconds = time.monotonic() - began
        if code != 0 or record is None:
            print(f"failed   {row.name} ({seconds:.0f} s): {tail[:300]}", flush=True)
            outcome["failed"].append(row.name)
            continue
        record.update(suite_row=row.name, suite_run=run_id, suite_seconds=round(seconds, 1),
                      suite_dry_run=dry_run)
        with records.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
        print(f"done     {row.name} ({seconds:.0f} s)", flush=True)
        outcome["done"].append(row.name)
    return outcome


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of ``path``; a line that is not a JSON object names the file and line."""
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise SystemExit(f"{path}, line {number}: not JSON ({error.msg})") from None
        if not isinstance(record, dict) or "suite_row" not in record:
            raise SystemExit(f"{path}, line {number}: not a bench_gpu.py record")
        records.append(record)
    return records


def _figure(value: Any, scale: float = 1.0, digits: int = 0, suffix: str = "") -> str:
    if not isinstance(value, int | float):
        return "–"
    return f"{value * scale:,.{digits}f}{suffix}"


def _throughput(record: dict[str, Any]) -> str:
    if "tokens_per_second" in record:
        return _figure(record["tokens_per_second"]) + " tokens/s"
    shown = [_figure(record[key]) + f" {unit}" for key, unit in (
        ("passages_per_second_build", "passages/s encoded"),
        ("questions_per_second", "questions/s"),
        ("probes_scored_per_second", "probes/s scored"),
        ("probes_decoded_per_second", "probes/s decoded")) if key in record]
    return ", ".join(shown) or "–"


def gpu_table(records: Sequence[dict[str, Any]]) -> str:
    """Markdown: the newest record of each (device kind, row), measured rows only (dry runs
    are left out), ordered by the suite's row order; or a line saying none is recorded."""
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        if not record.get("suite_dry_run"):
            newest[(str(record.get("device_kind", "?")), record["suite_row"])] = record
    if not newest:
        return ("No GPU row is recorded yet: run `python tools/bench_gpu.py` on a GPU and "
                "commit `tools/records/gpu.jsonl`.")
    order = {row.name: i for i, row in enumerate(ROWS)}
    lines = ["| device | row | date | throughput | step time | MFU | peak memory |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for (device, name), record in sorted(newest.items(),
                                         key=lambda item: (item[0][0], order.get(item[0][1], 99))):
        lines.append(
            f"| {device} | {name} | {record.get('date', '–')} | {_throughput(record)} | "
            f"{_figure(record.get('step_time_median_s'), 1000, 1, ' ms')} | "
            f"{_figure(record.get('mfu'), 100, 1, '%')} | "
            f"{_figure(record.get('peak_memory_bytes'), 2 ** -30, 1, ' GiB')} |")
    return "\n".join(lines)


def write_table(doc: Path, records: Sequence[dict[str, Any]]) -> None:
    """Replace what lies between the markers of ``doc`` with :func:`gpu_table`."""
    text = doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc}: no {BEGIN} … {END} markers to write the GPU table between")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{gpu_table(records)}\n{END}{tail}", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="tiny models, two steps: the code path without a GPU")
    parser.add_argument("--table", action="store_true", help="only rewrite the table")
    parser.add_argument("--records", type=Path, default=None,
                        help=f"records file (default {RECORDS.relative_to(REPO)}; a "
                             "temporary one for --dry-run)")
    parser.add_argument("--doc", type=Path, default=None,
                        help=f"document holding the table (default {DOC.relative_to(REPO)}; a "
                             "temporary copy for --dry-run)")
    parser.add_argument("--budget", type=float, default=480,
                        help="seconds for all rows, compilation included (default 480)")
    parser.add_argument("--row-timeout", type=float, default=300,
                        help="seconds one row may take before it is stopped (default 300)")
    parser.add_argument("--rows", default=None,
                        help="comma-separated row names to run (default: all, in order)")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench_gpu_")) if args.dry_run else None
    records = args.records or (scratch / "gpu.jsonl" if scratch else RECORDS)
    doc = args.doc
    if doc is None and scratch is not None:
        doc = scratch / "performance.md"
        doc.write_text(DOC.read_text(encoding="utf-8"), encoding="utf-8")
    doc = doc or DOC
    if not args.table:
        rows = ROWS
        if args.rows:
            wanted = [name.strip() for name in args.rows.split(",")]
            unknown = [name for name in wanted if name not in {r.name for r in ROWS}]
            if unknown:
                parser.error(f"unknown rows {unknown}; rows: {', '.join(r.name for r in ROWS)}")
            rows = [r for r in ROWS if r.name in wanted]
        outcome = run_suite(rows, dry_run=args.dry_run, records=records, budget_s=args.budget,
                            row_timeout_s=args.row_timeout)
        print(json.dumps({"records": str(records), **outcome}))
    write_table(doc, read_records(records))
    print(f"GPU table written to {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
