"""tw_jax's models behind T5X's model API, for every family (T5, BART, GPT-2 and the protocol's
third, from tests/train/third_family): the same parameters, logits and losses as tw_jax's own
calls, and T5X's decoders over our cache decoding what tw_jax decodes."""

from __future__ import annotations

import functools
import sys
from dataclasses import replace
from pathlib import Path

import flax.core
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

pytest.importorskip("t5x")

import seqio  # noqa: E402
from t5x import decoding as t5x_decoding  # noqa: E402
from t5x import models as t5x_models  # noqa: E402

import tw_jax.t5x  # noqa: E402
from tw_jax.evaluate.seqio_eval import PROMPT_LENGTH  # noqa: E402
from tw_jax.models import (  # noqa: E402
    BARTConfig,
    GPT2Config,
    KAdapterConfig,
    LoRAConfig,
    T5Config,
    model_for,
)
from tw_jax.t5x.models import left_aligned_prompts  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train" / "third_family"))
import rope_family  # noqa: E402

EOS = 1
GPT2 = replace(GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=3, n_head=4,
                          initializer_range=0.2, dropout_rate=0.0, eos_token_id=EOS),
               lora=LoRAConfig())
T5 = replace(T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=3, num_heads=4,
                      dropout_rate=0.0, initializer_factor=4.0), kadapter=KAdapterConfig())
BART = BARTConfig(vocab_size=64, max_position_embeddings=64, d_model=32, encoder_layers=2,
                  decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                  encoder_ffn_dim=64, decoder_ffn_dim=64, dropout_rate=0.0, init_std=0.2)
# the protocol's third family (tests/train/third_family: rotary positions, RMSNorm), with LoRA
ROPE = rope_family.RopeConfig(vocab_size=64, n_positions=64, d_model=32, n_layer=2, n_head=4,
                              mlp_dim=64, initializer_range=0.2, eos_token_id=EOS,
                              lora=LoRAConfig())
CONFIGS = {"gpt2-lora": GPT2, "t5-kadapter": T5, "bart": BART, "rope-lora": ROPE}
WIDTH = 6


def _t5x_model(config, **kwargs):
    vocabulary = seqio.PassThroughVocabulary(size=config.vocab_size, eos_id=EOS)
    return tw_jax.t5x.model(config, vocabulary, None, **kwargs)


def _perturbed(params):
    """New parameters (LoRA's B starts at zero) made non-zero, so a variant changes outputs."""
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(7), len(leaves))
    return jax.tree.unflatten(tree, [x + 0.05 * jax.random.normal(k, x.shape, x.dtype)
                                     for x, k in zip(leaves, keys, strict=True)])


def _batch(config, rows=3):
    rng = np.random.default_rng(0)
    tokens = rng.integers(2, config.vocab_size, (rows, 8)).astype(np.int32)
    lengths = np.array([8, 5, 3][:rows])
    mask = (np.arange(8)[None, :] < lengths[:, None]).astype(np.int32)
    if isinstance(model_for(config), tw_jax.t5x.models.ProtocolEncoderDecoder):
        targets = rng.integers(2, config.vocab_size, (rows, WIDTH)).astype(np.int32)
        return {"encoder_input_tokens": tokens * mask, "encoder_mask": mask,
                "decoder_target_tokens": targets,
                "decoder_input_tokens": np.concatenate(
                    [np.zeros((rows, 1), np.int32), targets[:, :-1]], axis=1),
                "decoder_loss_weights": np.ones((rows, WIDTH), np.int32),
                "decoder_mask": np.ones((rows, WIDTH), np.int32)}
    following = np.concatenate([tokens[:, 1:], np.zeros((rows, 1), np.int32)], axis=1)
    return {"decoder_input_tokens": tokens * mask, "decoder_target_tokens": following * mask,
            "decoder_loss_weights": np.roll(mask, -1, axis=1) * (np.arange(8) < 7),
            "decoder_mask": mask, PROMPT_LENGTH: lengths.astype(np.int32)}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def setup(request):
    config = CONFIGS[request.param]
    model = _t5x_model(config)
    shapes = {"encoder_input_tokens": (3, 8), "decoder_input_tokens": (3, WIDTH if isinstance(
        model, tw_jax.t5x.EncoderDecoderModel) else 8)}
    variables = model.get_initial_variables(jax.random.key(0), shapes)
    params = _perturbed(variables["params"])
    return request.param, config, model, variables, params


def test_t5x_variables_are_the_modules_own_with_their_logical_axes(setup):
    _, config, model, variables, _ = setup
    tw_model = model_for(config)
    boxed = tw_model.module.init(jax.random.key(0), *tw_model.dummy_inputs(3, 8))
    own = traverse_util.flatten_dict(flax.core.unfreeze(nn.unbox(boxed["params"])), sep="/")
    t5x = traverse_util.flatten_dict(flax.core.unfreeze(variables["params"]), sep="/")
    assert sorted(own) == sorted(t5x)
    for name, value in own.items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(t5x[name]), err_msg=name)
    axes = jax.tree.leaves(boxed["params"], is_leaf=lambda x: isinstance(x, nn.Partitioned))
    t5x_axes = jax.tree.leaves(tw_jax.t5x.models.flax_partitioning.get_axis_names(
        variables["params_axes"]), is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
    assert [tuple(a.names) for a in axes] == [tuple(spec) for spec in t5x_axes]


def test_t5x_loss_is_the_weighted_cross_entropy_of_tw_jax_logits(setup):
    _, config, model, _, params = setup
    batch = {k: jnp.asarray(v) for k, v in _batch(config).items()}
    loss, metrics = jax.jit(lambda p, b: model.loss_fn(p, b, None))(params, batch)
    logits = jax.jit(lambda p, b: model_for(config).logits(p, b, deterministic=True, rng=None))(
        params, batch)
    logp = jax.nn.log_softmax(logits)
    nll = -jnp.take_along_axis(logp, batch["decoder_target_tokens"][..., None], -1)[..., 0]
    expected = float(jnp.sum(nll * batch["decoder_loss_weights"]))
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    scores = model.score_batch(params, batch)
    np.testing.assert_allclose(np.asarray(scores),
                               -np.asarray(jnp.sum(nll * batch["decoder_loss_weights"], -1)),
                               rtol=1e-5)


def test_t5x_greedy_decoding_is_tw_jax_greedy_decoding(setup):
    """T5X's temperature sampling at top-k 1 over our cache gives tw_jax's own greedy tokens."""
    _, config, _, _, params = setup
    model = _t5x_model(config, decode_fn=functools.partial(t5x_decoding.temperature_sample,
                                                           topk=1))
    batch = {k: jnp.asarray(v) for k, v in _batch(config).items()}
    decodes, _ = model.predict_batch_with_aux(params, batch, decoder_params={"eos_id": -1})
    tw_model = model_for(config)
    if "encoder_input_tokens" in batch:
        ids, mask, steps = batch["encoder_input_tokens"], batch["encoder_mask"], WIDTH
    else:
        prompts = [np.asarray(row[:n]) for row, n in zip(batch["decoder_input_tokens"],
                                                          batch[PROMPT_LENGTH], strict=True)]
        ids, mask = tw_model.prompt_rows(prompts, len(prompts), 8)
        steps = 8
    ours = tw_model.decode(params, ids, mask, max_new_tokens=steps, eos_id=None)
    np.testing.assert_array_equal(np.asarray(decodes), np.asarray(ours))


def test_t5x_beam_search_scores_are_the_teacher_forced_log_likelihoods(setup):
    """The best beam's score (no brevity penalty, no EOS) is the log-likelihood tw_jax's own
    teacher-forced forward pass gives the decoded tokens: the cache holds what a full pass
    computes, at every beam."""
    name, config, _, _, params = setup
    model = _t5x_model(config, **({"decode_fn": functools.partial(
        t5x_decoding.beam_search, alpha=0.0)} if "encoder_input_tokens" in _batch(config) else {
        "decode_fn": functools.partial(t5x_decoding.beam_search, alpha=0.0)}))
    batch = {k: jnp.asarray(v) for k, v in _batch(config).items()}
    if PROMPT_LENGTH in batch:  # full-length prompts: decoding and scoring rows coincide
        batch[PROMPT_LENGTH] = jnp.full_like(batch[PROMPT_LENGTH], 8)
        batch["decoder_mask"] = jnp.ones_like(batch["decoder_mask"])
    decodes, aux = model.predict_batch_with_aux(params, batch, num_decodes=3,
                                                return_all_decodes=True,
                                                decoder_params={"eos_id": -1})
    assert decodes.shape[:2] == (3, 3)
    best, best_score = decodes[:, -1], aux["scores"][:, -1]
    tw_model = model_for(config)
    if "encoder_input_tokens" in batch:
        start = jnp.full((3, 1), tw_model.decoder_start_id, jnp.int32)
        scored = {**batch, "decoder_target_tokens": best,
                  "decoder_input_tokens": jnp.concatenate([start, best[:, :-1]], axis=1),
                  "decoder_loss_weights": jnp.ones_like(best), "decoder_mask": jnp.ones_like(best)}
    else:
        row = jnp.concatenate([batch["decoder_input_tokens"], best], axis=1)
        weights = jnp.concatenate([jnp.zeros((3, 7), jnp.int32), jnp.ones((3, 8), jnp.int32),
                                   jnp.zeros((3, 1), jnp.int32)], axis=1)
        scored = {"decoder_input_tokens": row, "decoder_mask": jnp.ones_like(row),
                  "decoder_target_tokens": jnp.concatenate([row[:, 1:], row[:, :1] * 0], axis=1),
                  "decoder_loss_weights": weights}
    np.testing.assert_allclose(np.asarray(best_score),
                               np.asarray(model.score_batch(params, scored)), rtol=2e-4,
                               err_msg=name)


def test_left_aligned_prompts_end_in_the_last_column():
    tokens = jnp.array([[5, 6, 7, 9], [3, 4, 0, 0], [8, 0, 0, 0]])
    ids, mask = left_aligned_prompts(tokens, jnp.array([3, 2, 0]))
    np.testing.assert_array_equal(np.asarray(ids), [[0, 5, 6, 7], [0, 0, 3, 4], [0, 0, 0, 8]])
    np.testing.assert_array_equal(np.asarray(mask), [[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]])


def test_t5x_packs_with_our_converter_and_each_example_keeps_its_loss(setup):
    """T5X's ``pack=True`` builds our packed features; T5X's summed loss over packed rows is the
    sum of every example's loss on a row of its own."""
    import tensorflow as tf

    _, config, model, _, params = setup
    rng = np.random.default_rng(3)
    examples = [{"inputs": rng.integers(2, 64, int(rng.integers(2, 6))).astype(np.int32),
                 "targets": rng.integers(2, 64, int(rng.integers(2, 5))).astype(np.int32)}
                for _ in range(6)]
    spec = {k: tf.TensorSpec([None], tf.int32) for k in ("inputs", "targets")}
    lengths = {"inputs": 12, "targets": 8}

    def stream(pack: bool, rows: int) -> list:
        ds = tf.data.Dataset.from_generator(lambda: iter(examples), output_signature=spec)
        converted = model.FEATURE_CONVERTER_CLS(pack=pack)(ds, lengths)
        return [{k: jnp.asarray(v) for k, v in batch.items() if k != PROMPT_LENGTH}
                for batch in converted.batch(rows).as_numpy_iterator()]

    packed = stream(True, 2)
    assert "decoder_segment_ids" in packed[0] and len(packed) < len(examples) // 2 + 1
    loss = jax.jit(lambda p, batch: model.loss_fn(p, batch, None)[0])  # one compile a shape
    total = sum(float(loss(params, batch)) for batch in packed)
    alone = sum(float(loss(params, batch)) for batch in stream(False, 1))
    np.testing.assert_allclose(total, alone, rtol=2e-5)


def test_the_t5x_class_follows_the_models_shape():
    assert isinstance(_t5x_model(GPT2), t5x_models.DecoderOnlyModel)
    assert isinstance(_t5x_model(T5), t5x_models.EncoderDecoderModel)
    assert isinstance(_t5x_model(BART), t5x_models.EncoderDecoderModel)
    assert isinstance(_t5x_model(ROPE), t5x_models.DecoderOnlyModel)
    with pytest.raises(TypeError, match="not an encoder-decoder"):
        tw_jax.t5x.EncoderDecoderModel(GPT2, None, None)
