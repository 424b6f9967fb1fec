"""With libtpu installed on a machine without TPU chips, ordinary runs keep to the CPU: jax never
starts the TPU backend (libtpu would print errors about TPU workers on every run), and what the
user set stays."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tw_jax import platforms

needs_libtpu = pytest.mark.skipif(
    not platforms.module_installed("libtpu"), reason="libtpu (tpu/test extras) not installed"
)
no_tpu_here = pytest.mark.skipif(platforms.has_tpu_chips(), reason="this machine has TPU chips")


@needs_libtpu
@no_tpu_here
def test_only_the_cpu_where_no_accelerator_can_run(monkeypatch):
    monkeypatch.setattr(platforms, "_gpu_plugin_installed", lambda: False)
    environ: dict[str, str] = {}
    assert platforms.configure_platforms(environ) is True
    assert environ == {"JAX_PLATFORMS": "cpu"}


@pytest.mark.parametrize("setting", ["tpu", "cpu,tpu", "cuda"])
def test_the_users_setting_stays(setting):
    environ = {"JAX_PLATFORMS": setting}
    assert platforms.configure_platforms(environ) is False
    assert environ == {"JAX_PLATFORMS": setting}


@needs_libtpu
def test_a_gpu_plugin_or_tpu_chips_leave_jax_to_choose(monkeypatch):
    monkeypatch.setattr(platforms, "_gpu_plugin_installed", lambda: True)
    environ: dict[str, str] = {}
    assert platforms.configure_platforms(environ) is False and environ == {}
    monkeypatch.setattr(platforms, "_gpu_plugin_installed", lambda: False)
    monkeypatch.setattr(platforms, "has_tpu_chips", lambda: True)
    assert platforms.configure_platforms(environ) is False and environ == {}


@needs_libtpu
@no_tpu_here
def test_an_ordinary_run_prints_nothing_from_libtpu():
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "TPU_LIBRARY_PATH")}
    result = subprocess.run(
        [sys.executable, "-c",
         "import tw_jax, jax; print(jax.devices()[0].platform, jax.default_backend())"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["cpu", "cpu"]
    assert "TPU" not in result.stderr, result.stderr
