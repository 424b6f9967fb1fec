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
from collections.abc import Mapping
from typing import Any

from tw_jax.models import abstract_variables, model_for
from tw_jax.models.variants import TRAINABLE, path_names

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


def train_step_flops(config: Any, batch_size: int, lengths: Mapping[str, int]) -> StepFlops:
    """Model FLOPs of one train step of ``config`` at ``batch_size`` and task feature ``lengths``.

    ``lengths`` are the trainer's ``TASK_FEATURE_LENGTHS`` (``{"targets": L}`` for GPT-2,
    ``{"inputs": L_in, "targets": L_out}`` for T5). Parameters come from shapes alone; the
    model's ``flop_layout()`` says which part each belongs to and which token stream
    (``encoder``/``decoder`` positions, its ``feature_lengths``) its matmul is applied to.
    """
    import flax.linen as nn
    import jax

    model = model_for(config)
    positions = model.feature_lengths(lengths)
    parts, locate = model.flop_layout()

    params = nn.unbox(abstract_variables(config)["params"])
    labels = model.param_labels(params)
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
