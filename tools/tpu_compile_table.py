"""The table of docs/tpu_estimates.md: every shipped model x method compiled for TPU slices.

    python tools/tpu_compile_table.py                       # all rows (hours on a 2-core CPU)
    python tools/tpu_compile_table.py --topologies v5e:4x4 --methods diff,lora --models gpt2_large
    python tools/tpu_compile_table.py --models llama3_1_8b --topologies v5p:2x2x1 --row-timeout 720

Each row is what ``tw-jax compile --topology TOPO --gin_file=METHOD.gin [--gin_file=models/
gpt2_large.gin]`` reports (the experiment files carry T5-large and ``runs/tpu.gin``; GPT-2 Large
is laid over them, as are the open LLMs, which read 2048-token rows: ``--gin.TARGETS_LENGTH=2048``):
fits, memory per chip, XLA's estimated step time, tokens/s and MFU, and the
hours of one TemporalWiki month. Methods that differ only in their data (DIFF, FULL, Mix-Review)
compile to the same program, which is compiled once.

A month is TemporalWiki's ~347M DiffSet tokens of text, one pass: GPT-2 reads the text as
``targets`` (512 per row), T5 as ``inputs`` (350 per row; the targets are its masked spans), so
a month is ``347e6 / (BATCH_SIZE x text length)`` steps at the estimated step time. Estimates,
not measurements: see ``tw_jax/train/aot.py`` for what XLA's cost model covers.

Results are kept, one JSON object per row, in ``--results`` (default
``docs/tpu_estimates.jsonl``); a rerun compiles only rows not there yet (``--fresh`` starts
over), each in a child process of its own (XLA's host memory grows from row to row in one
process: past 21 GB of a 24 GB machine), then writes ``--out`` (default
``docs/tpu_estimates.md``) from all of them; ``--write-only`` just writes it.

Rows compile with ``--effort fast``. libtpu 0.0.42.1 crashes (SIGSEGV) on some programs at that
effort (T5-large's train step for a v5p), so the work runs in a child process: when it dies, the
row it was compiling (kept in ``RESULTS.attempt``) is compiled again with ``--effort full``, and
the table says which effort each row had. Once one method of a model needed full on a slice,
the model's other methods on that slice try full first, then fast.

A row whose compilation takes longer than ``--row-timeout`` seconds, or whose child process is
killed for host memory (SIGKILL: this machine's, not the chip's), is kept as "not compiled here"
with that reason rather than tried again: its figures are unknown, not bad, and a rerun with
``--retry-not-compiled`` (on a bigger machine) tries it again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

MONTH_TOKENS = 347e6  # TemporalWiki: ~347M tokens per monthly DiffSet (GPT-2 Large, one pass)
TOPOLOGIES = ("v4:2x2x1", "v5e:4x4", "v5p:2x2x1")
SLICE_NAMES = {"v4:2x2x1": "v4-8", "v5e:4x4": "v5e-16", "v5p:2x2x1": "v5p-8"}
# TemporalWiki's and CKL's models, then today's open LLMs (their gin carries their HF config.json).
PAPER_MODELS = ("t5_large", "gpt2_large")
OPEN_LLMS = ("llama3_2_1b", "llama3_1_8b", "qwen2_5_7b", "gemma3_4b")
MODELS = (*PAPER_MODELS, *OPEN_LLMS)
METHODS = ("diff", "full", "mixreview", "recadam", "lora", "kadapter", "modular")
T5_ONLY = ("modular",)
# The open LLMs' rows: full training and LoRA, the two ends of what a month costs (FULL and
# Mix-Review compile to DIFF's program; the paper's adapters are GPT-2's and T5's).
OPEN_LLM_METHODS = ("diff", "lora")
# 2048 tokens a row: a continual-pretraining default for these models (their gin keeps GPT-2
# Large's 512 as TemporalWiki's setting; 2048 is what their pretraining packs at the least).
OPEN_LLM_TARGETS_LENGTH = 2048
REPO = Path(__file__).resolve().parents[1]
_ONE_ROW_DONE = 10  # a child's exit status: it compiled one row, more may be left


def gin_files(model: str, method: str) -> list[str]:
    files = [f"{method}.gin"]
    if model != "t5_large":
        files.append(f"models/{model}.gin")
    return files


def gin_bindings(model: str) -> list[str]:
    """What a row binds after its files: the open LLMs' 2048-token rows."""
    return [f"TARGETS_LENGTH={OPEN_LLM_TARGETS_LENGTH}"] if model in OPEN_LLMS else []


def command(model: str, method: str, topology: str) -> str:
    flags = [f"--gin_file={f}" for f in gin_files(model, method)]
    flags += [f"--gin.{b}" for b in gin_bindings(model)]
    return f"tw-jax compile --topology {topology} {' '.join(flags)}"


def methods_of(model: str, methods: Iterable[str]) -> list[str]:
    """The methods of ``methods`` that ``model`` has a row for."""
    if model in OPEN_LLMS:
        return [m for m in methods if m in OPEN_LLM_METHODS]
    return [m for m in methods if not (model != "t5_large" and m in T5_ONLY)]


def _effort_note(rows: Sequence[dict[str, Any]]) -> list[str]:
    full = [r for r in rows if r.get("effort") == "full"]
    if not full:
        return []
    return ["", "Rows compiled with `--effort full` (libtpu crashed at `fast` on them, or on "
            "another method of the model on that slice): "
            + ", ".join(f"{r['model']} {r['method']} {SLICE_NAMES.get(r['topology'])}"
                        for r in full) + "."]


def rows_wanted(models: Iterable[str], methods: Iterable[str],
                topologies: Iterable[str]) -> list[tuple[str, str, str]]:
    methods = list(methods)
    return [
        (model, method, topology)
        for model in models
        for method in methods_of(model, methods)
        for topology in topologies
    ]


def compile_row(model: str, method: str, topology: str, effort: str = "fast") -> dict[str, Any]:
    from tw_jax.runtime import gin_setup
    from tw_jax.train import aot

    gin_setup.parse(gin_files(model, method), gin_bindings(model), (), gin_setup.MACROS_COMPILE)
    report = aot.compile_for_topology(topology=topology, effort=effort)
    lengths = report["task_feature_lengths"]
    text = lengths["inputs"] if "inputs" in lengths else lengths["targets"]
    steps = MONTH_TOKENS / (report["batch_size"] * text)
    seconds = report["est_step_seconds"]
    return {
        **report,
        "model_type": report["model"], "model": model, "method": method,
        "command": command(model, method, topology), "month_steps": round(steps),
        "month_hours": steps * seconds / 3600 if seconds else None,
    }


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _missing_note(rows: Sequence[dict[str, Any]]) -> list[str]:
    done = {(r["model"], r["method"], r["topology"]) for r in rows}
    missing = [key for key in rows_wanted(MODELS, METHODS, TOPOLOGIES) if key not in done]
    if not missing:
        return []
    return ["", f"Not compiled yet ({len(missing)} rows; `python tools/tpu_compile_table.py` "
            "compiles only these): " + ", ".join(
                f"{m} {method} {SLICE_NAMES.get(t, t)}" for m, method, t in missing) + "."]


def _crashed_note(rows: Sequence[dict[str, Any]]) -> list[str]:
    crashed = [r for r in rows if r.get("crashed")]
    if not crashed:
        return []
    return ["", "Left out: libtpu 0.0.42.1 crashes (SIGSEGV) compiling "
            + ", ".join(f"{r['model']} {r['method']} {SLICE_NAMES.get(r['topology'])}"
                        for r in crashed)
            + " at both `--effort fast` and `full` (a compiler fault, not a sign that the run "
            "does not fit: the same program compiles for the other slices)."]


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    crashed = [r for r in rows if r.get("crashed")]
    rows = [r for r in rows if not r.get("crashed")]
    length = OPEN_LLM_TARGETS_LENGTH
    lines = [
        "# TPU estimates: every shipped model and method, compiled ahead of time",
        "",
        "Generated by `python tools/tpu_compile_table.py`; each row's own command is in the",
        "last column. **These are XLA's estimates from compiling for the slice on a CPU machine,",
        "not measurements on a TPU.** Memory per chip is what the compiled program needs",
        "(parameters, optimizer state, activations, code); step time is XLA's cost model of",
        "that program (or, where it gives none, the roofline of its FLOP and byte counts);",
        "tokens/s and MFU follow from it. A month is TemporalWiki's ~347M DiffSet tokens in one",
        "pass at the run's batch (T5 reads them as 350-token inputs, GPT-2 as 512-token rows);",
        "chip-hours are hours x chips. `runs/tpu.gin` as shipped: FSDP over all chips, bfloat16,",
        "rematerialised blocks; `fast` compile effort. The open LLMs (Llama 3.2 1B, Llama 3.1 8B,",
        "Qwen2.5 7B, Gemma 3 4B) have DIFF (full training) and LoRA rows at their gin's batch of 64",
        f"rows of {length} tokens (`--gin.TARGETS_LENGTH={length}`, a continual-pretraining default;",
        "their gin keeps GPT-2 Large's 512), a month counted in the same ~347M tokens (their larger",
        "vocabularies read the same text in somewhat fewer).",
        "",
        "| model | method | slice | chips | fits | GiB / chip (HBM) | est. step s | est. tokens/s "
        "| est. MFU | steps / month | est. hours / month | chip-hours | command |",
        "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        if row.get("not_compiled"):
            lines.append(_not_compiled_line(row))
            continue
        hours = row["month_hours"]
        memory = row["memory_per_chip_bytes"]
        gib = "-" if memory is None else f"{memory / 1024**3:.2f}"
        lines.append(
            f"| {row['model']} | {row['method']} | {SLICE_NAMES.get(row['topology'], row['topology'])} "
            f"| {row['chips']} | {'yes' if row['fits'] else '**no**'} "
            f"| {gib} ({row['hbm_per_chip_bytes'] / 1024**3:.0f}) "
            f"| {_fmt(row['est_step_seconds'], '.3f')} "
            f"| {_fmt(row['est_tokens_per_second'], ',.0f')} "
            f"| {_fmt(row['est_mfu'], '.0%')} "
            f"| {row['month_steps']:,} | {_fmt(hours, '.2f')} "
            f"| {_fmt(hours and hours * row['chips'], '.1f')} | `{row['command']}` |"
        )
    return "\n".join(lines + _effort_note(rows) + _fits_note(rows)
                     + _missing_note([*rows, *crashed]) + _crashed_note(crashed)) + "\n"


def _not_compiled_line(row: dict[str, Any]) -> str:
    """A table row whose compilation was given up here: the reason where its figures would be."""
    topology = row["topology"]
    return (f"| {row['model']} | {row['method']} | {SLICE_NAMES.get(topology, topology)} "
            f"| {row.get('chips', '-')} | not compiled here ({row['not_compiled']}) "
            + "| - " * 7 + f"| `{command(row['model'], row['method'], topology)}` |")


def _fits_note(rows: Sequence[dict[str, Any]]) -> list[str]:
    """For each open LLM and method compiled on every slice: the slices it fits, fewest chips
    first (the smallest slice each fits), or that it fits none of them."""
    compiled = [r for r in rows if r["model"] in OPEN_LLMS and not r.get("not_compiled")]
    notes = []
    for model in OPEN_LLMS:
        for method in OPEN_LLM_METHODS:
            mine = [r for r in compiled if (r["model"], r["method"]) == (model, method)]
            if {r["topology"] for r in mine} != set(TOPOLOGIES):
                continue
            fits = sorted((r for r in mine if r["fits"]),
                          key=lambda r: (r["chips"], r["hbm_per_chip_bytes"]))
            where = (", ".join(SLICE_NAMES[r["topology"]] for r in fits) if fits
                     else "none of these slices")
            notes.append(f"{model} {method}: {where}")
    if not notes:
        return []
    return ["", "Where each open LLM fits (fewest chips first, then least HBM): "
            + "; ".join(notes) + "."]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--topologies", default=",".join(TOPOLOGIES))
    parser.add_argument("--results", type=Path, default=REPO / "docs" / "tpu_estimates.jsonl")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "tpu_estimates.md")
    parser.add_argument("--fresh", action="store_true", help="compile every row again")
    parser.add_argument("--write-only", action="store_true",
                        help="write --out from the rows in --results, compiling nothing")
    parser.add_argument("--row-timeout", type=float, default=None, metavar="S",
                        help="give a row up as not compiled here after S seconds (default: none)")
    parser.add_argument("--retry-not-compiled", action="store_true",
                        help="try the rows kept as not compiled here again")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.child:
        return _work(args)
    if args.write_only:
        rows = [json.loads(line) for line in args.results.read_text().splitlines()]
        args.out.write_text(markdown(_ordered(rows)))
        return 0
    if args.fresh:
        args.results.unlink(missing_ok=True)
        argv = [a for a in argv if a != "--fresh"]
    wanted = len(rows_wanted(args.models.split(","), args.methods.split(","),
                             args.topologies.split(",")))
    # One child per row (XLA's host memory grows from row to row in one process); a row may
    # also crash once at fast and once at full.
    child_argv = [a for a in argv if a != "--retry-not-compiled"]
    if args.retry_not_compiled:
        _forget_not_compiled(args.results)
    for _ in range(3 * wanted + 1):
        try:
            code = subprocess.run([sys.executable, __file__, *child_argv, "--child"],
                                  check=False, timeout=args.row_timeout).returncode
        except subprocess.TimeoutExpired:  # run() has killed the child
            code = None
        if code == _ONE_ROW_DONE:
            continue
        if code is None or code == -signal.SIGKILL:
            reason = (f"compiling took over {args.row_timeout / 60:.0f} min on this CPU machine"
                      if code is None else
                      "its compiling process was killed, out of this CPU machine's memory")
            _give_up_row(args.results, reason)
            continue
        if code >= 0:
            return code
        print(f"the compiling process died (signal {-code}); going on",
              file=sys.stderr, flush=True)
    return 1


def _read_results(results: Path) -> list[dict[str, Any]]:
    if not results.exists():
        return []
    return [json.loads(line) for line in results.read_text().splitlines()]


def _write_results(results: Path, rows: Iterable[dict[str, Any]]) -> None:
    results.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def _give_up_row(results: Path, reason: str) -> None:
    """Keep the row the child was compiling (``RESULTS.attempt``) as not compiled here, so
    that the next child goes on to the next row instead of trying it again."""
    attempt = results.with_suffix(".attempt")
    if not attempt.exists():
        return
    model, method, topology = json.loads(attempt.read_text())["row"]
    print(f"{model} {method} {topology}: not compiled here ({reason})", file=sys.stderr,
          flush=True)
    _, chips = _parse_topology(topology)
    rows = [r for r in _read_results(results)
            if (r["model"], r["method"], r["topology"]) != (model, method, topology)]
    rows.append({"model": model, "method": method, "topology": topology,
                 "not_compiled": reason, "chips": chips})
    _write_results(results, rows)
    attempt.unlink()


def _parse_topology(topology: str) -> tuple[str, int]:
    """``(generation, chips)`` of ``v5p:2x2x1`` without loading libtpu (the parent never does)."""
    generation, shape = topology.split(":")
    chips = 1
    for size in shape.split("x"):
        chips *= int(size)
    return generation, chips


def _forget_not_compiled(results: Path) -> None:
    _write_results(results, [r for r in _read_results(results) if not r.get("not_compiled")])


def _ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order = {key: index for index, key in enumerate(rows_wanted(MODELS, METHODS, TOPOLOGIES))}
    return sorted(rows,
                  key=lambda r: order.get((r["model"], r["method"], r["topology"]), len(order)))


def _work(args: argparse.Namespace) -> int:
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    done: dict[tuple[str, str, str], dict[str, Any]] = {}
    if args.results.exists():
        for line in args.results.read_text().splitlines():
            row = json.loads(line)
            done[(row["model"], row["method"], row["topology"])] = row
    attempt = args.results.with_suffix(".attempt")
    crashed: dict[tuple[str, str, str], str] = {}
    if attempt.exists():  # the previous process died compiling this row
        last = json.loads(attempt.read_text())
        crashed[tuple(last["row"])] = last["effort"]
    wanted = rows_wanted(args.models.split(","), args.methods.split(","),
                         args.topologies.split(","))
    for key in wanted:
        if key in done:
            continue
        # libtpu's crash at fast follows the model and slice more than the method: where
        # another method of this model needed full on this slice, try full first (a crash
        # costs minutes), then fast.
        crashed_before = any(r.get("effort") == "full" and (m, t) == (key[0], key[2])
                             for (m, _, t), r in done.items())
        order = ("full", "fast") if crashed_before else ("fast", "full")
        if crashed.get(key) == order[1]:
            print(f"{' '.join(key)}: libtpu crashed at both efforts; left out", file=sys.stderr)
            done[key] = {"model": key[0], "method": key[1], "topology": key[2], "crashed": True}
            attempt.unlink()
            args.results.write_text("".join(json.dumps(r, sort_keys=True) + "\n"
                                            for r in done.values()))
            continue
        effort = order[1] if crashed.get(key) == order[0] else order[0]
        attempt.write_text(json.dumps({"row": list(key), "effort": effort}))
        started = time.perf_counter()
        row = compile_row(*key, effort=effort)
        attempt.unlink()
        done[key] = row
        args.results.write_text("".join(json.dumps(r, sort_keys=True) + "\n"
                                        for r in done.values()))
        memory = row["memory_per_chip_bytes"]
        print(f"{' '.join(key)}: fits={row['fits']} "
              f"{_fmt(memory and memory / 1024**3, '.2f')} GiB, {effort} effort, "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        return _ONE_ROW_DONE
    rows = _ordered(list(done.values()))
    args.out.write_text(markdown(rows))
    print(f"wrote {args.out} ({len(rows)} rows)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
