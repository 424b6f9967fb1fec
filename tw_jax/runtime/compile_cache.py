"""JAX's persistent compilation cache for runs that compile the same programs again and again.

A lifelong run trains one update per month, each with a train step of its own ``jax.jit``, and
scores every checkpoint with the same scoring steps: the programs are the same (the learning
rate is an argument of the step, :mod:`tw_jax.train.steps`), but a new ``jax.jit`` traces and
compiles anew. With a persistent cache the later compilations are loads of the first one's
executable: XLA's own cache, keyed by the program, the compile options, the jax version and the
device, so a hit is the executable a fresh compilation would give.
"""

from __future__ import annotations

import os
import tempfile

from tw_jax.io import paths

CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"
FOLDER = "xla_cache"
OFF = "none"


def configured() -> str | None:
    """The cache folder JAX is set to use already (its config or ``$JAX_COMPILATION_CACHE_DIR``)."""
    import jax

    return jax.config.jax_compilation_cache_dir or os.environ.get(CACHE_ENV) or None


def default_folder(out_dir: str) -> str:
    """``OUT/xla_cache`` for a local run folder; a local folder for one in a bucket (an
    executable is read at every compilation: not a round trip to a bucket)."""
    if paths.is_url(out_dir):
        return os.path.join(tempfile.gettempdir(), f"tw_jax_{FOLDER}")
    return os.path.join(out_dir, FOLDER)


def use_persistent_cache(folder: str, *, every_program: bool = False) -> None:
    """Caches compilations in ``folder``; ``every_program``: even those that compile in under
    a second (JAX's default keeps only the slower ones)."""
    import jax

    jax.config.update("jax_compilation_cache_dir", folder)
    if every_program:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def choose(requested: str | None, out_dir: str) -> str | None:
    """The folder a run caches in: ``requested`` (``none``: no cache), else the one JAX is set
    to already, else :func:`default_folder`. Sets it; returns it (None: off)."""
    if requested == OFF:
        return None
    folder = requested or configured() or default_folder(out_dir)
    if folder != configured():
        use_persistent_cache(folder)
    return folder
