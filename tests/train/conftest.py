"""Fixtures of the trainer tests: one data folder (the task tests' builder: demo pairs, initial
snapshot, SSM TFRecords, tiny vocabularies) per session, registered before each test, and a
persistent XLA compilation cache shared by the in-process runs and the subprocesses, so a graph
that several tests (or a run and its resumption) use compiles once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))


@pytest.fixture(scope="session")
def train_data(tmp_path_factory) -> dict:
    from twiki_data import build_task_data

    return build_task_data(tmp_path_factory.mktemp("train_data"))


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory) -> Path:
    import jax

    folder = tmp_path_factory.mktemp("xla_cache")
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


@pytest.fixture()
def data_bindings(train_data, compile_cache) -> list[str]:
    """gin bindings that point the tasks at the session's data folder and vocabularies."""
    import tw_jax.tasks

    tw_jax.tasks.register_all(
        train_data["data_dir"], t5_vocab=str(train_data["t5"]), gpt2_vocab=str(train_data["gpt2"])
    )
    return [
        f"DATA_DIR='{train_data['data_dir']}'",
        f"tw_jax.tasks.register_all.t5_vocab='{train_data['t5']}'",
        f"tw_jax.tasks.register_all.gpt2_vocab='{train_data['gpt2']}'",
        "tw_jax.train.train.progress=False",
    ]

