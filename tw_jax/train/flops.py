"""Model FLOPs of one train step, freezing-aware, and MFU against a device's peak.

MFU needs a FLOP count that does not depend on how the step is compiled (rematerialisation,
fused kernels): the *model* FLOPs, counted from the architecture. The usual ``6·N`` per token
overstates what a run with frozen parameters must compute, which is the point of LoRA and
K-Adapter, so the count here follows what each parameter's matmul needs:

- forward: ``2`` FLOPs per matmul weight per position it is applied to;
- backward, activation gradients: ``2`` more, for every matmul of a part of the model that has a
  trainable parameter in it or *upstream* of it (the gradient must flow through it to reach that
  parameter); a frozen part with nothing trainable below it gets no backward pass at all (a
  K-Adapter GPT-2's base layers: XLA drops their backward, since ``jax.lax.stop_gradient`` cuts
  it off);
- backward, weight gradients: ``2`` more for each *trainable* matmul weight.

So a fully trained model costs the familiar ``6·N`` per token, a frozen one between ``2·N`` and
``4·N``. "Parts" are coarse: a transformer block, an adapter, an embedding, the LM head; a block
whose own LoRA is the lowest trainable thing is counted as needing its backward entirely (an
over-count of at most its query/key/value activation gradients).

Matmul weights are the projection kernels, LoRA's ``A``/``B`` and a tied token embedding used
as the LM head (``2·V·d`` per decoder position); embedding lookups, position tables, layer norms
and biases cost no matmul FLOPs and are left out.

Attention's two activation-by-activation matmuls (``QKᵀ`` and ``probs·V``) add
``2·2·q_len·kv_len·(heads·head_dim)`` forward per layer and example (all ``q_len × kv_len``
pairs, causal masking not discounted, as PaLM's MFU counts them), and twice that backward when
the layer needs its backward.

Positions. GPT-2 applies everything to its ``L`` positions. T5 applies its encoder (and
K-Adapter, Modular, and every decoder cross-attention's key/value projections) to the
``L_in`` input positions and the rest of its decoder and the LM head to the ``L_out`` target
positions. Tokens of a step are ``batch·L`` (GPT-2) and ``batch·(L_in + L_out)`` (T5), the
trainer's ``real_tokens``; FLOPs per token divide by that.

The trainer's logged ``mfu`` and the benchmarks (``tools/bench_train*.py``) both use this count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

# Peak dense bf16 FLOP/s per device, by a substring of ``device_kind`` (first match wins). A
# v5e says "TPU v5 lite", a v5p plain "TPU v5" (what libtpu's v5p topologies report), so the
# lite entry precedes the v5 one.
PEAK_FLOPS: tuple[tuple[str, float], ...] = (
    ("TPU v6", 918e12),
    ("TPU v5 lite", 197e12),
    ("TPU v5e", 197e12),
    ("TPU v5", 459e12),
    ("TPU v4", 275e12),
    ("TPU v3", 123e12),
    ("H200", 989e12),
    ("H100", 989e12),
    ("A100", 312e12),
    ("V100", 125e12),
)

ENCODER, DECODER = "encoder", "decoder"


@dataclasses.dataclass(frozen=True)
class StepFlops:
    """FLOPs of one train step by kind, and the tokens it processes."""

    matmul_forward: float
    matmul_backward_activations: float
    matmul_backward_weights: float
    attention_forward: float
    attention_backward: float
    tokens: int

    @property
    def total(self) -> float:
        return (
            self.matmul_forward + self.matmul_backward_activations + self.matmul_backward_weights
            + self.attention_forward + self.attention_backward
        )

    @property
    def per_token(self) -> float:
        return self.total / self.tokens

    @property
    def forward(self) -> float:
        return self.matmul_forward + self.attention_forward


@dataclasses.dataclass
class _Part:
    """One coarse part of the model: its upstream parts, stream and attention shapes."""

    upstream: set[str]
    trainable: bool = False
    attention: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)


def train_step_flops(config: Any, batch_size: int, lengths: Mapping[str, int]) -> StepFlops:
    """Model FLOPs of one train step of ``config`` at ``batch_size`` and task feature ``lengths``.

    ``lengths`` are the trainer's ``TASK_FEATURE_LENGTHS`` (``{"targets": L}`` for GPT-2,
    ``{"inputs": L_in, "targets": L_out}`` for T5). Parameters come from shapes alone.
    """
    import flax.linen as nn
    import jax

    from tw_jax.models import abstract_variables
    from tw_jax.models.variants import TRAINABLE, param_labels, path_names
    from tw_jax.train.data import ENCDEC, model_kind, model_lengths

    kind = model_kind(config)
    sizes = model_lengths(kind, lengths)
    if kind == ENCDEC:
        positions = {ENCODER: sizes["encoder"], DECODER: sizes["decoder"]}
        parts, locate = _t5_parts(config)
    else:
        positions = {DECODER: sizes["decoder"]}
        parts, locate = _gpt2_parts(config)

    params = nn.unbox(abstract_variables(config)["params"])
    labels = param_labels(config, params)
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    label_leaves = jax.tree.leaves(labels)
    matmuls: list[tuple[str, str, int, bool]] = []
    for (path, leaf), label in zip(leaves, label_leaves, strict=True):
        names = path_names(path)
        trainable = label == TRAINABLE
        size = 1
        for dim in leaf.shape:
            size *= int(dim)
        for part, stream, is_matmul in locate(names):
            if part not in parts:
                raise ValueError(f"flops: parameter {'/'.join(names)} maps to unknown part {part}")
            parts[part].trainable |= trainable
            if is_matmul:
                matmuls.append((part, stream, size, trainable))

    def needs_backward(part: str) -> bool:
        return any(parts[p].trainable for p in (part, *parts[part].upstream))

    forward = act = weights = att_fwd = att_bwd = 0.0
    for part, stream, size, trainable in matmuls:
        n = batch_size * positions[stream]
        forward += 2.0 * size * n
        if needs_backward(part):
            act += 2.0 * size * n
        if trainable:
            weights += 2.0 * size * n
    for name, part in parts.items():
        for q_stream, kv_stream, width in part.attention:
            flops = 4.0 * batch_size * positions[q_stream] * positions[kv_stream] * width
            att_fwd += flops
            if needs_backward(name):
                att_bwd += 2.0 * flops
    tokens = batch_size * sum(positions.values())
    return StepFlops(forward, act, weights, att_fwd, att_bwd, tokens)


def train_flops_per_token(config: Any, lengths: Mapping[str, int]) -> float:
    """Model FLOPs per processed token of a train step (independent of the batch size)."""
    return train_step_flops(config, 1, lengths).per_token


Locator = Callable[[tuple[str, ...]], list[tuple[str, str, bool]]]


def _is_matmul_leaf(names: tuple[str, ...]) -> bool:
    return names[-1] in ("kernel", "lora_a", "lora_b")


def _gpt2_parts(config: Any) -> tuple[dict[str, _Part], Locator]:
    n, width = config.n_layer, config.n_embd
    blocks = [f"h_{i}" for i in range(n)]
    parts: dict[str, _Part] = {"embed": _Part(set())}
    for i, name in enumerate(blocks):
        parts[name] = _Part({"embed", *blocks[:i]}, attention=[(DECODER, DECODER, width)])
    parts["ln_f"] = _Part({"embed", *blocks})
    adapters: list[str] = []
    if config.kadapter is not None:
        taps = config.kadapter.tap_layers(n)
        for k, tap in enumerate(taps):
            name = f"kadapter/adapter_{k}"
            parts[name] = _Part(
                {"embed", *blocks[: tap + 1], *adapters}, attention=[(DECODER, DECODER, width)]
            )
            adapters.append(name)
        parts["kadapter/output_norm"] = _Part({"embed", *blocks[: taps[-1] + 1], *adapters})
    parts["head"] = _Part(set(parts))

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
    parts: dict[str, _Part], prefix: str, embed: str, num_layers: int, width: int,
    kadapter: Any = None,
) -> list[str]:
    """The parts of one T5 encoder stack (``prefix`` ``encoder`` or ``modular/encoder``)."""
    bias = f"{prefix}/relative_attention_bias"
    parts[bias] = _Part(set())
    blocks = [f"{prefix}/block_{i}" for i in range(num_layers)]
    for i, name in enumerate(blocks):
        parts[name] = _Part({embed, bias, *blocks[:i]}, attention=[(ENCODER, ENCODER, width)])
    parts[f"{prefix}/final_norm"] = _Part({embed, bias, *blocks})
    made = [bias, *blocks, f"{prefix}/final_norm"]
    if kadapter is not None:
        taps = kadapter.tap_layers(num_layers)
        adapters: list[str] = []
        for k, tap in enumerate(taps):
            name = f"{prefix}/kadapter/adapter_{k}"
            parts[name] = _Part(
                {embed, bias, *blocks[: tap + 1], *adapters}, attention=[(ENCODER, ENCODER, width)]
            )
            adapters.append(name)
        norm = f"{prefix}/kadapter/output_norm"
        parts[norm] = _Part({embed, bias, *blocks[: taps[-1] + 1], *adapters})
        made += [*adapters, norm]
    return made


def _t5_parts(config: Any) -> tuple[dict[str, _Part], Locator]:
    width = config.num_heads * config.d_kv
    parts: dict[str, _Part] = {"shared": _Part(set())}
    encoder_side = ["shared", *_t5_encoder_parts(
        parts, ENCODER, "shared", config.num_layers, width, config.kadapter
    )]
    if config.modular is not None:
        small = config.modular_encoder_config
        parts["modular/shared"] = _Part(set())
        made = _t5_encoder_parts(
            parts, "modular/encoder", "modular/shared", small.num_layers,
            small.num_heads * small.d_kv,
        )
        parts["modular/projection"] = _Part({"modular/shared", *made})
        encoder_side += ["modular/shared", *made, "modular/projection"]
    parts["decoder/relative_attention_bias"] = _Part(set())
    blocks = [f"decoder/block_{i}" for i in range(config.decoder_layers)]
    for i, name in enumerate(blocks):
        parts[name] = _Part(
            {"shared", "decoder/relative_attention_bias", *blocks[:i], *encoder_side},
            attention=[(DECODER, DECODER, width), (DECODER, ENCODER, width)],
        )
        # Cross-attention keys and values: projections of the encoder output.
        parts[f"{name}/cross_kv"] = _Part(set(encoder_side))
    parts["decoder/final_norm"] = _Part(set(parts))
    parts["head"] = _Part(set(parts))

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


def peak_flops_per_device(device_kind: str) -> float | None:
    """Peak dense bf16 FLOP/s of one device named ``device_kind``; None when unknown (CPUs)."""
    kind = device_kind.lower()
    for name, peak in PEAK_FLOPS:
        if name.lower() in kind:
            return peak
    return None


def mfu(flops_per_second: float, peak_per_device: float | None, devices: int = 1) -> float | None:
    """Model FLOPs utilisation: achieved model FLOP/s over the devices' summed peak."""
    if not peak_per_device:
        return None
    return flops_per_second / (peak_per_device * devices)
