"""Dump readers and corpus builders (installed as ``tw_jax.preprocess``).

Every reader streams; every record is emitted or skipped with a reason that the stage counts.
"""
