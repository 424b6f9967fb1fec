"""The suite's XLA_FLAGS: fast CPU compiles for every process of the run (tests/conftest.py
sets them before any backend starts), and a forced host device count appended to them for the
subprocesses that emulate a mesh, so those keep the fast compiles too."""

from __future__ import annotations

import os

# XLA's CPU compiler with LLVM's optimisation off: the tests' tiny models spend most of their
# time compiling, not running (a K-Adapter T5 train step: 23 s to compile at the default level,
# 10 s at 0; its steps run 4x slower, in milliseconds). Not for TPU compiles
# (tests/train/test_aot.py drops them: its memory figures are the real compiler's).
FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0",
                      "--xla_llvm_disable_expensive_passes=true")


def with_flags(*extra: str) -> str:
    """This process's XLA_FLAGS with ``extra`` appended (those already there kept once)."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    return " ".join([*flags, *(f for f in extra if f not in flags)])


def forced_devices(count: int) -> str:
    """XLA_FLAGS for a subprocess with ``count`` host CPU devices."""
    return with_flags(f"--xla_force_host_platform_device_count={count}")
