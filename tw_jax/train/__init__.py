"""The T5X-style trainer: optimisers, freezing, RecAdam, the training loop, checkpoints."""
