"""tw_jax: TemporalWiki and its sibling benchmarks (CKL, ECBD, EvolvingQA) in JAX/Flax."""

from tw_jax.io.gcs import configure_environment as _configure_gcs

__version__ = "0.1.0"

# Before etils, orbax or TensorStore read their settings: with STORAGE_EMULATOR_HOST set, every
# GCS client must talk to that emulator (tw_jax.io.gcs says which client reads what).
_configure_gcs()
