"""Helpers of the trainer tests: subprocess environments and reading runs back."""

from __future__ import annotations

import json
import os
from pathlib import Path

from xla_flags import forced_devices


def subprocess_env(train_data: dict, compile_cache: Path, devices: int | None = None) -> dict:
    """Environment of a ``tw-jax`` subprocess: data folder, vocabularies, the shared cache."""
    env = dict(os.environ)
    env.update(
        TW_JAX_DATA_DIR=str(train_data["data_dir"]),
        TW_JAX_T5_VOCAB=str(train_data["t5"]),
        TW_JAX_GPT2_VOCAB=str(train_data["gpt2"]),
        JAX_COMPILATION_CACHE_DIR=str(compile_cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PLATFORMS="cpu",
        TF_CPP_MIN_LOG_LEVEL="2",
    )
    if devices:
        env["XLA_FLAGS"] = forced_devices(devices)
    return env


def read_metrics(model_dir: Path) -> list[dict]:
    with open(model_dir / "metrics.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
