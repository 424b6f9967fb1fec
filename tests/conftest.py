"""Shared fixtures: the sample world is built once per test session (it takes a few seconds)."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def sample_world(tmp_path_factory) -> tuple[Path, dict]:
    from tw_jax.sample_world.build import build_sample_world

    root = tmp_path_factory.mktemp("sample_world")
    world = build_sample_world(root, seed=0)
    return root, world
