"""Models: the contract later stages (training, evaluation, tools) rely on.

- :func:`model_for` gives the model object of a config or module (:mod:`tw_jax.models.base`:
  T5X's model protocol; the families are in :mod:`tw_jax.models.families`): everything outside
  this package asks it, never which family it holds.
- :func:`load_pretrained` reads a Hugging Face folder, local or ``gs://`` (``config.json`` +
  safetensors), and dispatches on ``model_type`` to the registered families (``gpt2``, ``t5``,
  ``bart``, ``llama``, ``qwen2``, ``qwen3``, ``mistral``, ``gemma3_text``, ``gemma3``); a folder
  with a ``tokenizer.json`` gives a model whose vocabulary is that tokenizer.
- :func:`forward_logits` runs one teacher-forced forward pass and returns numpy logits, the same
  call for decoder-only and encoder-decoder models.
- :func:`build_model` / :func:`abstract_variables` make a model from a config and its variable
  shapes without allocating; variants (LoRA, K-Adapter, Modular) and their freeze labels are in
  :mod:`tw_jax.models.variants`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.models.bart import BART, BARTConfig
from tw_jax.models.base import (
    BaseModel,
    DecoderOnlyModel,
    EncoderDecoderModel,
    families_by_type,
    model_for,
    register_family,
    registered_families,
)
from tw_jax.models.families import BARTModel, GPT2Model, T5Model
from tw_jax.models.gemma import GemmaConfig
from tw_jax.models.gpt2 import GPT2, GPT2Config
from tw_jax.models.hf_io import read_config
from tw_jax.models.llama import LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, RopeScaling
from tw_jax.models.settings import FREEZE_AUTO, ModelSettings, ModelSettingsError, apply_settings
from tw_jax.models.t5 import T5, T5Config
from tw_jax.models.variants import (
    KAdapterConfig,
    LoRAConfig,
    ModularConfig,
    ParamCount,
    fill_missing,
    param_labels,
)

__all__ = [
    "GemmaConfig",
    "hf_folder_config",
    "LlamaConfig",
    "MistralConfig",
    "Qwen2Config",
    "Qwen3Config",
    "RopeScaling",
    "BART",
    "BARTConfig",
    "BARTModel",
    "BaseModel",
    "DecoderOnlyModel",
    "EncoderDecoderModel",
    "FREEZE_AUTO",
    "GPT2",
    "GPT2Config",
    "GPT2Model",
    "KAdapterConfig",
    "LoRAConfig",
    "ModelSettings",
    "ModelSettingsError",
    "ModularConfig",
    "ParamCount",
    "T5",
    "T5Config",
    "T5Model",
    "abstract_variables",
    "apply_settings",
    "build_model",
    "count_params",
    "families_by_type",
    "forward_logits",
    "load_pretrained",
    "model_for",
    "param_labels",
    "register_family",
    "registered_families",
]

ModelConfig = GPT2Config | T5Config | BARTConfig | LlamaConfig | GemmaConfig


def build_model(config: ModelConfig) -> nn.Module:
    """The Flax module for a config."""
    return model_for(config).module


def count_params(config: ModelConfig, params: Any | None = None) -> ParamCount:
    """Trainable and total parameters of ``config``'s model under its method (LoRA, adapters,
    freezing); from shapes alone (``jax.eval_shape``, nothing allocated) when ``params`` is None.
    A tied LM head is one tensor and counts once."""
    return model_for(config).count_params(params)


def abstract_variables(config: ModelConfig, batch_size: int = 1, length: int = 8) -> Any:
    """Shapes, dtypes and logical axes of every variable, from ``jax.eval_shape`` (no allocation)."""
    return model_for(config).abstract_variables(batch_size, length)


def _with_variant_weights(model: nn.Module, params: Any, source: str) -> Any:
    """Complete a pretrained tree with freshly initialised LoRA / adapter / Modular weights."""

    config = model.config
    if all(getattr(config, name, None) is None for name in ("lora", "kadapter", "modular")):
        return jax.tree.map(jnp.asarray, params)
    fresh = jax.jit(model.init)(jax.random.key(0), *model_for(config).dummy_inputs())["params"]
    merged, missing = fill_missing(fresh, params)
    logging.info("%s: %d tensors initialised fresh (not in the checkpoint): %s", source,
                 len(missing), ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else ""))
    return jax.tree.map(jnp.asarray, merged)


def load_pretrained(path: str | os.PathLike[str], **overrides: Any) -> tuple[nn.Module, Any]:
    """``(model, params)`` from a Hugging Face checkpoint folder, local or in a bucket
    (``gs://``; never through pathlib, which would mangle the URL); nothing is downloaded.

    ``overrides`` set config fields, e.g. ``dtype="bfloat16"``, ``remat=True`` or a variant
    (``lora=LoRAConfig()``), whose new weights are then initialised fresh (seed 0) and logged.
    """

    folder = os.fspath(path)
    model_type = read_config(folder).get("model_type")
    known = families_by_type()
    if model_type not in known:
        raise ValueError(
            f"{os.path.join(folder, 'config.json')}: model_type {model_type!r} is not supported "
            f"(supported: {', '.join(sorted(known))})"
        )
    config, params = known[model_type].load_hf(folder, **overrides)
    module = model_for(config).module
    return module, _with_variant_weights(module, params, folder)


def hf_folder_config(path: str | os.PathLike[str], **overrides: Any) -> Any:
    """The model config of a Hugging Face folder (its ``config.json``; with a
    ``tokenizer.json``, a model of that tokenizer), reading no weights: what
    :func:`load_pretrained` would build."""
    folder = os.fspath(path)
    hf = read_config(folder)
    known = families_by_type()
    model_type = hf.get("model_type")
    if model_type not in known:
        raise ValueError(
            f"{os.path.join(folder, 'config.json')}: model_type {model_type!r} is not supported "
            f"(supported: {', '.join(sorted(known))})"
        )
    return known[model_type].hf_folder_config(folder, hf, **overrides)


def forward_logits(
    model: nn.Module,
    params: Any,
    input_ids: Any,
    decoder_input_ids: Any | None = None,
) -> np.ndarray:
    """Float32 logits of one teacher-forced pass, as numpy: ``(batch, length, vocab)``.

    Decoder-only models take ``input_ids`` alone; ``decoder_input_ids`` is for encoder-decoder
    models (required by T5 and BART) and is refused for GPT-2 rather than silently ignored.
    """
    input_ids = jnp.asarray(input_ids, jnp.int32)
    encoder_decoder = isinstance(model_for(model), EncoderDecoderModel)
    name = type(model).__name__
    if decoder_input_ids is None and encoder_decoder:
        raise ValueError(f"{name} is an encoder-decoder: pass decoder_input_ids too")
    if decoder_input_ids is None:
        logits = _jit_apply(model, params, input_ids)
    elif not encoder_decoder:
        raise ValueError(f"{name} is decoder-only: pass input_ids alone, not decoder_input_ids")
    else:
        logits = _jit_apply(model, params, input_ids, jnp.asarray(decoder_input_ids, jnp.int32))
    return np.asarray(logits)


def _apply(model: nn.Module, params: Any, *inputs: jax.Array) -> jax.Array:
    return model.apply({"params": params}, *inputs)


_jit_apply = jax.jit(_apply, static_argnums=0)
