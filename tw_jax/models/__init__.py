"""Models: the contract later stages (training, evaluation, tools) rely on.

- :func:`load_pretrained` reads a Hugging Face folder, local or ``gs://`` (``config.json`` +
  safetensors), and dispatches on ``model_type``: ``gpt2`` and ``t5``.
- :func:`forward_logits` runs one teacher-forced forward pass and returns numpy logits, the same
  call for decoder-only and encoder-decoder models.
- :func:`build_model` / :func:`abstract_variables` make a model from a config and its variable
  shapes without allocating; variants (LoRA, K-Adapter, Modular) and their freeze labels are in
  :mod:`tw_jax.models.variants`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.models.gpt2 import GPT2, GPT2Config
from tw_jax.models.t5 import T5, T5Config
from tw_jax.models.variants import (
    KAdapterConfig,
    LoRAConfig,
    ModularConfig,
    ParamCount,
    count_params,
    param_labels,
)

__all__ = [
    "GPT2",
    "GPT2Config",
    "KAdapterConfig",
    "LoRAConfig",
    "ModularConfig",
    "ParamCount",
    "T5",
    "T5Config",
    "abstract_variables",
    "build_model",
    "count_params",
    "forward_logits",
    "load_pretrained",
    "param_labels",
]

ModelConfig = GPT2Config | T5Config


def build_model(config: ModelConfig) -> nn.Module:
    """The Flax module for a config."""
    if isinstance(config, T5Config):
        return T5(config)
    if isinstance(config, GPT2Config):
        return GPT2(config)
    raise TypeError(f"not a model config: {type(config).__name__}")


def abstract_variables(config: ModelConfig, batch_size: int = 1, length: int = 8) -> Any:
    """Shapes, dtypes and logical axes of every variable, from ``jax.eval_shape`` (no allocation)."""
    from tw_jax.models import gpt2, t5

    module = t5 if isinstance(config, T5Config) else gpt2
    return module.abstract_variables(config, batch_size, length)


def _with_variant_weights(model: nn.Module, params: Any, source: str) -> Any:
    """Complete a pretrained tree with freshly initialised LoRA / adapter / Modular weights."""
    from tw_jax.models.variants import fill_missing

    config = model.config
    if all(getattr(config, name, None) is None for name in ("lora", "kadapter", "modular")):
        return jax.tree.map(jnp.asarray, params)
    dummy = jnp.zeros((1, 8), jnp.int32)
    inputs = (dummy, dummy) if isinstance(model, T5) else (dummy,)
    fresh = jax.jit(model.init)(jax.random.key(0), *inputs)["params"]
    merged, missing = fill_missing(fresh, params)
    logging.info("%s: %d tensors initialised fresh (not in the checkpoint): %s", source,
                 len(missing), ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else ""))
    return jax.tree.map(jnp.asarray, merged)


def _load_gpt2(path: str, overrides: dict[str, Any]) -> tuple[nn.Module, Any]:
    from tw_jax.models.hf_io import load_gpt2

    config, params = load_gpt2(path, **overrides)
    model = GPT2(config)
    return model, _with_variant_weights(model, params, path)


def _load_t5(path: str, overrides: dict[str, Any]) -> tuple[nn.Module, Any]:
    from tw_jax.models.t5_io import load_t5

    config, params = load_t5(path, **overrides)
    model = T5(config)
    return model, _with_variant_weights(model, params, path)


# model_type (from config.json) -> loader.
LOADERS: dict[str, Callable[[str, dict[str, Any]], tuple[nn.Module, Any]]] = {
    "gpt2": _load_gpt2,
    "t5": _load_t5,
}


def load_pretrained(path: str | os.PathLike[str], **overrides: Any) -> tuple[nn.Module, Any]:
    """``(model, params)`` from a Hugging Face checkpoint folder, local or in a bucket
    (``gs://``; never through pathlib, which would mangle the URL); nothing is downloaded.

    ``overrides`` set config fields, e.g. ``dtype="bfloat16"``, ``remat=True`` or a variant
    (``lora=LoRAConfig()``), whose new weights are then initialised fresh (seed 0) and logged.
    """
    from tw_jax.models.hf_io import read_config

    folder = os.fspath(path)
    model_type = read_config(folder).get("model_type")
    if model_type not in LOADERS:
        raise ValueError(
            f"{os.path.join(folder, 'config.json')}: model_type {model_type!r} is not supported "
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
