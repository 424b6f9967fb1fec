"""Hugging Face checkpoints of the decoder families (``config.json`` + safetensors) to and from
our parameter tree, by a family's table of tensor slots: ``llama_io.py`` and ``gemma_io.py``
name their tensors (:func:`decoder_slots` with their norms and options) and call
:func:`read_params` and :func:`write_checkpoint`.

As in ``hf_io.py``, nothing is unpickled and no PyTorch is needed. These checkpoints run to many
gigabytes, so reading is tensor by tensor: each file (``model.safetensors``, or the shards that
``model.safetensors.index.json`` names) is opened with ``safetensors.safe_open``, which reads the
header alone, and each tensor is taken from it, checked, cast to the parameter dtype
(bf16/fp16 storage becomes float32, or stays bf16 for ``param_dtype="bfloat16"``), laid out as
ours and put in the tree before the next one is read: no second copy of the checkpoint is ever
held. A shard in a bucket (``gs://``) is first copied to a local temporary file
(:func:`tw_jax.io.paths.local_copy`), one shard at a time.

Every tensor the config expects must be there in Hugging Face's shape, else one line names the
file, the tensor and both shapes; a tensor the config has no place for is an error naming it (a
family's ``rename`` may skip some, or read them under other names). A tied checkpoint has no
``lm_head.weight``; one that has it anyway must equal the embedding. A file safetensors cannot
read (cut short by a copy that stopped, damaged) is one line naming it
(:class:`~tw_jax.models.hf_io.UnreadableFileError`), as is an index that is not JSON.

``torch.nn.Linear`` stores ``(out, in)``; our kernels are ``(in, ...)`` with separate head axes
(``query`` ``(embed, heads, head_dim)``, ``out`` ``(heads, head_dim, embed)``), so import
transposes and reshapes and export does the reverse, exactly. Export folds LoRA into the kernels
and writes ``config.json`` last (``hf_io.write_folder``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ml_dtypes  # noqa: F401  (registers numpy's "bfloat16", which safe_open returns bf16 as)
import numpy as np
from safetensors import SafetensorError, safe_open

from tw_jax.io import paths
from tw_jax.models.hf_io import (
    INDEX_FILE,
    SINGLE_FILE,
    read_weight_map,
    unreadable_tensors,
    write_folder,
)
from tw_jax.models.variants import export_params

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


def decoder_slots(
    config: Any, layer_norms: Sequence[tuple[str, str]], *, qkv_bias: bool = False,
    out_bias: bool = False, qk_norm: bool = False,
) -> dict[str, Slot]:
    """Every tensor of a ``*ForCausalLM`` checkpoint of a decoder ``config``, by Hugging Face
    name: the embedding; in each layer the attention projections (``qkv_bias``, ``out_bias``:
    their biases), the q/k norms with ``qk_norm``, the gated MLP and the layer's norms
    (``layer_norms``: ours and Hugging Face's names, in the checkpoint's order); the final norm
    and, untied, the LM head."""
    e, f, v = config.hidden_size, config.intermediate_size, config.vocab_size
    h, k, d = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    slots = {EMBEDDING: Slot(("embed_tokens", "embedding"), (v, e), (v, e))}
    for i in range(config.num_hidden_layers):
        hf, ours = f"model.layers.{i}", f"layer_{i}"
        for name, proj, heads in (("query", "q_proj", h), ("key", "k_proj", k),
                                  ("value", "v_proj", k)):
            slots[f"{hf}.self_attn.{proj}.weight"] = Slot(
                (ours, "attn", name, "kernel"), (e, heads, d), (heads * d, e), linear=True)
            if qkv_bias:
                slots[f"{hf}.self_attn.{proj}.bias"] = Slot(
                    (ours, "attn", name, "bias"), (heads, d), (heads * d,))
        slots[f"{hf}.self_attn.o_proj.weight"] = Slot(
            (ours, "attn", "out", "kernel"), (h, d, e), (e, h * d), linear=True)
        if out_bias:
            slots[f"{hf}.self_attn.o_proj.bias"] = Slot((ours, "attn", "out", "bias"), (e,), (e,))
        if qk_norm:
            for name, norm in (("query_norm", "q_norm"), ("key_norm", "k_norm")):
                slots[f"{hf}.self_attn.{norm}.weight"] = Slot(
                    (ours, "attn", name, "scale"), (d,), (d,))
        for name, proj, n_in, n_out in (("gate", "gate_proj", e, f), ("up", "up_proj", e, f),
                                        ("down", "down_proj", f, e)):
            slots[f"{hf}.mlp.{proj}.weight"] = Slot(
                (ours, "mlp", name, "kernel"), (n_in, n_out), (n_out, n_in), linear=True)
        for name, norm in layer_norms:
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
        weight_map = read_weight_map(index)
        return [paths.join(folder, shard) for shard in sorted(set(weight_map.values()))], index
    raise FileNotFoundError(
        f"no {SINGLE_FILE} or {INDEX_FILE} in {folder} (only safetensors are read; "
        "convert pytorch_model.bin with Hugging Face tools first)")


@contextlib.contextmanager
def _opened(file: str) -> Iterator[Any]:
    """``safe_open`` of the safetensors ``file`` (a bucket object through a local copy); a file
    it cannot read is one line naming ``file``. Its header is checked against the file's size
    when it opens, so a file cut short fails here, before any tensor is taken."""
    with paths.local_copy(file) as local:
        try:
            handle = safe_open(local, framework="numpy")
        except SafetensorError as error:
            raise unreadable_tensors(file, error) from None
        with handle:
            try:
                yield handle
            except SafetensorError as error:
                raise unreadable_tensors(file, error) from None


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


def read_params(
    path: str | os.PathLike[str], config: Any, slots: dict[str, Slot],
    rename: Callable[[str], str | None] | None = None,
) -> dict[str, Any]:
    """Our numpy ``params`` tree from a folder's safetensors, tensor by tensor (see the module
    docstring for what is checked), each tensor put where ``slots`` (by Hugging Face name) says;
    ``rename`` maps a stored name to its name in ``slots``, or None to skip the tensor."""
    folder = os.fspath(path)
    # A tied checkpoint may carry lm_head.weight anyway: read aside, compared at the end.
    aside = {LM_HEAD: slots[EMBEDDING].stored} if config.tie_word_embeddings else {}
    dtype = np.dtype(config.param_dtype)
    files, source = _checkpoint_files(folder)
    params: dict[str, Any] = {}
    taken: set[str] = set()
    head: tuple[str, np.ndarray] | None = None
    for file in files:
        with _opened(file) as handle:
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


def params_to_hf(params: dict[str, Any], slots: dict[str, Slot]) -> dict[str, np.ndarray]:
    """Hugging Face tensors (the names of ``slots``, ``(out, in)`` Linear weights) from our
    tree, in the parameter dtype."""
    tensors: dict[str, np.ndarray] = {}
    for name, slot in slots.items():
        array = np.asarray(_get(params, slot.path))
        if tuple(array.shape) != slot.shape:
            raise ValueError(f"parameter {'/'.join(slot.path)} has shape {array.shape}, "
                             f"expected {slot.shape}")
        if slot.linear:  # (in..., out...) -> (out, in)
            n_out, n_in = slot.stored
            array = array.reshape(n_in, n_out).T
        tensors[name] = np.ascontiguousarray(array.reshape(slot.stored))
    return tensors


def write_checkpoint(
    path: str | os.PathLike[str], config: Any, params: dict[str, Any],
    slots: Callable[[Any], dict[str, Slot]], max_shard_bytes: int | None = None,
) -> None:
    """Write ``config.json`` and ``model.safetensors`` (or, with ``max_shard_bytes``, shards and
    their index) of the tensors ``slots(config)`` names; LoRA is folded into the kernels. A tied
    model writes no ``lm_head.weight``, as ``save_pretrained`` does."""
    tensors = params_to_hf(export_params(params, config), slots(config))
    write_folder(os.fspath(path), config.to_hf_config(), tensors, max_shard_bytes)
