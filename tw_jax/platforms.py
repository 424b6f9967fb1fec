"""Which jax backends an ordinary run may try: no TPU probe where no TPU can be.

With ``libtpu`` installed (the ``tpu`` and ``test`` extras: ``tw-jax compile`` needs it off a TPU
VM), jax tries to start a TPU backend in every process, even on a laptop with no TPU. That try
fails quietly for jax but not for libtpu, which prints errors about TPU worker hostnames and
accelerator types on stderr. So, before jax reads its settings, :func:`configure_platforms` sets
``JAX_PLATFORMS=cpu`` when nothing but the CPU can run here: libtpu installed, no TPU chip on the
PCI bus (the check jax itself makes), and no GPU plugin installed. A TPU VM, a GPU machine and a
user's own ``JAX_PLATFORMS`` are left alone. Ahead-of-time compilation for TPU topologies does
not need a TPU backend (:mod:`tw_jax.train.aot`), so it works with this setting.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import sys
from collections.abc import MutableMapping

_GOOGLE_PCI_VENDOR_ID = "0x1ae0"


def has_tpu_chips() -> bool:
    """True when a Google TPU chip is attached through PCI (as jax's hardware_utils checks)."""
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            with open(vendor, encoding="ascii") as handle:
                if handle.read().strip() == _GOOGLE_PCI_VENDOR_ID:
                    return True
        except OSError:
            continue
    return False


def module_installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _gpu_plugin_installed() -> bool:
    """A PJRT plugin package (``jax_plugins.*``: CUDA, ROCm) is installed."""
    if not module_installed("jax_plugins"):
        return False
    import jax_plugins  # a namespace package: importing it loads no plugin

    return any(
        os.path.isdir(os.path.join(folder, name))
        for folder in getattr(jax_plugins, "__path__", [])
        for name in os.listdir(folder)
        if not name.startswith(("_", "."))
    )


def configure_platforms(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Sets ``JAX_PLATFORMS=cpu`` where only the CPU can run (see the module); True if it did."""
    if environ.get("JAX_PLATFORMS", "").strip():
        return False
    if not module_installed("libtpu") or has_tpu_chips() or _gpu_plugin_installed():
        return False
    environ["JAX_PLATFORMS"] = "cpu"
    jax = sys.modules.get("jax")
    if jax is not None and environ is os.environ:
        # jax read the variable when it was imported; its backends start on first use.
        with contextlib.suppress(AttributeError, RuntimeError):
            jax.config.update("jax_platforms", "cpu")
    return True
