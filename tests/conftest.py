"""Shared fixtures: the sample world is built once per test session (it takes a few seconds)."""

import os
from pathlib import Path

import pytest


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
