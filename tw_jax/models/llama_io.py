"""Hugging Face Llama, Qwen2, Qwen3 and Mistral checkpoints (``config.json`` + safetensors) to
and from our parameter tree.

As in ``hf_io.py``, nothing is unpickled and no PyTorch is needed. These checkpoints run to many
gigabytes, so reading is tensor by tensor: each file (``model.safetensors``, or the shards that
``model.safetensors.index.json`` names) is opened with ``safetensors.safe_open``, which reads the
header alone, and each tensor is taken from it, checked, cast to the parameter dtype
(bf16/fp16 storage becomes float32, or stays bf16 for ``param_dtype="bfloat16"``), laid out as
ours and put in the tree before the next one is read: no second copy of the checkpoint is ever
held. A shard in a bucket (``gs://``) is first copied to a local temporary file
(:func:`tw_jax.io.paths.local_copy`), one shard at a time.

Every tensor the config expects must be there in Hugging Face's shape, else one line names the
file, the tensor and both shapes; a tensor the config has no place for is an error naming it
(the ``rotary_emb.inv_freq`` buffers older checkpoints carry are recomputed, so skipped). A tied
checkpoint has no ``lm_head.weight``; one that has it anyway must equal the embedding.

``torch.nn.Linear`` stores ``(out, in)``; our kernels are ``(in, ...)`` with separate head axes
(``query`` ``(embed, heads, head_dim)``, ``out`` ``(heads, head_dim, embed)``), so import
transposes and reshapes and export does the reverse, exactly. Export folds LoRA into the kernels
and writes ``config.json`` last (``hf_io.write_folder``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import ml_dtypes  # noqa: F401  (registers numpy's "bfloat16", which safe_open returns bf16 as)
import numpy as np
from safetensors import safe_open

from tw_jax.io import paths
from tw_jax.models.hf_io import INDEX_FILE, SINGLE_FILE, read_config, write_folder
from tw_jax.models.llama import LlamaConfig, config_from_hf
from tw_jax.models.variants import export_params

# Buffers of older checkpoints (``model.layers.N.self_attn.rotary_emb.inv_freq``): recomputed.
_BUFFER_SUFFIX = "rotary_emb.inv_freq"
_FLOAT_DTYPES = frozenset({"BF16", "F16", "F32", "F64"})
LM_HEAD, EMBEDDING = "lm_head.weight", "model.embed_tokens.weight"


@dataclasses.dataclass(frozen=True)
class Slot:
    """Where a Hugging Face tensor goes in our tree: its path, our shape, the shape Hugging Face
    stores, and whether it is a ``torch.nn.Linear`` weight (stored ``(out, in)``, transposed)."""

    path: tuple[str, ...]
    shape: tuple[int, ...]
    stored: tuple[int, ...]
    linear: bool = False


def tensor_slots(config: LlamaConfig) -> dict[str, Slot]:
    """Every tensor of a ``*ForCausalLM`` checkpoint of ``config``, by Hugging Face name."""
    e, f, v = config.hidden_size, config.intermediate_size, config.vocab_size
    h, k, d = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    slots = {EMBEDDING: Slot(("embed_tokens", "embedding"), (v, e), (v, e))}
    for i in range(config.num_hidden_layers):
        hf, ours = f"model.layers.{i}", f"layer_{i}"
        for name, proj, heads in (("query", "q_proj", h), ("key", "k_proj", k),
                                  ("value", "v_proj", k)):
            slots[f"{hf}.self_attn.{proj}.weight"] = Slot(
                (ours, "attn", name, "kernel"), (e, heads, d), (heads * d, e), linear=True)
            if config.attention_bias:
                slots[f"{hf}.self_attn.{proj}.bias"] = Slot(
                    (ours, "attn", name, "bias"), (heads, d), (heads * d,))
        slots[f"{hf}.self_attn.o_proj.weight"] = Slot(
            (ours, "attn", "out", "kernel"), (h, d, e), (e, h * d), linear=True)
        if config.out_bias:
            slots[f"{hf}.self_attn.o_proj.bias"] = Slot((ours, "attn", "out", "bias"), (e,), (e,))
        if config.qk_norm:
            for name, norm in (("query_norm", "q_norm"), ("key_norm", "k_norm")):
                slots[f"{hf}.self_attn.{norm}.weight"] = Slot(
                    (ours, "attn", name, "scale"), (d,), (d,))
        for name, proj, n_in, n_out in (("gate", "gate_proj", e, f), ("up", "up_proj", e, f),
                                        ("down", "down_proj", f, e)):
            slots[f"{hf}.mlp.{proj}.weight"] = Slot(
                (ours, "mlp", name, "kernel"), (n_in, n_out), (n_out, n_in), linear=True)
        for name, norm in (("input_norm", "input_layernorm"),
                           ("post_attention_norm", "post_attention_layernorm")):
            slots[f"{hf}.{norm}.weight"] = Slot((ours, name, "scale"), (e,), (e,))
    slots["model.norm.weight"] = Slot(("final_norm", "scale"), (e,), (e,))
    if not config.tie_word_embeddings:
        slots[LM_HEAD] = Slot(("lm_head", "kernel"), (e, v), (v, e), linear=True)
    return slots


def _checkpoint_files(folder: str) -> tuple[list[str], str]:
    """The safetensors files of a folder, and what names them (the single file or the index)."""
    single = paths.join(folder, SINGLE_FILE)
    if paths.isfile(single):
        return [single], single
    index = paths.join(folder, INDEX_FILE)
    if paths.isfile(index):
        weight_map = json.loads(paths.read_text(index))["weight_map"]
        return [paths.join(folder, shard) for shard in sorted(set(weight_map.values()))], index
    raise FileNotFoundError(
        f"no {SINGLE_FILE} or {INDEX_FILE} in {folder} (only safetensors are read; "
        "convert pytorch_model.bin with Hugging Face tools first)")


def _put(tree: dict[str, Any], path: tuple[str, ...], value: np.ndarray) -> None:
    for name in path[:-1]:
        tree = tree.setdefault(name, {})
    tree[path[-1]] = value


def _get(tree: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        tree = tree[name]
    return tree


def _read(
    handle: Any, file: str, name: str, stored: tuple[int, ...], dtype: np.dtype
) -> np.ndarray:
    """The tensor ``name`` of an open file, in ``dtype``, once its header says it is a float of
    shape ``stored`` (checked before any of its data is read)."""
    view = handle.get_slice(name)
    shape, stored_dtype = tuple(view.get_shape()), view.get_dtype()
    if shape != stored:
        raise ValueError(f"{file}: tensor {name!r} has shape {shape}, expected {stored}")
    if stored_dtype not in _FLOAT_DTYPES:
        raise ValueError(f"{file}: tensor {name!r} has dtype {stored_dtype}, expected a float "
                         f"({', '.join(sorted(_FLOAT_DTYPES))})")
    return np.asarray(handle.get_tensor(name), dtype=dtype)


def _listed(names: list[str], limit: int = 5) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"{names[:limit]}{more}"


def read_llama_params(path: str | os.PathLike[str], config: LlamaConfig) -> dict[str, Any]:
    """Our numpy ``params`` tree from a folder's safetensors, tensor by tensor (see the module
    docstring for what is checked)."""
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
            names = [n for n in list(handle.keys()) if not n.endswith(_BUFFER_SUFFIX)]
            unexpected = sorted(n for n in names if n not in slots and n not in aside)
            if unexpected:
                raise ValueError(f"{file}: tensors not part of a {config.model_type} of this "
                                 f"config: {_listed(unexpected)}")
            for name in names:
                if name in aside:
                    head = (file, _read(handle, file, name, aside[name], dtype))
                    continue
                slot = slots[name]
                array = _read(handle, file, name, slot.stored, dtype)
                if slot.linear:  # (out, in) -> (in, out), then our head axes
                    array = np.ascontiguousarray(array.T)
                _put(params, slot.path, array.reshape(slot.shape))
                taken.add(name)
    missing = [name for name in slots if name not in taken]
    if missing:
        raise ValueError(f"{source}: tensor {missing[0]!r} (shape {slots[missing[0]].stored}) "
                         f"is missing" + (f", and {_listed(missing[1:])}" if missing[1:] else ""))
    if head is not None and not np.array_equal(head[1], params["embed_tokens"]["embedding"]):
        raise ValueError(f"{head[0]}: {LM_HEAD} differs from {EMBEDDING}, but the config ties "
                         "them (tie_word_embeddings)")
    return params


def load_llama(
    path: str | os.PathLike[str], **overrides: Any
) -> tuple[LlamaConfig, dict[str, Any]]:
    """Config (the class of its ``model_type``) and numpy ``params`` of a Hugging Face folder,
    local or ``gs://``; ``overrides`` set config fields (``param_dtype="bfloat16"``, LoRA ...)."""
    folder = os.fspath(path)
    config = config_from_hf(read_config(folder), **overrides)
    return config, read_llama_params(folder, config)


def llama_params_to_hf(params: dict[str, Any], config: LlamaConfig) -> dict[str, np.ndarray]:
    """Hugging Face tensors (``*ForCausalLM`` names, ``(out, in)`` Linear weights) from our tree,
    in the parameter dtype."""
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


def save_llama(
    path: str | os.PathLike[str],
    config: LlamaConfig,
    params: dict[str, Any],
    max_shard_bytes: int | None = None,
) -> None:
    """Write ``config.json`` and ``model.safetensors`` (or, with ``max_shard_bytes``, shards and
    their index) that ``transformers.AutoModelForCausalLM.from_pretrained`` loads; LoRA is folded
    into the kernels. A tied model writes no ``lm_head.weight``, as ``save_pretrained`` does."""
    tensors = llama_params_to_hf(export_params(params, config), config)
    write_folder(os.fspath(path), config.to_hf_config(), tensors, max_shard_bytes)

