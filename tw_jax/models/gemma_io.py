"""Hugging Face Gemma 3 checkpoints (``config.json`` + safetensors) to and from our parameter
tree: ``gemma3_text`` folders (``Gemma3ForCausalLM``), and the text decoder of multimodal
``gemma3`` folders (``Gemma3ForConditionalGeneration``, the only Hub form of the 4B, 12B and
27B models), whose vision tower and projector are skipped.

Reading is llama_io.py's, with its pieces: tensor by tensor through ``safetensors.safe_open``
(each file, or each shard that ``model.safetensors.index.json`` names, copied locally first
when it is in a bucket), each tensor's header checked against the shape Hugging Face stores
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
from safetensors import safe_open

from tw_jax.io import paths
from tw_jax.models.gemma import GemmaConfig, text_config_of
from tw_jax.models.hf_io import read_config, write_folder
from tw_jax.models.llama_io import (
    EMBEDDING,
    LM_HEAD,
    Slot,
    _checkpoint_files,
    _get,
    _listed,
    _put,
    _read,
)
from tw_jax.models.variants import export_params

# A multimodal checkpoint's text decoder under its two prefixes, and the parts that are skipped.
_TEXT_PREFIXES = {"language_model.model.": "model.", "model.language_model.": "model.",
                  "language_model.lm_head.": "lm_head."}
_VISION_PREFIXES = ("vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                    "model.multi_modal_projector.")
_NORMS = (("input_norm", "input_layernorm"), ("post_attention_norm", "post_attention_layernorm"),
          ("pre_feedforward_norm", "pre_feedforward_layernorm"),
          ("post_feedforward_norm", "post_feedforward_layernorm"))


def tensor_slots(config: GemmaConfig) -> dict[str, Slot]:
    """Every tensor of a ``Gemma3ForCausalLM`` checkpoint of ``config``, by Hugging Face name."""
    e, f, v = config.hidden_size, config.intermediate_size, config.vocab_size
    h, k, d = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    slots = {EMBEDDING: Slot(("embed_tokens", "embedding"), (v, e), (v, e))}
    for i in range(config.num_hidden_layers):
        hf, ours = f"model.layers.{i}", f"layer_{i}"
        for name, proj, heads in (("query", "q_proj", h), ("key", "k_proj", k),
                                  ("value", "v_proj", k)):
            slots[f"{hf}.self_attn.{proj}.weight"] = Slot(
                (ours, "attn", name, "kernel"), (e, heads, d), (heads * d, e), linear=True)
        slots[f"{hf}.self_attn.o_proj.weight"] = Slot(
            (ours, "attn", "out", "kernel"), (h, d, e), (e, h * d), linear=True)
        for name, norm in (("query_norm", "q_norm"), ("key_norm", "k_norm")):
            slots[f"{hf}.self_attn.{norm}.weight"] = Slot((ours, "attn", name, "scale"), (d,), (d,))
        for name, proj, n_in, n_out in (("gate", "gate_proj", e, f), ("up", "up_proj", e, f),
                                        ("down", "down_proj", f, e)):
            slots[f"{hf}.mlp.{proj}.weight"] = Slot(
                (ours, "mlp", name, "kernel"), (n_in, n_out), (n_out, n_in), linear=True)
        for name, norm in _NORMS:
            slots[f"{hf}.{norm}.weight"] = Slot((ours, name, "scale"), (e,), (e,))
    slots["model.norm.weight"] = Slot(("final_norm", "scale"), (e,), (e,))
    if not config.tie_word_embeddings:
        slots[LM_HEAD] = Slot(("lm_head", "kernel"), (e, v), (v, e), linear=True)
    return slots


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
    folder = os.fspath(path)
    slots = tensor_slots(config)
    # A tied checkpoint may carry lm_head.weight anyway: read aside, compared at the end.
    aside = {LM_HEAD: slots[EMBEDDING].stored} if config.tie_word_embeddings else {}
    dtype = np.dtype(config.param_dtype)
    files, source = _checkpoint_files(folder)
    params: dict[str, Any] = {}
    taken: set[str] = set()
    head: tuple[str, np.ndarray] | None = None
    for file in files:
        with paths.local_copy(file) as local, safe_open(local, framework="numpy") as handle:
            stored = {n: rename(n) if rename else n for n in list(handle.keys())}
            names = {n: ours for n, ours in stored.items() if ours is not None}
            unexpected = sorted(n for n, ours in names.items()
                                if ours not in slots and ours not in aside)
            if unexpected:
                raise ValueError(f"{file}: tensors not part of a {config.model_type} of this "
                                 f"config: {_listed(unexpected)}")
            for name, ours in names.items():
                if ours in aside:
                    head = (file, _read(handle, file, name, aside[ours], dtype))
                    continue
                slot = slots[ours]
                array = _read(handle, file, name, slot.stored, dtype)
                if slot.linear:  # (out, in) -> (in, out), then our head axes
                    array = np.ascontiguousarray(array.T)
                _put(params, slot.path, array.reshape(slot.shape))
                taken.add(ours)
    missing = [name for name in slots if name not in taken]
    if missing:
        raise ValueError(f"{source}: tensor {missing[0]!r} (shape {slots[missing[0]].stored}) "
                         f"is missing" + (f", and {_listed(missing[1:])}" if missing[1:] else ""))
    if head is not None and not np.array_equal(head[1], params["embed_tokens"]["embedding"]):
        raise ValueError(f"{head[0]}: {LM_HEAD} differs from {EMBEDDING}, but the config ties "
                         "them (tie_word_embeddings)")
    return params


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
    tensors: dict[str, np.ndarray] = {}
    for name, slot in tensor_slots(config).items():
        array = np.asarray(_get(params, slot.path))
        if tuple(array.shape) != slot.shape:
            raise ValueError(f"parameter {'/'.join(slot.path)} has shape {array.shape}, "
                             f"expected {slot.shape}")
        if slot.linear:  # (in..., out...) -> (out, in)
            n_out, n_in = slot.stored
            array = array.reshape(n_in, n_out).T
        tensors[name] = np.ascontiguousarray(array.reshape(slot.stored))
    return tensors


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
    tensors = gemma_params_to_hf(export_params(params, config), config)
    write_folder(os.fspath(path), config.to_hf_config(), tensors, max_shard_bytes)
