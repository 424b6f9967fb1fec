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

from tw_jax.models.hf_io import (
    TensorReader,
    TensorWriter,
    read_config,
    read_safetensors,
    write_folder,
)
from tw_jax.models.t5 import T5Config
from tw_jax.models.variants import export_params

# Copies of ``shared.weight`` that some checkpoints carry; accepted only when equal to it.
_EMBEDDING_COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")


def _mlp_names(config: T5Config) -> tuple[str, ...]:
    return ("wi_0", "wi_1", "wo") if config.is_gated else ("wi", "wo")


def _stacks(config: T5Config) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    """``(stack, layers, sublayers)``: our ``{sublayer}`` and ``{sublayer}_norm`` of block ``i``
    are Hugging Face's ``{stack}.block.{i}.layer.{j}``, the ``j``-th sublayer; one table for
    import and export, so the two cannot disagree."""
    return (("encoder", config.num_layers, ("self_attn", "mlp")),
            ("decoder", config.decoder_layers, ("self_attn", "cross_attn", "mlp")))


# Hugging Face's module name of each of our sublayers.
_SUBLAYERS = {"self_attn": "SelfAttention", "cross_attn": "EncDecAttention",
              "mlp": "DenseReluDense"}


def t5_params_from_hf(
    tensors: dict[str, np.ndarray], config: T5Config, source: str | os.PathLike[str] = "<tensors>"
) -> dict[str, Any]:
    """Our ``params`` tree from Hugging Face T5 tensors (names as saved by ``save_pretrained``).

    Refuses missing tensors and tensors this config has no place for.
    """
    source = os.fspath(source)
    reader = TensorReader(tensors, source, config.param_dtype)
    take, linear = reader.take, reader.kernel
    d, h, dk, ff = config.d_model, config.num_heads, config.d_kv, config.d_ff

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
            reader.used.add(name)

    params: dict[str, Any] = {"shared": {"embedding": shared}}
    for stack, n_layers, sublayers in _stacks(config):
        tree: dict[str, Any] = {"relative_attention_bias": bias(stack)}
        for i in range(n_layers):
            block: dict[str, Any] = {}
            for j, name in enumerate(sublayers):
                p = f"{stack}.block.{i}.layer.{j}"
                block[f"{name}_norm"] = norm(f"{p}.layer_norm.weight")
                read = mlp if name == "mlp" else attention
                block[name] = read(f"{p}.{_SUBLAYERS[name]}")
            tree[f"block_{i}"] = block
        tree["final_norm"] = norm(f"{stack}.final_layer_norm.weight")
        params[stack] = tree
    if not config.tie_word_embeddings:
        params["lm_head"] = {"kernel": linear("lm_head.weight", d, config.vocab_size)}
    reader.refuse_unused("a T5")
    return params


def t5_params_to_hf(params: dict[str, Any], config: T5Config) -> dict[str, np.ndarray]:
    """Hugging Face T5 tensors (``T5ForConditionalGeneration`` names, ``(out, in)``) from our tree."""
    d, h, dk = config.d_model, config.num_heads, config.d_kv
    out = TensorWriter()
    out.put("shared.weight", params["shared"]["embedding"])
    if not config.tie_word_embeddings:
        out.kernel("lm_head.weight", params["lm_head"]["kernel"], d)

    def attention(tree: dict[str, Any], prefix: str) -> None:
        for ours, theirs in (("query", "q"), ("key", "k"), ("value", "v")):
            out.kernel(f"{prefix}.{theirs}.weight", tree[ours]["kernel"], d)
        out.kernel(f"{prefix}.o.weight", tree["out"]["kernel"], h * dk)

    def mlp(tree: dict[str, Any], prefix: str) -> None:
        for name in _mlp_names(config)[:-1]:
            out.kernel(f"{prefix}.{name}.weight", tree[name]["kernel"], d)
        out.kernel(f"{prefix}.wo.weight", tree["wo"]["kernel"], config.d_ff)

    for stack, n_layers, sublayers in _stacks(config):
        tree = params[stack]
        out.put(f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                tree["relative_attention_bias"]["embedding"])
        for i in range(n_layers):
            block = tree[f"block_{i}"]
            for j, name in enumerate(sublayers):
                p = f"{stack}.block.{i}.layer.{j}"
                out.put(f"{p}.layer_norm.weight", block[f"{name}_norm"]["scale"])
                write = mlp if name == "mlp" else attention
                write(block[name], f"{p}.{_SUBLAYERS[name]}")
        out.put(f"{stack}.final_layer_norm.weight", tree["final_norm"]["scale"])
    return out.tensors


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
