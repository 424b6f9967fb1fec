"""Hugging Face Llama, Qwen2, Qwen3 and Mistral checkpoints (``config.json`` + safetensors) to
and from our parameter tree: the tensor names of these families; reading and writing are
``decoder_io.py``'s.

As in ``hf_io.py``, nothing is unpickled and no PyTorch is needed. Reading is tensor by tensor
(``safetensors.safe_open``; each file, or each shard that ``model.safetensors.index.json``
names, copied locally first when it is in a bucket), each tensor cast to the parameter dtype
(bf16/fp16 storage becomes float32, or stays bf16 for ``param_dtype="bfloat16"``), laid out as
ours and put in the tree before the next one is read: no second copy of the checkpoint is ever
held.

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

import os
from typing import Any

import numpy as np

from tw_jax.models.decoder_io import (
    Slot,
    decoder_slots,
    params_to_hf,
    read_params,
    write_checkpoint,
)
from tw_jax.models.hf_io import read_config
from tw_jax.models.llama import LlamaConfig, config_from_hf

# Buffers of older checkpoints (``model.layers.N.self_attn.rotary_emb.inv_freq``): recomputed.
_BUFFER_SUFFIX = "rotary_emb.inv_freq"
# Each layer's norms: ours and Hugging Face's names.
_NORMS = (("input_norm", "input_layernorm"), ("post_attention_norm", "post_attention_layernorm"))


def tensor_slots(config: LlamaConfig) -> dict[str, Slot]:
    """Every tensor of a ``*ForCausalLM`` checkpoint of ``config``, by Hugging Face name."""
    return decoder_slots(config, _NORMS, qkv_bias=config.attention_bias,
                         out_bias=config.out_bias, qk_norm=config.qk_norm)


def _without_buffers(name: str) -> str | None:
    return None if name.endswith(_BUFFER_SUFFIX) else name


def read_llama_params(path: str | os.PathLike[str], config: LlamaConfig) -> dict[str, Any]:
    """Our numpy ``params`` tree from a folder's safetensors, tensor by tensor (see the module
    docstring for what is checked)."""
    return read_params(path, config, tensor_slots(config), rename=_without_buffers)


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
    return params_to_hf(params, tensor_slots(config))


def save_llama(
    path: str | os.PathLike[str],
    config: LlamaConfig,
    params: dict[str, Any],
    max_shard_bytes: int | None = None,
) -> None:
    """Write ``config.json`` and ``model.safetensors`` (or, with ``max_shard_bytes``, shards and
    their index) that ``transformers.AutoModelForCausalLM.from_pretrained`` loads; LoRA is folded
    into the kernels. A tied model writes no ``lm_head.weight``, as ``save_pretrained`` does."""
    write_checkpoint(path, config, params, tensor_slots, max_shard_bytes)
