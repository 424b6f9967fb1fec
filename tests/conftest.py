"""Shared fixtures: the sample world is built once per test session (it takes a few seconds);
the trainer and evaluation tests' data folder (the task tests' builder: demo pairs, initial
snapshot, SSM TFRecords, tiny vocabularies) once per session, registered before each test, with
a persistent XLA compilation cache shared by the in-process runs and the subprocesses, so a
graph that several tests (or a run and its resumption) use compiles once."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "tasks"))

CACHE_BYTES = 16 * 2**30  # far above what a run writes: nothing is ever evicted


@pytest.fixture(scope="session")
def sample_world(tmp_path_factory) -> tuple[Path, dict]:
    from tw_jax.sample_world.build import build_sample_world

    root = tmp_path_factory.mktemp("sample_world")
    world = build_sample_world(root, seed=0)
    return root, world


def pytest_configure(config):
    """GCS clients of the whole session: gcsfs behind epath (TensorFlow's GCS file system cannot
    be pointed at a local server, and epath picks its backend once per process), and credential
    look-ups at a closed local port. Local paths are unaffected."""
    from gcs_emulator import SESSION_ENV

    for key, value in SESSION_ENV.items():
        os.environ.setdefault(key, value)


@pytest.fixture(scope="session")
def gcs_server():
    """A local GCS server (fake-gcs-server on 127.0.0.1) for the whole session."""
    from gcs_emulator import GcsEmulator

    server = GcsEmulator()
    yield server
    server.close()


@pytest.fixture
def gcs_bucket(gcs_server, monkeypatch, request) -> str:
    """``gs://<a new bucket>`` with every GCS client of this process (and of the subprocesses
    it starts) pointed at the local server, and credential look-ups at a closed local port."""
    import re

    for key, value in gcs_server.env.items():
        monkeypatch.setenv(key, value)
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    return gcs_server.bucket(f"t-{name}-{os.getpid()}")


@pytest.fixture(scope="session")
def train_data(tmp_path_factory) -> dict:
    from twiki_data import build_task_data

    return build_task_data(tmp_path_factory.mktemp("train_data"))


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory) -> Path:
    """One persistent XLA cache for the whole run: under xdist every worker (and every
    subprocess it starts) shares the run's folder beside the workers' own, so a graph one worker
    compiled is a cache hit on the other. A size limit turns on JAX's file lock around each
    entry (without it a process can read an entry another is still writing); the limit is set
    in the environment too, for the subprocesses, which copy it."""
    import jax

    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.getbasetemp().parent / "xla_cache"
        folder.mkdir(exist_ok=True)
    else:
        folder = tmp_path_factory.mktemp("xla_cache")
    os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(CACHE_BYTES)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_compilation_cache_max_size", CACHE_BYTES)
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

