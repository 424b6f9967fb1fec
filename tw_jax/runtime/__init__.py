"""What training and evaluation both stand on: a run's gin configuration, its model on a mesh,
its checkpoints and their integrity, the task data as batches, the scoring step, the start of a
multi-host job. Neither ``tw_jax.train`` nor ``tw_jax.evaluate`` imports the other; both import
this (as T5X keeps ``checkpoints.py`` and ``partitioning.py`` beside its trainer, not inside)."""
