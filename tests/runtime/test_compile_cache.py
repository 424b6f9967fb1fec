"""Which persistent XLA cache a lifelong run uses: the one asked for, else the one JAX is set to,
else a folder of the run; ``none`` turns it off."""

from __future__ import annotations

import os
import tempfile

import jax
import pytest

from tw_jax.runtime import compile_cache


@pytest.fixture
def unset(monkeypatch):
    """No cache configured (the test session's is put back afterwards)."""
    before = jax.config.jax_compilation_cache_dir
    monkeypatch.delenv(compile_cache.CACHE_ENV, raising=False)
    jax.config.update("jax_compilation_cache_dir", None)
    yield
    jax.config.update("jax_compilation_cache_dir", before)


def test_a_run_without_a_cache_gets_one_in_its_folder(unset, tmp_path):
    assert compile_cache.configured() is None
    assert compile_cache.choose(None, str(tmp_path / "out")) == str(tmp_path / "out" / "xla_cache")
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "out" / "xla_cache")


def test_a_run_in_a_bucket_caches_locally(unset):
    assert compile_cache.choose(None, "gs://b/runs") == os.path.join(
        tempfile.gettempdir(), "tw_jax_xla_cache")


def test_the_folder_asked_for_and_the_one_jax_has_win(unset, tmp_path, monkeypatch):
    assert compile_cache.choose(str(tmp_path / "mine"), "out") == str(tmp_path / "mine")
    monkeypatch.setenv(compile_cache.CACHE_ENV, str(tmp_path / "env"))
    jax.config.update("jax_compilation_cache_dir", None)
    assert compile_cache.choose(None, "out") == str(tmp_path / "env")


def test_none_turns_it_off(unset):
    assert compile_cache.choose("none", "out") is None
    assert jax.config.jax_compilation_cache_dir is None
