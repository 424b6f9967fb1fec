"""tw_jax: TemporalWiki and its sibling benchmarks (CKL, ECBD, EvolvingQA) in JAX/Flax."""

__version__ = "0.1.0"
