"""Hugging Face GPT-2 checkpoints (``config.json`` + safetensors) to and from our parameter tree.

Only ``safetensors.numpy`` is used: no PyTorch is needed and nothing is unpickled, so a checkpoint
from disk cannot run code. Hugging Face GPT-2 stores ``c_attn``/``c_proj``/``c_fc`` as ``Conv1D``
weights laid out ``(in, out)``; ``c_attn`` fuses query, key and value along ``out``. We keep
separate ``(embed, heads, kv)`` kernels, so import splits and reshapes and export concatenates and
reshapes back — both exact, so a round trip reproduces every array bit for bit.

Folders may be local or in a bucket (``gs://``): files go through :mod:`tw_jax.io.paths`. A local
safetensors file is read with ``load_file``; an object is fetched whole and parsed from bytes
(``safetensors.numpy.load``), and written from bytes (``safetensors.numpy.save``). Every file is
written under a temporary name and renamed into place; ``config.json`` is written last, so a
folder with a ``config.json`` (what loaders look for) is complete.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from safetensors.numpy import load, load_file, save, save_file

from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, commit, discard, temporary_sibling, write_json
from tw_jax.models.gpt2 import GPT2Config
from tw_jax.models.variants import export_params

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Buffers older GPT-2 checkpoints carry; they are recomputed, never learned.
_IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")


def _folder(path: str | os.PathLike[str]) -> str:
    """A folder as a string (URLs intact; never through pathlib, which mangles ``gs://``)."""
    return os.fspath(path)


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed ``config.json`` of a checkpoint folder, with a clear error when it is missing."""
    folder = _folder(path)
    config_path = paths.join(folder, "config.json")
    if not paths.isfile(config_path):
        raise FileNotFoundError(f"no config.json in {folder}")
    return json.loads(paths.read_text(config_path))


def load_tensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The tensors of one safetensors file, local or in a bucket."""
    if paths.is_url(path):
        return load(paths.read_bytes(path))
    return load_file(os.fspath(path))


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every tensor of a checkpoint folder: ``model.safetensors`` or the shards its index names."""
    folder = _folder(path)
    if paths.isfile(paths.join(folder, SINGLE_FILE)):
        return load_tensors(paths.join(folder, SINGLE_FILE))
    index = paths.join(folder, INDEX_FILE)
    if paths.isfile(index):
        weight_map = json.loads(paths.read_text(index))["weight_map"]
        tensors: dict[str, np.ndarray] = {}
        for shard in sorted(set(weight_map.values())):
            tensors.update(load_tensors(paths.join(folder, shard)))
        missing = sorted(set(weight_map) - set(tensors))
        if missing:
            raise ValueError(f"{index} names tensors absent from its shards: {missing[:5]}")
        return tensors
    raise FileNotFoundError(
        f"no {SINGLE_FILE} or {INDEX_FILE} in {folder} (only safetensors are read; "
        "convert pytorch_model.bin with Hugging Face tools first)"
    )


def _strip(tensors: dict[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
    """Drop the ``transformer.`` prefix, buffers, and a tied ``lm_head`` (refuse an untied one)."""
    out: dict[str, np.ndarray] = {}
    lm_head = None
    for name, array in tensors.items():
        if name == "lm_head.weight":
            lm_head = array
            continue
        name = name.removeprefix("transformer.")
        if name.endswith(_IGNORED_SUFFIXES):
            continue
        out[name] = array
    if lm_head is not None and not np.array_equal(lm_head, out.get("wte.weight")):
        raise ValueError(f"{source}: lm_head.weight differs from wte.weight; only tied heads are supported")
    return out


_FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})


def checked_tensor(
    source: str, name: str, array: np.ndarray, shape: tuple[int, ...]
) -> np.ndarray:
    """``array`` if it has exactly ``shape`` (as stored: a transposed matrix of the same size is
    refused) and a floating dtype; otherwise one line naming the tensor, expected and found."""
    if tuple(array.shape) != tuple(shape):
        raise ValueError(f"{source}: tensor {name!r} has shape {tuple(array.shape)}, "
                         f"expected {tuple(shape)}")
    if np.dtype(array.dtype).name not in _FLOAT_DTYPES:
        raise ValueError(f"{source}: tensor {name!r} has dtype {np.dtype(array.dtype).name}, "
                         f"expected a float ({', '.join(sorted(_FLOAT_DTYPES))})")
    return array


def gpt2_params_from_hf(
    tensors: dict[str, np.ndarray], config: GPT2Config, source: str | os.PathLike[str] = "<tensors>"
) -> dict[str, Any]:
    """Our ``params`` tree from Hugging Face GPT-2 tensors (names as saved by ``save_pretrained``)."""
    source = os.fspath(source)
    flat = _strip(tensors, source)
    used: set[str] = set()
    dtype = np.dtype(config.param_dtype)
    e, h, d = config.n_embd, config.n_head, config.head_dim

    def take(name: str, shape: tuple[int, ...], stored: tuple[int, ...] | None = None) -> np.ndarray:
        """The tensor as stored (``stored``, default ``shape``: Conv1D keeps (in, out)),
        reshaped to our ``shape``."""
        if name not in flat:
            raise KeyError(f"{source}: tensor {name!r} is missing")
        array = checked_tensor(source, name, flat[name], stored or shape)
        used.add(name)
        return np.asarray(array, dtype=dtype).reshape(shape)

    def norm(prefix: str) -> dict[str, np.ndarray]:
        return {"scale": take(f"{prefix}.weight", (e,)), "bias": take(f"{prefix}.bias", (e,))}

    params: dict[str, Any] = {
        "wte": {"embedding": take("wte.weight", (config.vocab_size, e))},
        "wpe": {"embedding": take("wpe.weight", (config.n_positions, e))},
        "ln_f": norm("ln_f"),
    }
    for i in range(config.n_layer):
        p = f"h.{i}"
        qkv_kernel = take(f"{p}.attn.c_attn.weight", (e, 3, h, d), (e, 3 * h * d))
        qkv_bias = take(f"{p}.attn.c_attn.bias", (3, h, d), (3 * h * d,))
        attn = {
            name: {"kernel": np.ascontiguousarray(qkv_kernel[:, j]), "bias": qkv_bias[j].copy()}
            for j, name in enumerate(("query", "key", "value"))
        }
        attn["out"] = {
            "kernel": take(f"{p}.attn.c_proj.weight", (h, d, e), (h * d, e)),
            "bias": take(f"{p}.attn.c_proj.bias", (e,)),
        }
        mlp = {
            "c_fc": {
                "kernel": take(f"{p}.mlp.c_fc.weight", (e, config.mlp_dim)),
                "bias": take(f"{p}.mlp.c_fc.bias", (config.mlp_dim,)),
            },
            "c_proj": {
                "kernel": take(f"{p}.mlp.c_proj.weight", (config.mlp_dim, e)),
                "bias": take(f"{p}.mlp.c_proj.bias", (e,)),
            },
        }
        params[f"h_{i}"] = {"ln_1": norm(f"{p}.ln_1"), "attn": attn, "ln_2": norm(f"{p}.ln_2"), "mlp": mlp}
    unused = sorted(set(flat) - used)
    if unused:
        raise ValueError(f"{source}: tensors not part of a GPT-2 of this config: {unused[:5]}")
    return params


def gpt2_params_to_hf(params: dict[str, Any], config: GPT2Config) -> dict[str, np.ndarray]:
    """Hugging Face GPT-2 tensors (``GPT2LMHeadModel`` names, Conv1D layout) from our tree."""
    e = config.n_embd

    def arr(x: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
        a = np.asarray(x)
        return np.ascontiguousarray(a if shape is None else a.reshape(shape))

    out = {
        "transformer.wte.weight": arr(params["wte"]["embedding"]),
        "transformer.wpe.weight": arr(params["wpe"]["embedding"]),
        "transformer.ln_f.weight": arr(params["ln_f"]["scale"]),
        "transformer.ln_f.bias": arr(params["ln_f"]["bias"]),
    }
    for i in range(config.n_layer):
        layer, p = params[f"h_{i}"], f"transformer.h.{i}"
        attn, mlp = layer["attn"], layer["mlp"]
        names = ("query", "key", "value")
        kernel = np.stack([np.asarray(attn[n]["kernel"]) for n in names], axis=1)
        bias = np.stack([np.asarray(attn[n]["bias"]) for n in names], axis=0)
        out.update({
            f"{p}.ln_1.weight": arr(layer["ln_1"]["scale"]),
            f"{p}.ln_1.bias": arr(layer["ln_1"]["bias"]),
            f"{p}.attn.c_attn.weight": arr(kernel, (e, 3 * e)),
            f"{p}.attn.c_attn.bias": arr(bias, (3 * e,)),
            f"{p}.attn.c_proj.weight": arr(attn["out"]["kernel"], (e, e)),
            f"{p}.attn.c_proj.bias": arr(attn["out"]["bias"]),
            f"{p}.ln_2.weight": arr(layer["ln_2"]["scale"]),
            f"{p}.ln_2.bias": arr(layer["ln_2"]["bias"]),
            f"{p}.mlp.c_fc.weight": arr(mlp["c_fc"]["kernel"]),
            f"{p}.mlp.c_fc.bias": arr(mlp["c_fc"]["bias"]),
            f"{p}.mlp.c_proj.weight": arr(mlp["c_proj"]["kernel"]),
            f"{p}.mlp.c_proj.bias": arr(mlp["c_proj"]["bias"]),
        })
    return out


def load_gpt2(path: str | os.PathLike[str], **overrides: Any) -> tuple[GPT2Config, dict[str, Any]]:
    """Config and numpy ``params`` of a Hugging Face GPT-2 folder; ``overrides`` set config fields."""
    config = GPT2Config.from_hf_config(read_config(path), **overrides)
    return config, gpt2_params_from_hf(read_safetensors(path), config, source=path)


_METADATA = {"format": "pt"}


def _save_tensors(tensors: dict[str, np.ndarray], path: str) -> None:
    """One safetensors file, atomically: written locally in place (no copy in memory), or
    serialised to bytes and uploaded as one object."""
    if paths.is_url(path):
        with atomic_open(path, "wb") as handle:
            handle.write(save(tensors, metadata=_METADATA))
        return
    temporary = temporary_sibling(path)
    try:
        save_file(tensors, os.fspath(temporary), metadata=_METADATA)
        commit(temporary, path)
    except BaseException:
        discard(temporary)
        raise


def save_gpt2(
    path: str | os.PathLike[str],
    config: GPT2Config,
    params: dict[str, Any],
    max_shard_bytes: int | None = None,
) -> None:
    """Write ``config.json`` and ``model.safetensors`` (or shards + index) that Hugging Face loads.

    LoRA weights are folded into the kernels; K-Adapter and Modular models are refused.

    With ``max_shard_bytes`` the tensors are split, in name order, into
    ``model-0000k-of-0000n.safetensors`` files plus ``model.safetensors.index.json``.
    """
    folder = _folder(path)
    tensors = gpt2_params_to_hf(export_params(params, config), config)
    write_folder(folder, config.to_hf_config(), tensors, max_shard_bytes)


def write_folder(
    folder: str | os.PathLike[str],
    hf_config: dict[str, Any],
    tensors: dict[str, np.ndarray],
    max_shard_bytes: int | None = None,
) -> None:
    """A Hugging Face folder (local or in a bucket): the tensors, then ``config.json`` last."""
    folder = _folder(folder)
    paths.makedirs(folder)
    write_tensors(folder, tensors, max_shard_bytes)
    write_json(paths.join(folder, "config.json"), hf_config)


def write_tensors(
    folder: str | os.PathLike[str],
    tensors: dict[str, np.ndarray],
    max_shard_bytes: int | None = None,
) -> None:
    """``model.safetensors``, or with ``max_shard_bytes`` shards in name order plus their index."""
    folder = _folder(folder)
    if max_shard_bytes is None:
        _save_tensors(tensors, paths.join(folder, SINGLE_FILE))
        return
    shards: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for name in sorted(tensors):
        if shards[-1] and size + tensors[name].nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensors[name]
        size += tensors[name].nbytes
    weight_map = {}
    for k, shard in enumerate(shards, start=1):
        file_name = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        _save_tensors(shard, paths.join(folder, file_name))
        weight_map.update(dict.fromkeys(shard, file_name))
    total = sum(t.nbytes for t in tensors.values())
    write_json(paths.join(folder, INDEX_FILE),
               {"metadata": {"total_size": total}, "weight_map": weight_map})
