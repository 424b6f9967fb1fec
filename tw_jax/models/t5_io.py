"""Hugging Face T5 checkpoints (``config.json`` + safetensors) to and from our parameter tree.

As in ``hf_io.py``, only ``safetensors.numpy`` is used. Hugging Face T5 stores every projection as a
``torch.nn.Linear`` weight laid out ``(out, in)``; we keep ``(in, ...)`` kernels with separate head
axes, so import transposes and reshapes and export does the reverse: exact both ways. The relative
position bias lives in Hugging Face's first layer of each stack and in our stack itself. Folders may
be local or in a bucket (``gs://``), as in ``hf_io.py``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tw_jax.models.hf_io import checked_tensor, read_config, read_safetensors, write_folder
from tw_jax.models.t5 import T5Config
from tw_jax.models.variants import export_params

# Copies of ``shared.weight`` that some checkpoints carry; accepted only when equal to it.
_EMBEDDING_COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")


def _mlp_names(config: T5Config) -> tuple[str, ...]:
    return ("wi_0", "wi_1", "wo") if config.is_gated else ("wi", "wo")


def t5_params_from_hf(
    tensors: dict[str, np.ndarray], config: T5Config, source: str | os.PathLike[str] = "<tensors>"
) -> dict[str, Any]:
    """Our ``params`` tree from Hugging Face T5 tensors (names as saved by ``save_pretrained``).

    Refuses missing tensors and tensors this config has no place for.
    """
    source = os.fspath(source)
    used: set[str] = set()
    dtype = np.dtype(config.param_dtype)
    d, h, dk, ff = config.d_model, config.num_heads, config.d_kv, config.d_ff

    def take(name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in tensors:
            raise KeyError(f"{source}: tensor {name!r} is missing")
        array = checked_tensor(source, name, tensors[name], shape)
        used.add(name)
        return np.asarray(array, dtype=dtype)

    def linear(name: str, n_in: int, n_out: int) -> np.ndarray:
        return np.ascontiguousarray(take(name, (n_out, n_in)).T)

    def attention(prefix: str) -> dict[str, Any]:
        out = {
            ours: {"kernel": linear(f"{prefix}.{theirs}.weight", d, h * dk).reshape(d, h, dk)}
            for ours, theirs in (("query", "q"), ("key", "k"), ("value", "v"))
        }
        out["out"] = {"kernel": linear(f"{prefix}.o.weight", h * dk, d).reshape(h, dk, d)}
        return out

    def mlp(prefix: str) -> dict[str, Any]:
        out = {name: {"kernel": linear(f"{prefix}.{name}.weight", d, ff)} for name in _mlp_names(config)[:-1]}
        out["wo"] = {"kernel": linear(f"{prefix}.wo.weight", ff, d)}
        return out

    def norm(name: str) -> dict[str, np.ndarray]:
        return {"scale": take(name, (d,))}

    def bias(stack: str) -> dict[str, np.ndarray]:
        name = f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        return {"embedding": take(name, (config.relative_attention_num_buckets, h))}

    shared = take("shared.weight", (config.vocab_size, d))
    for name in _EMBEDDING_COPIES + (("lm_head.weight",) if config.tie_word_embeddings else ()):
        if name in tensors:
            if not np.array_equal(tensors[name], tensors["shared.weight"]):
                raise ValueError(f"{source}: {name} differs from shared.weight in a tied model")
            used.add(name)

    encoder: dict[str, Any] = {"relative_attention_bias": bias("encoder")}
    for i in range(config.num_layers):
        p = f"encoder.block.{i}.layer"
        encoder[f"block_{i}"] = {
            "self_attn_norm": norm(f"{p}.0.layer_norm.weight"),
            "self_attn": attention(f"{p}.0.SelfAttention"),
            "mlp_norm": norm(f"{p}.1.layer_norm.weight"),
            "mlp": mlp(f"{p}.1.DenseReluDense"),
        }
    encoder["final_norm"] = norm("encoder.final_layer_norm.weight")

    decoder: dict[str, Any] = {"relative_attention_bias": bias("decoder")}
    for i in range(config.decoder_layers):
        p = f"decoder.block.{i}.layer"
        decoder[f"block_{i}"] = {
            "self_attn_norm": norm(f"{p}.0.layer_norm.weight"),
            "self_attn": attention(f"{p}.0.SelfAttention"),
            "cross_attn_norm": norm(f"{p}.1.layer_norm.weight"),
            "cross_attn": attention(f"{p}.1.EncDecAttention"),
            "mlp_norm": norm(f"{p}.2.layer_norm.weight"),
            "mlp": mlp(f"{p}.2.DenseReluDense"),
        }
    decoder["final_norm"] = norm("decoder.final_layer_norm.weight")

    params: dict[str, Any] = {"shared": {"embedding": shared}, "encoder": encoder, "decoder": decoder}
    if not config.tie_word_embeddings:
        params["lm_head"] = {"kernel": linear("lm_head.weight", d, config.vocab_size)}
    unused = sorted(set(tensors) - used)
    if unused:
        raise ValueError(f"{source}: tensors not part of a T5 of this config: {unused[:5]}")
    return params


def t5_params_to_hf(params: dict[str, Any], config: T5Config) -> dict[str, np.ndarray]:
    """Hugging Face T5 tensors (``T5ForConditionalGeneration`` names, ``(out, in)``) from our tree."""
    d, h, dk = config.d_model, config.num_heads, config.d_kv

    def arr(x: Any) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(x))

    def linear(kernel: Any, n_in: int) -> np.ndarray:
        return arr(np.asarray(kernel).reshape(n_in, -1).T)

    out: dict[str, np.ndarray] = {"shared.weight": arr(params["shared"]["embedding"])}
    if not config.tie_word_embeddings:
        out["lm_head.weight"] = linear(params["lm_head"]["kernel"], d)

    def attention(tree: dict[str, Any], prefix: str) -> None:
        for ours, theirs in (("query", "q"), ("key", "k"), ("value", "v")):
            out[f"{prefix}.{theirs}.weight"] = linear(tree[ours]["kernel"], d)
        out[f"{prefix}.o.weight"] = linear(tree["out"]["kernel"], h * dk)

    def mlp(tree: dict[str, Any], prefix: str) -> None:
        for name in _mlp_names(config)[:-1]:
            out[f"{prefix}.{name}.weight"] = linear(tree[name]["kernel"], d)
        out[f"{prefix}.wo.weight"] = linear(tree["wo"]["kernel"], config.d_ff)

    for stack, n_layers, layer_names in (
        ("encoder", config.num_layers, ("self_attn", "mlp")),
        ("decoder", config.decoder_layers, ("self_attn", "cross_attn", "mlp")),
    ):
        tree = params[stack]
        out[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = arr(
            tree["relative_attention_bias"]["embedding"]
        )
        for i in range(n_layers):
            block = tree[f"block_{i}"]
            for j, name in enumerate(layer_names):
                p = f"{stack}.block.{i}.layer.{j}"
                out[f"{p}.layer_norm.weight"] = arr(block[f"{name}_norm"]["scale"])
                if name == "mlp":
                    mlp(block["mlp"], f"{p}.DenseReluDense")
                else:
                    kind = "SelfAttention" if name == "self_attn" else "EncDecAttention"
                    attention(block[name], f"{p}.{kind}")
        out[f"{stack}.final_layer_norm.weight"] = arr(tree["final_norm"]["scale"])
    return out


def load_t5(path: str | os.PathLike[str], **overrides: Any) -> tuple[T5Config, dict[str, Any]]:
    """Config and numpy ``params`` of a Hugging Face T5 folder; ``overrides`` set config fields."""
    config = T5Config.from_hf_config(read_config(path), **overrides)
    return config, t5_params_from_hf(read_safetensors(path), config, source=path)


def save_t5(
    path: str | os.PathLike[str],
    config: T5Config,
    params: dict[str, Any],
    max_shard_bytes: int | None = None,
) -> None:
    """Write ``config.json`` and ``model.safetensors`` (or shards + index) that Hugging Face loads."""
    tensors = t5_params_to_hf(export_params(params, config), config)
    write_folder(path, config.to_hf_config(), tensors, max_shard_bytes)
