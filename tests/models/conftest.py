"""Tiny GPT-2s shared by the model tests: 2 layers, 4 heads, 32 dims, vocabulary 100."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest

from tw_jax.models.gpt2 import GPT2, GPT2Config

# A wide initialiser keeps the logits of a random model well apart, so argmax never hinges on
# float rounding differences between implementations.
TINY = dict(vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=4, initializer_range=0.2,
            dropout_rate=0.0, bos_token_id=99, eos_token_id=99)


@pytest.fixture(scope="session")
def tiny_config() -> GPT2Config:
    return GPT2Config(**TINY)


@pytest.fixture(scope="session")
def tiny_model(tiny_config: GPT2Config) -> tuple[GPT2, dict]:
    """A randomly initialised tiny GPT-2 and its unboxed parameters."""
    model = GPT2(tiny_config)
    variables = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, 8), jnp.int32))
    return model, nn.unbox(variables["params"])
