"""Model features from task features: weights from real lengths, never from ids != 0."""

import numpy as np
import pytest
import tensorflow as tf

from tw_jax.models import GPT2Config, T5Config, model_for
from tw_jax.runtime.task_data import task_name

DECODER, ENCDEC = GPT2Config(), T5Config()


def _convert(examples, config, lengths):
    def gen():
        yield from examples

    spec = {k: tf.TensorSpec([None], tf.int32) for k in examples[0]}
    dataset = tf.data.Dataset.from_generator(gen, output_signature=spec)
    return list(model_for(config).convert_features(dataset, lengths).as_numpy_iterator())


def test_gpt2_token_zero_is_a_real_token():
    # "!" is id 0 in GPT-2: a block ending in it must still weigh every position.
    (out,) = _convert([{"targets": np.array([5, 0, 7, 0], np.int32)}], DECODER, {"targets": 4})
    np.testing.assert_array_equal(out["decoder_input_tokens"], [5, 0, 7, 0])
    np.testing.assert_array_equal(out["decoder_target_tokens"], [0, 7, 0, 0])
    np.testing.assert_array_equal(out["decoder_loss_weights"], [1, 1, 1, 0])
    np.testing.assert_array_equal(out["decoder_mask"], [1, 1, 1, 1])


def test_decoder_prompt_is_context_and_padding_has_no_weight():
    example = {"inputs": np.array([3, 4], np.int32), "targets": np.array([0, 9], np.int32)}
    (out,) = _convert([example], DECODER, {"inputs": 3, "targets": 3})
    np.testing.assert_array_equal(out["decoder_input_tokens"], [3, 4, 0, 9, 0, 0])
    np.testing.assert_array_equal(out["decoder_target_tokens"], [4, 0, 9, 0, 0, 0])
    # position 1 predicts the first target (0), position 2 the second (9); the prompt is free.
    np.testing.assert_array_equal(out["decoder_loss_weights"], [0, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(out["decoder_mask"], [1, 1, 1, 1, 0, 0])


def test_encoder_decoder_features():
    example = {"inputs": np.array([8, 9, 1], np.int32), "targets": np.array([5, 6, 1], np.int32)}
    (out,) = _convert([example], ENCDEC, {"inputs": 5, "targets": 4})
    np.testing.assert_array_equal(out["encoder_input_tokens"], [8, 9, 1, 0, 0])
    np.testing.assert_array_equal(out["encoder_mask"], [1, 1, 1, 0, 0])
    np.testing.assert_array_equal(out["decoder_target_tokens"], [5, 6, 1, 0])
    np.testing.assert_array_equal(out["decoder_input_tokens"], [0, 5, 6, 0])
    np.testing.assert_array_equal(out["decoder_loss_weights"], [1, 1, 1, 0])


def test_long_examples_are_truncated_to_the_length():
    example = {"inputs": np.arange(1, 9, dtype=np.int32), "targets": np.arange(1, 7, dtype=np.int32)}
    (out,) = _convert([example], ENCDEC, {"inputs": 4, "targets": 3})
    np.testing.assert_array_equal(out["encoder_input_tokens"], [1, 2, 3, 4])
    np.testing.assert_array_equal(out["decoder_target_tokens"], [1, 2, 3])
    np.testing.assert_array_equal(out["decoder_loss_weights"], [1, 1, 1])


def test_encoder_decoder_needs_an_inputs_length():
    dataset = tf.data.Dataset.from_tensors({"targets": tf.constant([1])})
    with pytest.raises(ValueError, match="'inputs' length"):
        model_for(ENCDEC).convert_features(dataset, {"targets": 4})


def test_task_name_objective():
    assert task_name("twiki_diffset_0809_{objective}", T5Config()) == "twiki_diffset_0809_ssm"
    assert task_name("twiki_mixreview_0910_{objective}", GPT2Config()) == "twiki_mixreview_0910_lm"
    assert task_name("my_task", GPT2Config()) == "my_task"
