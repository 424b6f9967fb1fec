"""The benchmark scripts of tools/ (issue 9's harness) run end to end on tiny settings.

Each script's ``main`` is called in this process (imported from its file: tools/ is no package)
with tiny shapes; the JSON line it prints must be its record, with the fields the issue asks for
and sane values: positive throughput, the FLOPs per token of tw_jax.train.flops for the run's
config, no MFU on CPU unless a peak is given. The PyTorch reference runs eagerly only
(``torch.compile`` takes minutes on a small CPU) and only where torch imports.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
TRAIN_FIELDS = (
    "stack", "model", "method", "device", "device_kind", "date", "dtype", "freeze", "optimizer",
    "batch", "lengths", "tokens_per_step", "steps", "warmup", "compile_s", "first_step_s",
    "step_time_median_s", "step_time_p10_s", "step_time_p90_s", "step_time_min_s",
    "step_time_max_s", "tokens_per_second", "cpu_time_per_step_s", "params_total",
    "params_trainable", "flops_per_token", "flops_per_step", "model_flops_per_second",
    "peak_flops_per_second", "mfu", "peak_memory_bytes", "peak_memory_source", "final_loss",
    "gin_files",
)
TINY = ["--batch", "2", "--seq", "32", "--steps", "2", "--warmup", "1"]
# One layer per stack and no dropout (its random bits triple T5's compile time on CPU) keep
# XLA's compilation, most of these tests' time, short.
ONE_LAYER = {
    "gpt2_tiny": ["tw_jax.models.GPT2Config.n_layer=1", "tw_jax.models.GPT2Config.dropout_rate=0.0"],
    "t5_tiny": ["tw_jax.models.T5Config.num_layers=1", "tw_jax.models.T5Config.dropout_rate=0.0"],
}


def _load(name: str) -> ModuleType:
    """A tools/ script as a module (registered: its dataclasses need ``sys.modules``)."""
    key = f"tools_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, TOOLS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def _printed_record(capsys: pytest.CaptureFixture) -> dict:
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    return json.loads(lines[-1])


def _gin(bindings: list[str]) -> list[str]:
    return [arg for binding in bindings for arg in ("--gin", binding)]


def _expected_flops_per_token(model: str, method: str, bindings: list[str]) -> float:
    bench_common = _load("bench_train").bench_common  # the helper the scripts import
    from tw_jax.train.flops import train_flops_per_token

    args = type("Args", (), {"model": model, "method": method, "run": "auto", "gin_file": [],
                             "gin": bindings, "batch": 2, "seq": 32, "targets_len": None,
                             "seed": None})()
    setup = bench_common.load_setup(args, "cpu")
    return train_flops_per_token(setup.config, setup.lengths)


def _check_train_record(
    record: dict, model: str, method: str, stack: str, bindings: list[str]
) -> None:
    missing = [f for f in TRAIN_FIELDS if f not in record]
    assert not missing, missing
    assert (record["stack"], record["model"], record["method"]) == (stack, model, method)
    t5 = model.startswith("t5")
    assert record["lengths"] == ({"encoder": 32, "decoder": 8} if t5 else {"decoder": 32})
    assert record["tokens_per_step"] == 2 * (40 if t5 else 32)
    assert record["steps"] == 2
    assert record["tokens_per_second"] > 0
    assert 0 < record["step_time_min_s"] <= record["step_time_median_s"] <= record["step_time_max_s"]
    assert record["tokens_per_second"] == pytest.approx(
        record["tokens_per_step"] / record["step_time_mean_s"])
    assert record["flops_per_token"] == pytest.approx(_expected_flops_per_token(model, method, bindings))
    assert record["flops_per_step"] == pytest.approx(
        record["flops_per_token"] * record["tokens_per_step"])
    assert 0 < record["params_trainable"] <= record["params_total"]
    assert record["peak_memory_bytes"] > 0
    assert record["peak_memory_source"] in ("process_max_rss", "device_peak_bytes_in_use",
                                            "torch_cuda_max_allocated")
    assert record["final_loss"] is not None and record["final_loss"] > 0


@pytest.mark.parametrize(("model", "method"), [("gpt2_tiny", "lora"), ("t5_tiny", "diff")])
def test_bench_train(model, method, capsys, tmp_path):
    bench_train = _load("bench_train")
    jsonl = tmp_path / "runs.jsonl"
    extra = ["--peak-flops", "1e12"] if model == "t5_tiny" else []
    bindings = ONE_LAYER[model]
    record = bench_train.main(["--model", model, "--method", method, *TINY, *_gin(bindings),
                               "--jsonl", str(jsonl), *extra])
    assert _printed_record(capsys) == record
    assert json.loads(jsonl.read_text().splitlines()[-1]) == record
    _check_train_record(record, model, method, "jax", bindings)
    assert record["gin_bindings"] == bindings
    assert record["compile_s"] > 0
    if method == "lora":
        assert record["params_trainable"] < record["params_total"]  # LoRA freezes the base
    else:
        assert record["params_trainable"] == record["params_total"]
    if extra:
        assert record["peak_flops_per_second"] == 1e12
        assert record["mfu"] == pytest.approx(record["model_flops_per_second"] / 1e12)
    elif record["device"] == "cpu":
        assert record["mfu"] is None and record["peak_flops_per_second"] is None


def test_modular_is_refused_for_gpt2(capsys):
    bench_train = _load("bench_train")
    assert bench_train.bench_common.run_main(
        bench_train.main, ["--model", "gpt2_tiny", "--method", "modular", *TINY]) == 2
    assert ("gin binds ModelSettings.modular (the modular method) but the run's MODEL is a GPT2Config, "
            "which has no modular variant" in capsys.readouterr().err)


@pytest.mark.parametrize(("model", "method"), [("gpt2_tiny", "lora"), ("t5_tiny", "kadapter")])
def test_bench_train_reference(model, method, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    reference = _load("bench_train_reference")
    record = reference.main(["--model", model, "--method", method, *TINY, "--device", "cpu"])
    assert _printed_record(capsys) == record
    _check_train_record(record, model, method, "pytorch-eager", [])
    assert record["compile_s"] is None


def test_bench_eval(capsys):
    bench_eval = _load("bench_eval")
    record = bench_eval.main(["--model", "gpt2_tiny", "--probes", "48", "--decode-probes", "16",
                              "--batch", "16", "--repeats", "1", "--max-new-tokens", "4",
                              *_gin(ONE_LAYER["gpt2_tiny"])])
    assert _printed_record(capsys) == record
    # the production path (the probe mixtures through seqio.Evaluator) decodes every probe; the
    # row-by-row baseline the first --decode-probes
    assert (record["probes"], record["decode_probes"], record["rows_decode_probes"]) == (48, 48, 16)
    assert sum(record["categories"].values()) == 48 and record["categories"]["deleted"] == 0
    # CHANGED is its own task: UPDATED then NEW again
    changed = record["categories"]["updated"] + record["categories"]["new"]
    assert record["examples_scored"] == 48 + changed
    assert set(record["perplexities"]) == {"unchanged", "updated", "new", "changed"}
    assert all(v > 1 for v in record["perplexities"].values())
    assert record["qa_protocol"] == "teacher_forced" and set(record["em"]) == set(
        record["perplexities"])
    for rate in ("probes_scored_per_second", "probes_decoded_per_second",
                 "rows_probes_scored_per_second", "rows_probes_decoded_per_second"):
        assert record[rate] > 0, rate
    assert record["score_s"] == record["score_cold_s"]  # one pass: the cold one is all there is
    assert record["finite_perplexities"] == 48
    assert record["month_score_s"] == pytest.approx(13_000 / record["probes_scored_per_second"])
    assert record["tokens_per_probe_mean"] > 1


def test_synthetic_probes_read_as_probe_rows():
    bench_eval = _load("bench_eval")
    import io

    from tw_jax.preprocess.probes.probe_csv import read_probe_rows

    rows = read_probe_rows(io.StringIO(bench_eval.synthetic_probe_csv(50, seed=3), newline=""),
                           "x.csv")
    assert len(rows) == 50
    assert all(r["text"] == f"{r['subject']} {r['relation']} {r['object']}" for r in rows)
    assert any(r["previous_object"] for r in rows)
    assert sys.modules.get("bench_common") is not None  # the scripts import their helper


def test_bench_probes_stage_reports_peak_memory_at_each_size(capsys, tmp_path):
    """``bench_probes.py --stage``: the whole stage in a child process on a world whose facts
    pass alignment, one record per size with its peak RSS and the probes it kept."""
    bench_probes = _load("bench_probes")
    bench_probes.main(["--stage", "--entities", "300", "600", "--unchanged-rate", "1",
                       "--workdir", str(tmp_path)])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines[-2:]]
    assert [r["entities"] for r in records] == [300, 600]
    for record in records:
        assert record["peak_rss_main_mib"] >= record["rss_after_imports_mib"] > 0
        assert record["peak_rss_workers_mib"] == 0  # one process: no workers
        assert 0 < record["final_probes"] < record["kept_probes"]
    assert records[1]["kept_probes"] > records[0]["kept_probes"]
