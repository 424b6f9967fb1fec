"""Hugging Face BART checkpoints (``config.json`` + safetensors) to and from our parameter tree.

As in ``hf_io.py`` and ``t5_io.py``, only ``safetensors.numpy`` is used (nothing unpickled, no
PyTorch). Hugging Face BART keeps every projection as a biased ``torch.nn.Linear`` laid out
``(out, in)``; we keep ``(in, ...)`` kernels with separate head axes, so import transposes and
reshapes and export does the reverse: exact both ways.

Names. ``BartForConditionalGeneration`` prefixes the model's tensors with ``model.`` and adds
``final_logits_bias`` ``(1, vocab)``; a folder saved from ``BartModel`` (``facebook/bart-large``
is one) has neither the prefix nor the bias, which then loads as zeros, as Hugging Face does.
Copies of the shared embedding (``encoder.embed_tokens.weight``, ``decoder.embed_tokens.weight``,
a tied ``lm_head.weight``) are accepted only when equal to it. Export writes what
``save_pretrained`` of ``BartForConditionalGeneration`` writes: prefixed names, the bias, no
copies. Folders may be local or in a bucket (``gs://``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tw_jax.models.bart import BARTConfig
from tw_jax.models.hf_io import (
    TensorReader,
    TensorWriter,
    checked_tensor,
    read_config,
    read_safetensors,
    write_folder,
)
from tw_jax.models.variants import export_params

PREFIX = "model."
BIAS = "final_logits_bias"
_COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
_ATTENTION = (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj"))
_NORMS = {"encoder": ("self_attn_layer_norm", "final_layer_norm"),
          "decoder": ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm")}


def _prefix(tensors: dict[str, np.ndarray], source: str) -> str:
    """``model.`` (``BartForConditionalGeneration``) or nothing (``BartModel``)."""
    for prefix in (PREFIX, ""):
        if any(f"{prefix}{name}" in tensors for name in ("shared.weight", *_COPIES)):
            return prefix
    raise KeyError(f"{source}: tensor 'model.shared.weight' is missing (nor 'shared.weight' or "
                   "an embed_tokens copy): not a BART checkpoint")


def bart_params_from_hf(
    tensors: dict[str, np.ndarray], config: BARTConfig, source: str | os.PathLike[str] = "<tensors>"
) -> dict[str, Any]:
    """Our ``params`` tree from Hugging Face BART tensors (names as ``save_pretrained`` writes).

    Refuses missing tensors, tensors of another shape, and tensors this config has no place for.
    """
    source = os.fspath(source)
    prefix = _prefix(tensors, source)
    reader = TensorReader(tensors, source, config.param_dtype)
    dtype = reader.dtype
    d, vocab = config.d_model, config.vocab_size

    def attention(name: str, heads: int) -> dict[str, Any]:
        head_dim = d // heads
        out: dict[str, Any] = {}
        for ours, theirs in _ATTENTION:
            dense = reader.linear(f"{name}.{theirs}", d, d)
            out[ours] = {"kernel": dense["kernel"].reshape(d, heads, head_dim),
                         "bias": dense["bias"].reshape(heads, head_dim)}
        dense = reader.linear(f"{name}.out_proj", d, d)
        out["out"] = {"kernel": dense["kernel"].reshape(heads, head_dim, d), "bias": dense["bias"]}
        return out

    def stack(kind: str) -> dict[str, Any]:
        layers = config.encoder_layers if kind == "encoder" else config.decoder_layers
        heads = (config.encoder_attention_heads if kind == "encoder"
                 else config.decoder_attention_heads)
        ffn = config.encoder_ffn_dim if kind == "encoder" else config.decoder_ffn_dim
        k = prefix + kind
        tree: dict[str, Any] = {
            "embed_positions": {"embedding": reader.take(f"{k}.embed_positions.weight",
                                                         (config.position_rows, d))},
            "layernorm_embedding": reader.layer_norm(f"{k}.layernorm_embedding", d),
        }
        for i in range(layers):
            p = f"{k}.layers.{i}"
            layer: dict[str, Any] = {"self_attn": attention(f"{p}.self_attn", heads)}
            if kind == "decoder":
                layer["encoder_attn"] = attention(f"{p}.encoder_attn", heads)
            for name in _NORMS[kind]:
                layer[name] = reader.layer_norm(f"{p}.{name}", d)
            layer["fc1"] = reader.linear(f"{p}.fc1", d, ffn)
            layer["fc2"] = reader.linear(f"{p}.fc2", ffn, d)
            tree[f"layer_{i}"] = layer
        return tree

    names = [prefix + n for n in ("shared.weight", *_COPIES)]
    if config.tie_word_embeddings:
        names.append("lm_head.weight")
    present = [n for n in names if n in tensors]
    shared = checked_tensor(source, present[0], tensors[present[0]], (vocab, d))
    for name in present:
        if not np.array_equal(tensors[name], shared):
            raise ValueError(f"{source}: {name} differs from {present[0]} in a tied model")
        reader.used.add(name)
    params: dict[str, Any] = {
        "shared": {"embedding": np.asarray(shared, dtype=dtype)},
        "encoder": stack("encoder"),
        "decoder": stack("decoder"),
    }
    if BIAS in tensors:
        params[BIAS] = reader.take(BIAS, (1, vocab)).reshape(vocab)
    else:  # BartModel checkpoints; Hugging Face fills the buffer with zeros as well.
        params[BIAS] = np.zeros((vocab,), dtype)
    if not config.tie_word_embeddings:
        params["lm_head"] = {"kernel": reader.kernel("lm_head.weight", d, vocab)}
    reader.refuse_unused("a BART")
    return params


def bart_params_to_hf(params: dict[str, Any], config: BARTConfig) -> dict[str, np.ndarray]:
    """Hugging Face tensors (``BartForConditionalGeneration`` names, ``(out, in)``) from our tree."""
    d = config.d_model
    out = TensorWriter()
    out.put(PREFIX + "shared.weight", params["shared"]["embedding"])
    out.put(BIAS, params[BIAS], (1, config.vocab_size))
    if not config.tie_word_embeddings:
        out.kernel("lm_head.weight", params["lm_head"]["kernel"], d)
    for kind in ("encoder", "decoder"):
        tree, p = params[kind], f"{PREFIX}{kind}"
        out.put(f"{p}.embed_positions.weight", tree["embed_positions"]["embedding"])
        out.layer_norm(f"{p}.layernorm_embedding", tree["layernorm_embedding"])
        layers = config.encoder_layers if kind == "encoder" else config.decoder_layers
        for i in range(layers):
            layer, q = tree[f"layer_{i}"], f"{p}.layers.{i}"
            for attn in ("self_attn", "encoder_attn") if kind == "decoder" else ("self_attn",):
                for ours, theirs in _ATTENTION:
                    out.linear(f"{q}.{attn}.{theirs}", layer[attn][ours], d)
                out.linear(f"{q}.{attn}.out_proj", layer[attn]["out"], d)
            for name in _NORMS[kind]:
                out.layer_norm(f"{q}.{name}", layer[name])
            out.linear(f"{q}.fc1", layer["fc1"], d)
            out.linear(f"{q}.fc2", layer["fc2"], np.asarray(layer["fc2"]["kernel"]).shape[0])
    return out.tensors


def load_bart(path: str | os.PathLike[str], **overrides: Any) -> tuple[BARTConfig, dict[str, Any]]:
    """Config and numpy ``params`` of a Hugging Face BART folder; ``overrides`` set config fields."""
    config = BARTConfig.from_hf_config(read_config(path), **overrides)
    return config, bart_params_from_hf(read_safetensors(path), config, source=path)


def save_bart(
    path: str | os.PathLike[str],
    config: BARTConfig,
    params: dict[str, Any],
    max_shard_bytes: int | None = None,
) -> None:
    """Write ``config.json`` and ``model.safetensors`` (or shards + index) that Hugging Face loads;
    LoRA weights are folded into the kernels."""
    tensors = bart_params_to_hf(export_params(params, config), config)
    write_folder(path, config.to_hf_config(), tensors, max_shard_bytes)
