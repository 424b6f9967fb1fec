"""Hugging Face Gemma 3 checkpoints (``config.json`` + safetensors) to and from our parameter
tree: ``gemma3_text`` folders (``Gemma3ForCausalLM``), and the text decoder of multimodal
``gemma3`` folders (``Gemma3ForConditionalGeneration``, the only Hub form of the 4B, 12B and
27B models), whose vision tower and projector are skipped.

Reading and writing are ``decoder_io.py``'s, as for llama_io.py: tensor by tensor through
``safetensors.safe_open`` (each file, or each shard that ``model.safetensors.index.json``
names, copied locally first when it is in a bucket), each tensor's header checked against the shape Hugging Face stores
before its data is read, cast to the parameter dtype (bf16/fp16 storage becomes float32, or stays
bf16 for ``param_dtype="bfloat16"``), laid out as ours and put in the tree before the next one is
read. Every tensor the config expects must be there, else one line names the file, the tensor
and both shapes; a tensor the config has no place for is an error naming it. A tied checkpoint
(every Gemma 3) has no ``lm_head.weight``; one that has it anyway must equal the embedding.

A multimodal folder names the text decoder's tensors ``language_model.model.*`` (as
transformers 4 wrote them and transformers 5 still saves them) or ``model.language_model.*``
(transformers 5's module names); both read as ``model.*``.

Export writes a ``gemma3_text`` folder that ``transformers.AutoModelForCausalLM`` loads, LoRA
folded into the kernels, ``config.json`` last (``hf_io.write_folder``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from tw_jax.models.decoder_io import (
    Slot,
    decoder_slots,
    params_to_hf,
    read_params,
    write_checkpoint,
)
from tw_jax.models.gemma import GemmaConfig, text_config_of
from tw_jax.models.hf_io import read_config

# A multimodal checkpoint's text decoder under its two prefixes, and the parts that are skipped.
_TEXT_PREFIXES = {"language_model.model.": "model.", "model.language_model.": "model.",
                  "language_model.lm_head.": "lm_head."}
_VISION_PREFIXES = ("vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                    "model.multi_modal_projector.")
# Each layer's norms, before and after attention and the MLP: ours and Hugging Face's names.
_NORMS = (("input_norm", "input_layernorm"), ("post_attention_norm", "post_attention_layernorm"),
          ("pre_feedforward_norm", "pre_feedforward_layernorm"),
          ("post_feedforward_norm", "post_feedforward_layernorm"))


def tensor_slots(config: GemmaConfig) -> dict[str, Slot]:
    """Every tensor of a ``Gemma3ForCausalLM`` checkpoint of ``config``, by Hugging Face name:
    no biases, q/k norms in every layer."""
    return decoder_slots(config, _NORMS, qk_norm=True)


def text_tensor_name(name: str) -> str | None:
    """A multimodal checkpoint's tensor under its ``Gemma3ForCausalLM`` name; None for the
    vision tower and projector. Another name is returned as it is (and refused if unknown)."""
    if name.startswith(_VISION_PREFIXES):
        return None
    for prefix, replacement in _TEXT_PREFIXES.items():
        if name.startswith(prefix):
            return replacement + name[len(prefix):]
    return name


def read_gemma_params(
    path: str | os.PathLike[str], config: GemmaConfig,
    rename: Callable[[str], str | None] | None = None,
) -> dict[str, Any]:
    """Our numpy ``params`` tree from a folder's safetensors, tensor by tensor (see the module
    docstring for what is checked); ``rename`` maps a stored name to its ``Gemma3ForCausalLM``
    name, or None to skip it (:func:`text_tensor_name` for a multimodal folder)."""
    return read_params(path, config, tensor_slots(config), rename=rename)


def load_gemma(
    path: str | os.PathLike[str], **overrides: Any
) -> tuple[GemmaConfig, dict[str, Any]]:
    """Config and numpy ``params`` of a Hugging Face ``gemma3_text`` folder, or of the text
    decoder of a multimodal ``gemma3`` one, local or ``gs://``; ``overrides`` set config fields
    (``param_dtype="bfloat16"``, LoRA ...)."""
    folder = os.fspath(path)
    hf = read_config(folder)
    if hf.get("model_type") == "gemma3":
        config = GemmaConfig.from_hf_config(text_config_of(hf), **overrides)
        return config, read_gemma_params(folder, config, rename=text_tensor_name)
    config = GemmaConfig.from_hf_config(hf, **overrides)
    return config, read_gemma_params(folder, config)


def gemma_params_to_hf(params: dict[str, Any], config: GemmaConfig) -> dict[str, np.ndarray]:
    """Hugging Face tensors (``Gemma3ForCausalLM`` names, ``(out, in)`` Linear weights) from our
    tree, in the parameter dtype."""
    return params_to_hf(params, tensor_slots(config))


def save_gemma(
    path: str | os.PathLike[str],
    config: GemmaConfig,
    params: dict[str, Any],
    max_shard_bytes: int | None = None,
) -> None:
    """Write ``config.json`` and ``model.safetensors`` (or, with ``max_shard_bytes``, shards and
    their index) of a ``gemma3_text`` model that ``transformers.AutoModelForCausalLM`` loads
    (also for a model read from a multimodal folder: its text decoder alone); LoRA is folded into
    the kernels. A tied model writes no ``lm_head.weight``, as ``save_pretrained`` does."""
    write_checkpoint(path, config, params, tensor_slots, max_shard_bytes)
