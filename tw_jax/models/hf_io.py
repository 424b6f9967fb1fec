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

A file that cannot be read (``config.json`` or the shard index not JSON, a safetensors file cut
short or damaged: a copy that stopped early) is an :class:`UnreadableFileError` naming it, one
line that the CLI prints without a traceback, never safetensors' or json's own error.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load, load_file, save, save_file

from tw_jax.errors import UsageError
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


class UnreadableFileError(UsageError):
    """A file of a Hugging Face folder that cannot be read: ``config.json`` or the shard index
    not a JSON object, a safetensors file cut short or damaged. Its message names the file; a
    :class:`~tw_jax.errors.UsageError`, so the CLI prints it as one line (exit 2), and a
    ``ValueError``, as the loaders' other refusals are."""


_DAMAGED = "the file is cut short or damaged; copy the folder again"


def read_json_object(path: str) -> dict[str, Any]:
    """The JSON object in the file ``path``; text that is not one is an
    :class:`UnreadableFileError` naming the file and where it broke."""
    try:
        value = json.loads(paths.read_text(path))
    except json.JSONDecodeError as error:
        raise UnreadableFileError(f"{path}: not JSON at line {error.lineno}, column "
                                  f"{error.colno} ({error.msg}): {_DAMAGED}") from None
    except UnicodeDecodeError as error:
        raise UnreadableFileError(f"{path}: not JSON (not UTF-8 text at byte {error.start}): "
                                  f"{_DAMAGED}") from None
    if not isinstance(value, dict):
        raise UnreadableFileError(f"{path}: holds a JSON {type(value).__name__}, not an object: "
                                  f"{_DAMAGED}")
    return value


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed ``config.json`` of a checkpoint folder, with a clear error when it is missing
    or not a JSON object."""
    folder = _folder(path)
    config_path = paths.join(folder, "config.json")
    if not paths.isfile(config_path):
        raise FileNotFoundError(f"no config.json in {folder}")
    return read_json_object(config_path)


def read_weight_map(index: str) -> dict[str, str]:
    """``{tensor: shard file}`` of a ``model.safetensors.index.json``, or one line naming it."""
    weight_map = read_json_object(index).get("weight_map")
    if not isinstance(weight_map, dict):
        raise UnreadableFileError(f"{index}: has no \"weight_map\" object: {_DAMAGED}")
    return weight_map


def unreadable_tensors(path: str, error: BaseException) -> UnreadableFileError:
    """The one-line error of a safetensors file that safetensors cannot read (``error``), naming
    the file as the user knows it (never a local copy of a bucket object)."""
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    for prefix in ("Error while deserializing header: ", "Error while deserializing: "):
        reason = reason.removeprefix(prefix)
    return UnreadableFileError(f"{path}: not a readable safetensors file ({reason}): "
                               f"{_DAMAGED}")


def load_tensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The tensors of one safetensors file, local or in a bucket."""
    try:
        if paths.is_url(path):
            return load(paths.read_bytes(path))
        return load_file(os.fspath(path))
    except SafetensorError as error:
        raise unreadable_tensors(os.fspath(path), error) from None


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every tensor of a checkpoint folder: ``model.safetensors`` or the shards its index names."""
    folder = _folder(path)
    if paths.isfile(paths.join(folder, SINGLE_FILE)):
        return load_tensors(paths.join(folder, SINGLE_FILE))
    index = paths.join(folder, INDEX_FILE)
    if paths.isfile(index):
        weight_map = read_weight_map(index)
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


class TensorReader:
    """A checkpoint's tensors taken by name into our parameter tree, for every family: each one
    checked (:func:`checked_tensor`), cast to the parameter dtype and remembered, so that a loader
    can refuse what no parameter took rather than load a checkpoint of another config half-way."""

    def __init__(self, tensors: dict[str, np.ndarray], source: str, dtype: Any) -> None:
        self.tensors = tensors
        self.source = source
        self.dtype = np.dtype(dtype)
        self.used: set[str] = set()

    def take(
        self, name: str, shape: tuple[int, ...], stored: tuple[int, ...] | None = None
    ) -> np.ndarray:
        """The tensor ``name`` as stored (``stored``, default ``shape``), reshaped to ``shape``."""
        if name not in self.tensors:
            raise KeyError(f"{self.source}: tensor {name!r} is missing")
        array = checked_tensor(self.source, name, self.tensors[name], stored or shape)
        self.used.add(name)
        array = np.asarray(array, dtype=self.dtype)
        return array if stored is None else array.reshape(shape)

    def kernel(self, name: str, n_in: int, n_out: int) -> np.ndarray:
        """A ``torch.nn.Linear`` weight, stored ``(out, in)``, as our ``(in, out)`` kernel."""
        return np.ascontiguousarray(self.take(name, (n_out, n_in)).T)

    def linear(self, name: str, n_in: int, n_out: int) -> dict[str, np.ndarray]:
        """The biased ``torch.nn.Linear`` ``name`` as our ``kernel`` and ``bias``."""
        return {"kernel": self.kernel(f"{name}.weight", n_in, n_out),
                "bias": self.take(f"{name}.bias", (n_out,))}

    def layer_norm(
        self, name: str, size: int, scale: str = "weight", bias: str = "bias"
    ) -> dict[str, np.ndarray]:
        """The LayerNorm ``name`` (its tensors ``name.weight`` and ``name.bias``, unless named
        otherwise) as our ``scale`` and ``bias``."""
        return {"scale": self.take(f"{name}.{scale}", (size,)),
                "bias": self.take(f"{name}.{bias}", (size,))}

    def unused(self) -> list[str]:
        """The tensors no parameter took, sorted."""
        return sorted(set(self.tensors) - self.used)

    def refuse_unused(self, model: str) -> None:
        """Refuse a checkpoint with tensors no parameter took; ``model`` names what the tensors
        were read for (``a GPT-2``)."""
        unused = self.unused()
        if unused:
            raise ValueError(f"{self.source}: tensors not part of {model} of this config: "
                             f"{unused[:5]}")


class TensorWriter:
    """Hugging Face tensors written from our parameter tree, for every family: contiguous arrays
    (cast to ``dtype`` when given) under Hugging Face's names, projections in ``torch.nn.Linear``'s
    ``(out, in)`` layout. ``tensors`` holds them in the order written."""

    def __init__(self, dtype: Any = None) -> None:
        self.dtype = dtype
        self.tensors: dict[str, np.ndarray] = {}

    def put(self, name: str, x: Any, shape: tuple[int, ...] | None = None) -> None:
        """``x`` (reshaped to ``shape`` when given) as the tensor ``name``."""
        array = np.asarray(x, dtype=self.dtype)
        self.tensors[name] = np.ascontiguousarray(array if shape is None else array.reshape(shape))

    def kernel(self, name: str, kernel: Any, n_in: int) -> None:
        """Our kernel (``n_in`` inputs over its leading axes) as a ``torch.nn.Linear`` weight."""
        self.put(name, np.asarray(kernel).reshape(n_in, -1).T)

    def linear(self, name: str, tree: dict[str, Any], n_in: int) -> None:
        """Our biased projection ``tree`` as the ``torch.nn.Linear`` ``name``."""
        self.kernel(f"{name}.weight", tree["kernel"], n_in)
        self.put(f"{name}.bias", np.asarray(tree["bias"]).reshape(-1))

    def layer_norm(self, name: str, tree: dict[str, Any]) -> None:
        """Our LayerNorm ``tree`` as Hugging Face's ``name.weight`` and ``name.bias``."""
        self.put(f"{name}.weight", tree["scale"])
        self.put(f"{name}.bias", tree["bias"])


def gpt2_params_from_hf(
    tensors: dict[str, np.ndarray], config: GPT2Config, source: str | os.PathLike[str] = "<tensors>"
) -> dict[str, Any]:
    """Our ``params`` tree from Hugging Face GPT-2 tensors (names as saved by ``save_pretrained``)."""
    source = os.fspath(source)
    reader = TensorReader(_strip(tensors, source), source, config.param_dtype)
    take = reader.take  # Conv1D weights are stored (in, out), our kernels' layout, so no transpose
    e, h, d = config.n_embd, config.n_head, config.head_dim

    def conv1d(name: str, n_in: int, n_out: int) -> dict[str, np.ndarray]:
        return {"kernel": take(f"{name}.weight", (n_in, n_out)),
                "bias": take(f"{name}.bias", (n_out,))}

    params: dict[str, Any] = {
        "wte": {"embedding": take("wte.weight", (config.vocab_size, e))},
        "wpe": {"embedding": take("wpe.weight", (config.n_positions, e))},
        "ln_f": reader.layer_norm("ln_f", e),
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
        mlp = {"c_fc": conv1d(f"{p}.mlp.c_fc", e, config.mlp_dim),
               "c_proj": conv1d(f"{p}.mlp.c_proj", config.mlp_dim, e)}
        params[f"h_{i}"] = {"ln_1": reader.layer_norm(f"{p}.ln_1", e), "attn": attn,
                            "ln_2": reader.layer_norm(f"{p}.ln_2", e), "mlp": mlp}
    reader.refuse_unused("a GPT-2")
    return params


def gpt2_params_to_hf(params: dict[str, Any], config: GPT2Config) -> dict[str, np.ndarray]:
    """Hugging Face GPT-2 tensors (``GPT2LMHeadModel`` names, Conv1D layout) from our tree."""
    e = config.n_embd
    out = TensorWriter()
    out.put("transformer.wte.weight", params["wte"]["embedding"])
    out.put("transformer.wpe.weight", params["wpe"]["embedding"])
    out.layer_norm("transformer.ln_f", params["ln_f"])
    for i in range(config.n_layer):
        layer, p = params[f"h_{i}"], f"transformer.h.{i}"
        attn, mlp = layer["attn"], layer["mlp"]
        names = ("query", "key", "value")
        kernel = np.stack([np.asarray(attn[n]["kernel"]) for n in names], axis=1)
        bias = np.stack([np.asarray(attn[n]["bias"]) for n in names], axis=0)
        out.layer_norm(f"{p}.ln_1", layer["ln_1"])
        out.put(f"{p}.attn.c_attn.weight", kernel, (e, 3 * e))
        out.put(f"{p}.attn.c_attn.bias", bias, (3 * e,))
        out.put(f"{p}.attn.c_proj.weight", attn["out"]["kernel"], (e, e))
        out.put(f"{p}.attn.c_proj.bias", attn["out"]["bias"])
        out.layer_norm(f"{p}.ln_2", layer["ln_2"])
        for name in ("c_fc", "c_proj"):  # Conv1D: stored (in, out), as our kernels
            out.put(f"{p}.mlp.{name}.weight", mlp[name]["kernel"])
            out.put(f"{p}.mlp.{name}.bias", mlp[name]["bias"])
    return out.tensors


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
