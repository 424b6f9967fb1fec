"""docs/tpu_estimates.md from its results: every compiled row in the table, a row libtpu could
not compile named with the reason instead of a number, rows not tried yet listed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("tpu_compile_table",
                                                  ROOT / "tools" / "tpu_compile_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_table_is_generated_from_the_shipped_results():
    tool = _tool()
    rows = [json.loads(line) for line in
            (ROOT / "docs" / "tpu_estimates.jsonl").read_text().splitlines()]
    assert (ROOT / "docs" / "tpu_estimates.md").read_text() == tool.markdown(tool._ordered(rows))


def test_a_crashed_row_is_named_and_kept_out_of_the_table():
    tool = _tool()
    rows = [json.loads(line) for line in
            (ROOT / "docs" / "tpu_estimates.jsonl").read_text().splitlines()]
    compiled = [r for r in rows if not r.get("crashed")]
    text = tool.markdown(tool._ordered(compiled[:1] + [
        {"model": "t5_large", "method": "modular", "topology": "v5p:2x2x1", "crashed": True}]))
    table = [line for line in text.splitlines() if line.startswith("| t5_large")]
    assert len(table) == 1
    assert ("Left out: libtpu 0.0.42.1 crashes (SIGSEGV) compiling t5_large modular v5p-8 at "
            "both `--effort fast` and `full`") in text
    missing = next(line for line in text.splitlines() if line.startswith("Not compiled yet"))
    assert missing.startswith(f"Not compiled yet ({len(tool.rows_wanted(tool.MODELS, tool.METHODS, tool.TOPOLOGIES)) - 2} rows")
    assert "modular v5p-8" not in missing


def test_the_open_llms_have_diff_and_lora_rows_of_2048_tokens():
    tool = _tool()
    rows = tool.rows_wanted(["llama3_1_8b"], tool.METHODS, tool.TOPOLOGIES)
    assert {method for _, method, _ in rows} == {"diff", "lora"} and len(rows) == 6
    assert tool.command("llama3_1_8b", "diff", "v5p:2x2x1") == (
        "tw-jax compile --topology v5p:2x2x1 --gin_file=diff.gin "
        "--gin_file=models/llama3_1_8b.gin --gin.TARGETS_LENGTH=2048")
    assert tool.command("gpt2_large", "lora", "v4:2x2x1").endswith("models/gpt2_large.gin")


def test_a_row_given_up_is_kept_as_not_compiled_here_with_its_reason(tmp_path):
    tool = _tool()
    results = tmp_path / "rows.jsonl"
    results.write_text("")
    results.with_suffix(".attempt").write_text(
        json.dumps({"row": ["qwen2_5_7b", "diff", "v5e:4x4"], "effort": "fast"}))
    tool._give_up_row(results, "compiling took over 12 min on this CPU machine")
    assert not results.with_suffix(".attempt").exists()
    (row,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert row == {"model": "qwen2_5_7b", "method": "diff", "topology": "v5e:4x4", "chips": 16,
                   "not_compiled": "compiling took over 12 min on this CPU machine"}
    line = next(line for line in tool.markdown([row]).splitlines()
                if line.startswith("| qwen2_5_7b"))
    assert ("| qwen2_5_7b | diff | v5e-16 | 16 | not compiled here (compiling took over 12 min "
            "on this CPU machine) | - |") in line
    assert line.endswith("--gin.TARGETS_LENGTH=2048` |")
    tool._forget_not_compiled(results)
    assert results.read_text() == ""
