"""Models: the contract later stages (training, evaluation, tools) rely on.

- :func:`load_pretrained` reads a local Hugging Face folder (``config.json`` + safetensors) and
  dispatches on ``model_type``: ``gpt2`` and ``t5``.
- :func:`forward_logits` runs one teacher-forced forward pass and returns numpy logits, the same
  call for decoder-only and encoder-decoder models.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.models.gpt2 import GPT2, GPT2Config
from tw_jax.models.t5 import T5, T5Config

__all__ = ["GPT2", "GPT2Config", "T5", "T5Config", "forward_logits", "load_pretrained"]


def _load_gpt2(path: Path, overrides: dict[str, Any]) -> tuple[nn.Module, Any]:
    from tw_jax.models.hf_io import load_gpt2

    config, params = load_gpt2(path, **overrides)
    return GPT2(config), jax.tree.map(jnp.asarray, params)


def _load_t5(path: Path, overrides: dict[str, Any]) -> tuple[nn.Module, Any]:
    from tw_jax.models.t5_io import load_t5

    config, params = load_t5(path, **overrides)
    return T5(config), jax.tree.map(jnp.asarray, params)


# model_type (from config.json) -> loader.
LOADERS: dict[str, Callable[[Path, dict[str, Any]], tuple[nn.Module, Any]]] = {
    "gpt2": _load_gpt2,
    "t5": _load_t5,
}


def load_pretrained(path: str | os.PathLike[str], **overrides: Any) -> tuple[nn.Module, Any]:
    """``(model, params)`` from a local Hugging Face checkpoint folder; nothing is downloaded.

    ``overrides`` set config fields, e.g. ``dtype="bfloat16"`` or ``remat=True``.
    """
    from tw_jax.models.hf_io import read_config

    folder = Path(path)
    model_type = read_config(folder).get("model_type")
    if model_type not in LOADERS:
        raise ValueError(
            f"{folder / 'config.json'}: model_type {model_type!r} is not supported "
            f"(supported: {', '.join(sorted(LOADERS))})"
        )
    return LOADERS[model_type](folder, overrides)


def forward_logits(
    model: nn.Module,
    params: Any,
    input_ids: Any,
    decoder_input_ids: Any | None = None,
) -> np.ndarray:
    """Float32 logits of one teacher-forced pass, as numpy: ``(batch, length, vocab)``.

    Decoder-only models take ``input_ids`` alone; ``decoder_input_ids`` is for encoder-decoder
    models (required by T5) and is refused for GPT-2 rather than silently ignored.
    """
    input_ids = jnp.asarray(input_ids, jnp.int32)
    if decoder_input_ids is None and isinstance(model, T5):
        raise ValueError("T5 is an encoder-decoder: pass decoder_input_ids too")
    if decoder_input_ids is None:
        logits = _jit_apply(model, params, input_ids)
    elif isinstance(model, GPT2):
        raise ValueError("GPT-2 is decoder-only: pass input_ids alone, not decoder_input_ids")
    else:
        logits = _jit_apply(model, params, input_ids, jnp.asarray(decoder_input_ids, jnp.int32))
    return np.asarray(logits)


def _apply(model: nn.Module, params: Any, *inputs: jax.Array) -> jax.Array:
    return model.apply({"params": params}, *inputs)


_jit_apply = jax.jit(_apply, static_argnums=0)
