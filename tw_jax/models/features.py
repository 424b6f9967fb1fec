"""Model features from task features: the feature converters of the two model shapes.

Model features are derived from each example's *real length*, taken before padding, never from
``ids != 0``: GPT-2's id 0 is the token "!", so seqio's ``*_loss_weights`` (which treat 0 as
padding) would silently drop it. Both shapes give the same four arrays, ``(batch, length)``:

- encoder-decoder (:func:`encoder_decoder_features`): ``encoder_input_tokens``/``encoder_mask``
  from ``inputs``; ``decoder_target_tokens``, ``decoder_input_tokens`` (targets shifted right
  after ``decoder_start_id``), ``decoder_mask`` and ``decoder_loss_weights`` from ``targets``.
- decoder-only (:func:`decoder_only_features`): the token row is ``inputs + targets`` (or
  ``targets`` alone, as the packed LM corpora are); ``decoder_input_tokens`` is the row,
  ``decoder_target_tokens`` the row shifted left by one, ``decoder_loss_weights`` 1 where the next
  token is a real *target* token (a prompt in ``inputs`` is context only), ``decoder_mask`` 1 on
  real tokens.

Examples longer than the feature length are truncated (seqio trims them already when the task
has the length); shorter ones are padded with 0 and carry weight 0 there. A model family names
its converter (:attr:`tw_jax.models.base.BaseModel.convert_features`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MODEL_FEATURES = (
    "decoder_input_tokens",
    "decoder_target_tokens",
    "decoder_loss_weights",
    "decoder_mask",
)
ENCODER_FEATURES = ("encoder_input_tokens", "encoder_mask")


def _helpers() -> tuple[Any, Any]:
    import tensorflow as tf

    def fit(tokens: tf.Tensor, length: int) -> tuple[tf.Tensor, tf.Tensor]:
        tokens = tf.cast(tokens[:length], tf.int32)
        real = tf.size(tokens)
        padded = tf.pad(tokens, [[0, length - real]])
        return tf.ensure_shape(padded, [length]), real

    def positions_below(real: tf.Tensor, length: int) -> tf.Tensor:
        return tf.cast(tf.range(length) < real, tf.int32)

    return fit, positions_below


def encoder_decoder_features(
    dataset: Any, lengths: Mapping[str, int], decoder_start_id: int = 0
) -> Any:
    """``inputs`` and ``targets`` → the encoder-decoder model features (module docstring)."""
    import tensorflow as tf

    if "targets" not in lengths:
        raise ValueError(f"feature lengths need 'targets', got {dict(lengths)}")
    if "inputs" not in lengths:
        raise ValueError(f"an encoder-decoder needs an 'inputs' length, got {dict(lengths)}")
    fit, positions_below = _helpers()

    # Plain tensor code: autograph's source transformation would only cost seconds per run.
    @tf.autograph.experimental.do_not_convert
    def encdec(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        inputs, n_in = fit(ex["inputs"], lengths["inputs"])
        targets, n_out = fit(ex["targets"], lengths["targets"])
        start = tf.constant([decoder_start_id], tf.int32)
        decoder_inputs = tf.concat([start, targets[:-1]], axis=0)
        weights = positions_below(n_out, lengths["targets"])
        return {
            "encoder_input_tokens": inputs,
            "encoder_mask": positions_below(n_in, lengths["inputs"]),
            "decoder_input_tokens": decoder_inputs * weights,
            "decoder_target_tokens": targets,
            "decoder_loss_weights": weights,
            "decoder_mask": weights,
        }

    return dataset.map(encdec, num_parallel_calls=tf.data.AUTOTUNE)


def decoder_only_features(dataset: Any, lengths: Mapping[str, int]) -> Any:
    """``targets`` (and an optional prompt in ``inputs``) → decoder-only features."""
    import tensorflow as tf

    if "targets" not in lengths:
        raise ValueError(f"feature lengths need 'targets', got {dict(lengths)}")
    fit, positions_below = _helpers()

    @tf.autograph.experimental.do_not_convert
    def decoder(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        length = int(lengths["targets"]) + int(lengths.get("inputs", 0))
        targets = tf.cast(ex["targets"], tf.int32)
        if "inputs" in ex and "inputs" in lengths:
            prompt = tf.cast(ex["inputs"][: lengths["inputs"]], tf.int32)
        else:
            prompt = tf.zeros([0], tf.int32)
        n_prompt = tf.size(prompt)
        row, real = fit(tf.concat([prompt, targets], axis=0), length)
        following = tf.concat([row[1:], tf.zeros([1], tf.int32)], axis=0)
        index = tf.range(length)
        # Position i predicts token i+1: a loss where i+1 is a real target token.
        weights = tf.cast((index + 1 < real) & (index + 1 >= n_prompt), tf.int32)
        return {
            "decoder_input_tokens": row,
            "decoder_target_tokens": following,
            "decoder_loss_weights": weights,
            "decoder_mask": positions_below(real, length),
        }

    return dataset.map(decoder, num_parallel_calls=tf.data.AUTOTUNE)
