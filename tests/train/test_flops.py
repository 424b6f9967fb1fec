"""The model-FLOP count of a train step (tw_jax.train.flops) against hand computations.

Tiny configs whose every matmul can be listed: for each, the FLOPs are written out as the module
docstring defines them (2 forward, 2 activation-gradient where a trainable parameter lies at or
below the part, 2 weight-gradient where the weight trains, per weight and position; attention
4·q·kv·width forward, twice that backward).
"""

from __future__ import annotations

import dataclasses

import pytest

from tw_jax.models import GPT2Config, KAdapterConfig, LoRAConfig, T5Config
from tw_jax.train.flops import mfu, peak_flops_per_device, train_flops_per_token, train_step_flops

# GPT-2: d = 8, 2 layers, vocabulary 16, L = 4 positions, batch 1.
GPT2 = GPT2Config(vocab_size=16, n_positions=32, n_embd=8, n_layer=2, n_head=2)
D, L = 8, 4
BLOCK = 4 * D * D + D * 4 * D + 4 * D * D  # q, k, v, out + c_fc + c_proj = 768
HEAD = 16 * D  # the tied embedding as LM head = 128
ATTENTION = 4 * L * L * D  # QK^T and probs·V of one layer and example, forward = 512


def test_gpt2_diff_is_six_n_plus_attention():
    flops = train_step_flops(GPT2, 1, {"targets": L})
    matmul = 2 * BLOCK + HEAD  # 1664
    assert flops.matmul_forward == 2 * matmul * L
    assert flops.total == 6 * matmul * L + 3 * 2 * ATTENTION  # 43,008
    assert flops.total == 43_008
    assert flops.tokens == L
    assert flops.per_token == 10_752
    assert train_flops_per_token(GPT2, {"targets": L}) == 10_752


def test_gpt2_lora_adds_only_its_weight_gradients():
    config = dataclasses.replace(GPT2, lora=LoRAConfig(rank=2))
    lora = 2 * (D * 2 + 2 * D)  # A (8, 2) and B (2, 2 heads, 4) on query and value, per layer
    matmul = 2 * BLOCK + HEAD + 2 * lora  # 1792
    flops = train_step_flops(config, 1, {"targets": L})
    # Every block holds LoRA weights: all need their backward; only LoRA gets weight gradients.
    assert flops.matmul_forward == flops.matmul_backward_activations == 2 * matmul * L
    assert flops.matmul_backward_weights == 2 * (2 * lora) * L
    assert flops.total == 4 * matmul * L + 2 * 2 * lora * L + 3 * 2 * ATTENTION == 32_768


def test_gpt2_kadapter_skips_the_frozen_base_backward():
    config = dataclasses.replace(GPT2, kadapter=KAdapterConfig(num_adapters=1))
    flops = train_step_flops(config, 1, {"targets": L})
    base = 2 * 2 * BLOCK * L  # forward only: nothing trainable below the base blocks
    adapter = 6 * BLOCK * L  # one full GPT-2 block, trained
    head = 4 * HEAD * L  # forward + activation gradient (the adapter is below), frozen weight
    attention = 3 * ATTENTION + 2 * ATTENTION  # three forward, the adapter's backward
    assert flops.total == base + adapter + head + attention == 35_328


# T5: d_model 8, 2 heads of 4, d_ff 16, one layer each side, L_in = 4, L_out = 2, batch 1.
T5 = T5Config(vocab_size=16, d_model=8, d_kv=4, num_heads=2, d_ff=16, num_layers=1)
ENC_BLOCK = 4 * 8 * 8 + 2 * 8 * 16  # attention + MLP = 512, at the 4 input positions
CROSS_KV = 2 * 8 * 8  # cross-attention key and value: projections of the encoder output
DEC_AT_TARGETS = 4 * 8 * 8 + 2 * 8 * 8 + 2 * 8 * 16 + 16 * 8  # self, cross q/out, MLP, head
T5_ATTENTION = 4 * 4 * 4 * 8 + 4 * 2 * 2 * 8 + 4 * 2 * 4 * 8  # enc self, dec self, cross = 896


def test_t5_counts_each_stack_at_its_own_positions():
    flops = train_step_flops(T5, 1, {"inputs": 4, "targets": 2})
    expected = 6 * (ENC_BLOCK + CROSS_KV) * 4 + 6 * DEC_AT_TARGETS * 2 + 3 * T5_ATTENTION
    assert flops.total == expected == 27_264
    assert flops.tokens == 6
    assert flops.per_token == 27_264 / 6


def test_t5_frozen_encoder_keeps_activation_gradients_for_the_shared_embedding():
    config = dataclasses.replace(T5, freeze="encoder")
    flops = train_step_flops(config, 1, {"inputs": 4, "targets": 2})
    encoder = 4 * ENC_BLOCK * 4  # forward + activation gradients (the embedding below trains)
    assert flops.total == encoder + 6 * CROSS_KV * 4 + 6 * DEC_AT_TARGETS * 2 + 3 * T5_ATTENTION
    assert flops.total == 23_168


def test_per_token_does_not_depend_on_the_batch():
    one = train_step_flops(GPT2, 1, {"targets": L})
    seven = train_step_flops(GPT2, 7, {"targets": L})
    assert seven.total == 7 * one.total
    assert seven.per_token == one.per_token


@pytest.mark.parametrize(
    ("kind", "peak"),
    [("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H200", 989e12), ("NVIDIA A100-SXM4-80GB", 312e12),
     ("Tesla V100-SXM2-32GB", 125e12), ("TPU v4", 275e12), ("TPU v5 lite", 197e12),
     ("TPU v5p", 459e12), ("TPU v5", 459e12), ("TPU v6 lite", 918e12), ("cpu", None)],
)
def test_peak_table(kind, peak):
    assert peak_flops_per_device(kind) == peak


def test_mfu():
    assert mfu(494.5e12, 989e12) == pytest.approx(0.5)
    assert mfu(989e12, 989e12, devices=2) == pytest.approx(0.5)
    assert mfu(1e12, None) is None
