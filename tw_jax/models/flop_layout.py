"""Where each parameter of GPT-2, T5, BART, the Llama-style decoders and Gemma sits, for the
freezing-aware model FLOP count.

:mod:`tw_jax.train.flops` counts a step's FLOPs from *parts* (a transformer block, an adapter,
an embedding, the LM head): each part's upstream parts (whose trainable parameters make its
backward pass necessary) and its attention shapes, and for each parameter the part and the
token stream (``encoder`` or ``decoder`` positions) its matmul is applied to. This module holds
those layouts; a model family returns its own from ``flop_layout()``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

ENCODER, DECODER = "encoder", "decoder"


@dataclasses.dataclass
class Part:
    """One coarse part of the model: its upstream parts, stream and attention shapes."""

    upstream: set[str]
    trainable: bool = False
    attention: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)


Locator = Callable[[tuple[str, ...]], list[tuple[str, str, bool]]]


def _is_matmul_leaf(names: tuple[str, ...]) -> bool:
    return names[-1] in ("kernel", "lora_a", "lora_b")


def gpt2_layout(config: Any) -> tuple[dict[str, Part], Locator]:
    n, width = config.n_layer, config.n_embd
    blocks = [f"h_{i}" for i in range(n)]
    parts: dict[str, Part] = {"embed": Part(set())}
    for i, name in enumerate(blocks):
        parts[name] = Part({"embed", *blocks[:i]}, attention=[(DECODER, DECODER, width)])
    parts["ln_f"] = Part({"embed", *blocks})
    adapters: list[str] = []
    if config.kadapter is not None:
        taps = config.kadapter.tap_layers(n)
        for k, tap in enumerate(taps):
            name = f"kadapter/adapter_{k}"
            parts[name] = Part(
                {"embed", *blocks[: tap + 1], *adapters}, attention=[(DECODER, DECODER, width)]
            )
            adapters.append(name)
        parts["kadapter/output_norm"] = Part({"embed", *blocks[: taps[-1] + 1], *adapters})
    parts["head"] = Part(set(parts))

    def locate(names: tuple[str, ...]) -> list[tuple[str, str, bool]]:
        top = names[0]
        if top == "wte":  # looked up at the bottom, and the tied LM head at the top
            return [("embed", DECODER, False), ("head", DECODER, True)]
        if top == "wpe":
            return [("embed", DECODER, False)]
        part = f"kadapter/{names[1]}" if top == "kadapter" else top
        return [(part, DECODER, _is_matmul_leaf(names))]

    return parts, locate


def _t5_encoder_parts(
    parts: dict[str, Part], prefix: str, embed: str, num_layers: int, width: int,
    kadapter: Any = None,
) -> list[str]:
    """The parts of one T5 encoder stack (``prefix`` ``encoder`` or ``modular/encoder``)."""
    bias = f"{prefix}/relative_attention_bias"
    parts[bias] = Part(set())
    blocks = [f"{prefix}/block_{i}" for i in range(num_layers)]
    for i, name in enumerate(blocks):
        parts[name] = Part({embed, bias, *blocks[:i]}, attention=[(ENCODER, ENCODER, width)])
    parts[f"{prefix}/final_norm"] = Part({embed, bias, *blocks})
    made = [bias, *blocks, f"{prefix}/final_norm"]
    if kadapter is not None:
        taps = kadapter.tap_layers(num_layers)
        adapters: list[str] = []
        for k, tap in enumerate(taps):
            name = f"{prefix}/kadapter/adapter_{k}"
            parts[name] = Part(
                {embed, bias, *blocks[: tap + 1], *adapters}, attention=[(ENCODER, ENCODER, width)]
            )
            adapters.append(name)
        norm = f"{prefix}/kadapter/output_norm"
        parts[norm] = Part({embed, bias, *blocks[: taps[-1] + 1], *adapters})
        made += [*adapters, norm]
    return made


def t5_layout(config: Any) -> tuple[dict[str, Part], Locator]:
    width = config.num_heads * config.d_kv
    parts: dict[str, Part] = {"shared": Part(set())}
    encoder_side = ["shared", *_t5_encoder_parts(
        parts, ENCODER, "shared", config.num_layers, width, config.kadapter
    )]
    if config.modular is not None:
        small = config.modular_encoder_config
        parts["modular/shared"] = Part(set())
        made = _t5_encoder_parts(
            parts, "modular/encoder", "modular/shared", small.num_layers,
            small.num_heads * small.d_kv,
        )
        parts["modular/projection"] = Part({"modular/shared", *made})
        encoder_side += ["modular/shared", *made, "modular/projection"]
    parts["decoder/relative_attention_bias"] = Part(set())
    blocks = [f"decoder/block_{i}" for i in range(config.decoder_layers)]
    for i, name in enumerate(blocks):
        parts[name] = Part(
            {"shared", "decoder/relative_attention_bias", *blocks[:i], *encoder_side},
            attention=[(DECODER, DECODER, width), (DECODER, ENCODER, width)],
        )
        # Cross-attention keys and values: projections of the encoder output.
        parts[f"{name}/cross_kv"] = Part(set(encoder_side))
    parts["decoder/final_norm"] = Part(set(parts))
    parts["head"] = Part(set(parts))

    def locate(names: tuple[str, ...]) -> list[tuple[str, str, bool]]:
        top, matmul = names[0], _is_matmul_leaf(names)
        if top == "shared":
            found = [("shared", ENCODER, False)]
            return found + ([("head", DECODER, True)] if config.tie_word_embeddings else [])
        if top == "lm_head":
            return [("head", DECODER, matmul)]
        if top == "encoder":
            if names[1] == "kadapter":
                return [(f"encoder/kadapter/{names[2]}", ENCODER, matmul)]
            return [(f"encoder/{names[1]}", ENCODER, matmul)]
        if top == "modular":
            if names[1] == "encoder":
                return [(f"modular/encoder/{names[2]}", ENCODER, matmul)]
            return [(f"modular/{names[1]}", ENCODER, matmul)]
        if top == "decoder":
            block = f"decoder/{names[1]}"
            if len(names) > 3 and names[2] == "cross_attn" and names[3] in ("key", "value"):
                return [(f"{block}/cross_kv", ENCODER, matmul)]
            return [(block, DECODER, matmul)]
        raise ValueError(f"flops: unexpected T5 parameter {'/'.join(names)}")

    return parts, locate




def bart_layout(config: Any) -> tuple[dict[str, Part], Locator]:
    """BART: as T5's stacks, with learned positions and ``layernorm_embedding`` (no matmuls) as
    each stack's ``embed`` part, and ``final_logits_bias`` beside the LM head."""
    width = config.d_model
    parts: dict[str, Part] = {"shared": Part(set()), "encoder/embed": Part(set())}
    encoder = [f"encoder/layer_{i}" for i in range(config.encoder_layers)]
    for i, name in enumerate(encoder):
        parts[name] = Part({"shared", "encoder/embed", *encoder[:i]},
                           attention=[(ENCODER, ENCODER, width)])
    encoder_side = ["shared", "encoder/embed", *encoder]
    parts["decoder/embed"] = Part(set())
    decoder = [f"decoder/layer_{i}" for i in range(config.decoder_layers)]
    for i, name in enumerate(decoder):
        parts[name] = Part({"shared", "decoder/embed", *decoder[:i], *encoder_side},
                           attention=[(DECODER, DECODER, width), (DECODER, ENCODER, width)])
        parts[f"{name}/cross_kv"] = Part(set(encoder_side))  # projections of the encoder output
    parts["head"] = Part(set(parts))

    def locate(names: tuple[str, ...]) -> list[tuple[str, str, bool]]:
        top, matmul = names[0], _is_matmul_leaf(names)
        if top == "shared":
            found = [("shared", ENCODER, False)]
            return found + ([("head", DECODER, True)] if config.tie_word_embeddings else [])
        if top in ("lm_head", "final_logits_bias"):
            return [("head", DECODER, matmul)]
        if top in ("encoder", "decoder"):
            stream = ENCODER if top == "encoder" else DECODER
            if not names[1].startswith("layer_"):  # embed_positions, layernorm_embedding
                return [(f"{top}/embed", stream, False)]
            block = f"{top}/{names[1]}"
            if len(names) > 3 and names[2] == "encoder_attn" and names[3] in ("key", "value"):
                return [(f"{block}/cross_kv", ENCODER, matmul)]
            return [(block, stream, matmul)]
        raise ValueError(f"flops: unexpected BART parameter {'/'.join(names)}")

    return parts, locate


def llama_layout(config: Any) -> tuple[dict[str, Part], Locator]:
    """The Llama-style decoders (Llama, Qwen2, Qwen3, Mistral): GPT-2's layout without learned
    positions. Each parameter counts at its own size, so grouped-query attention's smaller key
    and value kernels (``num_key_value_heads`` heads) and the gated MLP's three kernels (gate,
    up, down) count as they are; attention's ``QKᵀ`` and ``probs·V`` run over the query heads
    (``num_attention_heads * head_dim``), the keys and values being repeated to them. A sliding
    window is not discounted (as causal masking is not). A tied embedding is the LM head too."""
    blocks = [f"layer_{i}" for i in range(config.num_hidden_layers)]
    width = config.num_attention_heads * config.head_dim
    parts: dict[str, Part] = {"embed": Part(set())}
    for i, name in enumerate(blocks):
        parts[name] = Part({"embed", *blocks[:i]}, attention=[(DECODER, DECODER, width)])
    parts["final_norm"] = Part({"embed", *blocks})
    parts["head"] = Part(set(parts))

    def locate(names: tuple[str, ...]) -> list[tuple[str, str, bool]]:
        top, matmul = names[0], _is_matmul_leaf(names)
        if top == "embed_tokens":
            found = [("embed", DECODER, False)]
            return found + ([("head", DECODER, True)] if config.tie_word_embeddings else [])
        if top == "lm_head":
            return [("head", DECODER, matmul)]
        if top in parts:  # layer_i, final_norm
            return [(top, DECODER, matmul)]
        raise ValueError(f"flops: unexpected {config.model_type} parameter {'/'.join(names)}")

    return parts, locate


def gemma_layout(config: Any) -> tuple[dict[str, Part], Locator]:
    """Gemma 3's text decoder: Llama's layout (its parameter tree has the same parts: the
    embedding, ``layer_i``, ``final_norm``, the tied head). Its extra norms (q/k norms, the
    norms after attention and the MLP) and the embedding's ``sqrt(hidden_size)`` scale are no
    matmuls; sliding-window layers are not discounted (as in Mistral), and attention runs over
    the query heads (``num_attention_heads * head_dim``)."""
    return llama_layout(config)
