"""The demo's second half: train, update, evaluate and report on the sample world's data.

A tiny GPT-2 (TemporalWiki's model family, with the demo's own byte-level BPE vocabulary) is
trained INITIAL on the first snapshot, then updated month after month with DIFF, K-Adapter,
LoRA and Mix-Review through the lifelong runner, each checkpoint scored on every month's probes
(the temporal-misalignment matrix), and ``tw-jax report`` writes the tables and figures. It is
the same code path as ``tw-jax lifelong`` and ``tw-jax report`` at scale; only the gin run file
(``runs/demo.gin``) and the step counts are small.

How long each part trains. INITIAL learns the first snapshot over many passes (``initial_steps``
at INITIAL's batch and learning rate), standing in for the paper's GPT-2 pretrained and then
trained on the 08 snapshot for four epochs. Each monthly update then makes one pass over its own
training data, as TemporalWiki does ("we iterate through the training data only once", Section
5.2): ``TRAIN_EPOCHS = 1`` in ``runs/demo.gin``, so the lifelong runner sizes DIFF, K-Adapter
and LoRA by the DiffSet and Mix-Review by the DiffSet plus its review data (three times as many
examples under TemporalWiki's mix-ratio 2). Forgetting then comes from what an update trains on,
not from passing over the same few blocks dozens of times.

Compilation dominates a tiny model's run time on a CPU, and the runner trains nine models with
three parameter layouts (plain, K-Adapter, LoRA): a persistent XLA cache compiles each train and
scoring step once (in the folder JAX is set to use already, as ``tw-jax lifelong`` does, else in
``OUT/xla_cache``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEMO_METHODS: tuple[str, ...] = ("diff", "full", "kadapter", "lora", "mixreview")
DEMO_METRICS: tuple[str, ...] = ("ppl", "qa", "rank", "propn")


@dataclass(frozen=True)
class DemoTraining:
    """What the demo trains and measures (the CLI's knobs)."""

    months: tuple[str, ...] = ("0809", "0910")  # period names (tw_jax.time), in chain order
    methods: tuple[str, ...] = DEMO_METHODS
    model_gin: str = "models/gpt2_tiny.gin"
    initial_steps: int = 300
    initial_batch_size: int = 8
    initial_learning_rate: float = 3e-3
    update_epochs: float | None = 1.0  # passes over each update's data (None: update_steps)
    update_steps: int | None = None  # a fixed step count per update instead (smoke tests)
    metrics: tuple[str, ...] = DEMO_METRICS
    eval_matrix: bool = True
    max_probes: int | None = None
    propn_instances: int = 200
    propn_length: int = 128


def _vocabulary_size(data_dir: Path) -> int:
    from tw_jax.data.vocabularies import gpt2_vocabulary

    return int(gpt2_vocabulary(str(data_dir / "vocab" / "gpt2")).vocab_size)


def _budget(settings: DemoTraining, method: str) -> list[str]:
    """Gin bindings for how long ``method`` trains: INITIAL by steps at its own batch size and
    learning rate, an update by passes (TRAIN_EPOCHS) or by ``update_steps``."""
    if method == "initial":
        return [f"TRAIN_STEPS={settings.initial_steps}",
                f"BATCH_SIZE={settings.initial_batch_size}",
                f"LEARNING_RATE={settings.initial_learning_rate}"]
    if settings.update_steps is not None:
        return ["TRAIN_EPOCHS=None", f"TRAIN_STEPS={settings.update_steps}"]
    if settings.update_epochs is None:
        raise ValueError("DemoTraining: set update_epochs or update_steps")
    return [f"TRAIN_EPOCHS={settings.update_epochs}"]


class DemoSettingsError(ValueError):
    """Demo settings that cannot run (an unknown method, one the model cannot use): raised
    before any data is built or anything trains."""


def check_settings(settings: DemoTraining) -> None:
    """Each method is one the lifelong runner trains, and its gin files with the demo's model
    build a run (:func:`~tw_jax.train.gin_config.train_config` refuses a variant the model
    lacks, as ``modular`` on GPT-2)."""
    from tw_jax.evaluate.groups import TRAINS_ON
    from tw_jax.lifelong.runner import check_months
    from tw_jax.runtime import gin_setup
    from tw_jax.train.gin_config import train_config

    check_months(settings.months)
    if not settings.methods:
        raise DemoSettingsError("no methods given (e.g. --methods diff,lora)")
    unknown = [m for m in settings.methods if m not in TRAINS_ON]
    if unknown:
        raise DemoSettingsError(
            f"unknown method(s) {', '.join(unknown)}; the demo trains: {', '.join(TRAINS_ON)}")
    try:
        for method in ("initial", *settings.methods):
            gin_setup.parse([f"{method}.gin", settings.model_gin, "runs/demo.gin"],
                            _budget(settings, method), runner_macros=("TRAIN_EPOCHS",))
            train_config()
    except gin_setup.GinConfigError as error:
        raise DemoSettingsError(f"method {method}: {error}") from None


def train_and_report(data_dir: str | Path, out_dir: str | Path,
                     settings: DemoTraining = DemoTraining()) -> dict[str, Any]:
    """INITIAL, then every method over ``settings.months``; results in ``OUT/runs``, the report
    in ``OUT/report``. Returns what was done, with the report's paths and the first table."""
    from tw_jax.evaluate.per_probe import read_runs
    from tw_jax.evaluate.report import ResultIndex, probe_table
    from tw_jax.evaluate.report_cli import build_report
    from tw_jax.evaluate.results import read_results
    from tw_jax.lifelong.runner import LifelongOptions, check_months, run_lifelong
    from tw_jax.runtime.compile_cache import configured, use_persistent_cache

    data_dir, out_dir = Path(data_dir), Path(out_dir)
    runs = out_dir / "runs"
    use_persistent_cache(configured() or str(out_dir / "xla_cache"), every_program=True)
    logging.getLogger("absl").setLevel(logging.WARNING)
    bindings = [
        f"tw_jax.models.GPT2Config.vocab_size={_vocabulary_size(data_dir)}",
        "tw_jax.models.GPT2Config.n_positions=256",
    ]
    seconds: dict[str, float] = {}
    periods = check_months(settings.months)
    for method in ("initial", *settings.methods):
        started = time.perf_counter()
        what = (f"the {periods[0].old.label} snapshot" if method == "initial"
                else ", ".join(p.label for p in periods))
        print(f"{method.upper()}: training on {what}, then scoring it on every month's probes",
              flush=True)
        summary = run_lifelong(LifelongOptions(
            gin_files=[f"{method}.gin", settings.model_gin, "runs/demo.gin"],
            months=list(settings.months), out_dir=runs, data_dir=str(data_dir),
            gin_bindings=[*bindings, *_budget(settings, method)],
            eval_matrix=settings.eval_matrix, metrics=list(settings.metrics),
            max_probes=settings.max_probes, propn_instances=settings.propn_instances,
            propn_length=settings.propn_length,
        ))
        seconds[method] = round(time.perf_counter() - started, 1)
        trained = summary.trained_text() or "nothing (reused)"
        print(f"{method.upper()}: done in {seconds[method]:.0f} s (trained {trained}; "
              f"{summary.appended} results)", flush=True)
    written = build_report([str(runs)], out_dir / "report")
    results = read_results([str(runs)])
    table = probe_table(ResultIndex(results, read_runs([str(runs)], results)), "ppl")
    return {
        "runs": str(runs),
        "report": str(written["report"][0]),
        "figures": [str(p) for p in written["figures"]],
        "method_seconds": seconds,
        "table": table.markdown(),
    }
