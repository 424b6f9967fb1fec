"""Packed rows (several examples a row, segment ids and positions): each example's loss and
scored tokens are what they are when it has a row of its own, for every family and variant."""

from __future__ import annotations

from dataclasses import replace

import flax.linen as nn
import jax
import numpy as np
import pytest
import tensorflow as tf

from tw_jax.models import (
    BARTConfig,
    GPT2Config,
    KAdapterConfig,
    LoRAConfig,
    ModularConfig,
    T5Config,
    model_for,
)

GPT2 = GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=3, n_head=4,
                  initializer_range=0.2, dropout_rate=0.0)
T5 = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=3, num_heads=4,
              dropout_rate=0.0)
BART = BARTConfig(vocab_size=64, max_position_embeddings=64, d_model=32, encoder_layers=2,
                  decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                  encoder_ffn_dim=64, decoder_ffn_dim=64, dropout_rate=0.0)
CONFIGS = {
    "gpt2": GPT2, "gpt2-lora": replace(GPT2, lora=LoRAConfig()),
    "gpt2-kadapter": replace(GPT2, kadapter=KAdapterConfig()),
    "t5": T5, "t5-kadapter": replace(T5, kadapter=KAdapterConfig()),
    "t5-modular": replace(T5, modular=ModularConfig(d_model=16, d_kv=4, d_ff=32, num_layers=1,
                                                    num_heads=2)),
    "bart": BART,
}
LENGTHS = {"inputs": 24, "targets": 16}


def _examples(encoder_decoder: bool, count: int = 9) -> list[dict[str, np.ndarray]]:
    """Examples of varied lengths; GPT-2's rows hold token 0 ("!") too, inside and at the end."""
    rng = np.random.default_rng(0)
    examples = []
    for i in range(count):
        low = 1 if encoder_decoder else 0
        targets = rng.integers(low, 64, int(rng.integers(2, 9))).astype(np.int32)
        if not encoder_decoder and i % 3 == 0:
            targets[-1] = 0
        example = {"targets": targets}
        if encoder_decoder or i % 2:
            example["inputs"] = rng.integers(1, 64, int(rng.integers(1, 8))).astype(np.int32)
        else:
            example["inputs"] = np.zeros([0], np.int32)
        examples.append(example)
    return examples


def _dataset(examples):
    def generate():
        yield from examples

    spec = {"inputs": tf.TensorSpec([None], tf.int32), "targets": tf.TensorSpec([None], tf.int32)}
    return tf.data.Dataset.from_generator(generate, output_signature=spec)


def _per_token(logits_fn, params, batch):
    logp = jax.nn.log_softmax(logits_fn(params, batch))
    nll = -np.take_along_axis(np.asarray(logp), batch["decoder_target_tokens"][..., None],
                              -1)[..., 0]
    return nll * batch["decoder_loss_weights"]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_each_example_of_a_packed_row_scores_as_alone(name):
    config = CONFIGS[name]
    model = model_for(config)
    encoder_decoder = hasattr(model, "decoder_start_id")
    examples = _examples(encoder_decoder)
    lengths = dict(LENGTHS) if encoder_decoder else {"inputs": 8, "targets": 16}
    params = nn.unbox(jax.jit(model.module.init)(jax.random.key(1), *model.dummy_inputs(1, 8))["params"])
    if name.endswith("lora"):  # B = 0 at initialisation would hide LoRA
        params = jax.tree_util.tree_map_with_path(
            lambda p, x: x + 0.1 if "lora_b" in str(p) else x, params)

    # jitted once: op by op, a K-Adapter T5 takes minutes on a CPU; a compile per batch shape
    logits_fn = jax.jit(lambda p, b: model.logits(p, b, deterministic=True, rng=None))
    alone = []
    for batch in model.convert_features(_dataset(examples), lengths).batch(1).as_numpy_iterator():
        losses = _per_token(logits_fn, params, batch)
        alone.append((float(losses.sum()), int(batch["decoder_loss_weights"].sum())))

    packed, rows = [], 0
    stream = model.convert_features(_dataset(examples), lengths, pack=True).batch(2)
    for batch in stream.as_numpy_iterator():
        losses = _per_token(logits_fn, params, batch)
        segments = batch["decoder_segment_ids"]
        for row in range(len(segments)):
            rows += 1
            for segment in range(1, int(segments[row].max()) + 1):
                where = segments[row] == segment
                packed.append((float(losses[row][where].sum()),
                               int(batch["decoder_loss_weights"][row][where].sum())))
    assert rows < len(examples)  # several examples did share rows
    assert [n for _, n in packed] == [n for _, n in alone]
    np.testing.assert_allclose([s for s, _ in packed], [s for s, _ in alone], rtol=2e-5,
                               atol=1e-4)


def test_packed_rows_keep_every_token_even_gpt2s_zero():
    model = model_for(GPT2)
    examples = [{"inputs": np.zeros([0], np.int32), "targets": np.array([5, 0, 7, 0], np.int32)},
                {"inputs": np.array([3], np.int32), "targets": np.array([0, 9], np.int32)}]
    [row] = list(model.convert_features(_dataset(examples), {"inputs": 4, "targets": 8},
                                        pack=True).batch(1).as_numpy_iterator())
    np.testing.assert_array_equal(row["decoder_input_tokens"][0][:7], [5, 0, 7, 0, 3, 0, 9])
    np.testing.assert_array_equal(row["decoder_segment_ids"][0][:8], [1, 1, 1, 1, 2, 2, 2, 0])
    np.testing.assert_array_equal(row["decoder_positions"][0][:7], [0, 1, 2, 3, 0, 1, 2])
    # next-token targets inside each example only; a prompt token is scored only as context: its
    # last one (3) predicts the first target (0), which counts, as unpacked
    np.testing.assert_array_equal(row["decoder_target_tokens"][0][:7], [0, 7, 0, 0, 0, 9, 0])
    np.testing.assert_array_equal(row["decoder_loss_weights"][0][:7], [1, 1, 1, 0, 1, 1, 0])
