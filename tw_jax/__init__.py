"""tw_jax: TemporalWiki and its sibling benchmarks (CKL, ECBD, EvolvingQA) in JAX/Flax."""

from tw_jax.io.gcs import configure_environment as _configure_gcs
from tw_jax.platforms import configure_platforms as _configure_platforms

__version__ = "0.1.0"

# Before etils, orbax or TensorStore read their settings: with STORAGE_EMULATOR_HOST set, every
# GCS client must talk to that emulator (tw_jax.io.gcs says which client reads what).
_configure_gcs()
# Before jax starts a backend: no TPU probe (and libtpu's stderr noise) where no TPU can be.
_configure_platforms()
