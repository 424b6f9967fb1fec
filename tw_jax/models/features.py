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

Packed (``pack=True``, T5X's ``pack``): several examples share a row, placed by seqio's packing;
``*_segment_ids`` number them (0 is padding) and ``*_positions`` count each one's tokens from 0,
and every feature above is what it would be for each example alone: the decoder's inputs start
each example afresh (``decoder_start_id``), a decoder-only row predicts no token across examples.
seqio's packer takes token 0 for padding, which GPT-2's "!" is, so ids travel through it shifted
by one.
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
# packed batches: feature -> the module's argument (tw_jax.models.base.BaseModel.logits)
DECODER_PACKING = {"decoder_segment_ids": "segment_ids", "decoder_positions": "positions"}
ENCODER_PACKING = {"encoder_segment_ids": "segment_ids", "encoder_positions": "positions",
                   "decoder_segment_ids": "decoder_segment_ids",
                   "decoder_positions": "decoder_positions"}


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


def _packed(dataset: Any, lengths: Mapping[str, int]) -> Any:
    """seqio's packing of the int features ``lengths`` names, every token kept (shifted by one
    through it); padding stays 0, where ``*_segment_ids`` is 0."""
    import seqio
    import tensorflow as tf

    @tf.autograph.experimental.do_not_convert
    def shifted(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {k: tf.cast(ex[k], tf.int32) + 1 for k in lengths}

    @tf.autograph.experimental.do_not_convert
    def unshifted(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = dict(ex)
        for k in lengths:
            out[k] = tf.where(ex[f"{k}_segment_ids"] > 0, ex[k] - 1, 0)
        return out

    packed = seqio.utils.trim_and_pack_dataset(dataset.map(shifted), dict(lengths))
    return packed.map(unshifted, num_parallel_calls=tf.data.AUTOTUNE)


def packed_encoder_decoder_features(
    dataset: Any, lengths: Mapping[str, int], decoder_start_id: int = 0
) -> Any:
    """``inputs`` and ``targets`` packed several examples a row (module docstring)."""
    import tensorflow as tf

    sizes = {"inputs": int(lengths["inputs"]), "targets": int(lengths["targets"])}

    @tf.autograph.experimental.do_not_convert
    def encdec(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        targets, segments = ex["targets"], ex["targets_segment_ids"]
        positions = ex["targets_positions"]
        real = tf.cast(segments > 0, tf.int32)
        previous = tf.concat([tf.zeros([1], tf.int32), targets[:-1]], axis=0)
        decoder_inputs = tf.where(positions == 0, tf.constant(decoder_start_id, tf.int32),
                                  previous) * real
        return {
            "encoder_input_tokens": ex["inputs"],
            "encoder_mask": tf.cast(ex["inputs_segment_ids"] > 0, tf.int32),
            "encoder_segment_ids": ex["inputs_segment_ids"],
            "encoder_positions": ex["inputs_positions"],
            "decoder_input_tokens": decoder_inputs,
            "decoder_target_tokens": targets,
            "decoder_loss_weights": real,
            "decoder_mask": real,
            "decoder_segment_ids": segments,
            "decoder_positions": positions,
        }

    selected = dataset.map(lambda ex: {k: ex[k] for k in sizes})
    return _packed(selected, sizes).map(encdec, num_parallel_calls=tf.data.AUTOTUNE)


def packed_decoder_only_features(dataset: Any, lengths: Mapping[str, int]) -> Any:
    """Decoder-only rows (prompt and targets) packed several examples a row."""
    import tensorflow as tf

    length = int(lengths["targets"]) + int(lengths.get("inputs", 0))

    @tf.autograph.experimental.do_not_convert
    def row(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        targets = tf.cast(ex["targets"], tf.int32)
        if "inputs" in ex and "inputs" in lengths:
            prompt = tf.cast(ex["inputs"][: lengths["inputs"]], tf.int32)
        else:
            prompt = tf.zeros([0], tf.int32)
        scored = tf.concat([tf.zeros_like(prompt), tf.ones_like(targets)], axis=0)
        return {"row": tf.concat([prompt, targets], axis=0)[:length], "scored": scored[:length]}

    @tf.autograph.experimental.do_not_convert
    def decoder(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        tokens, segments = ex["row"], ex["row_segment_ids"]
        after = tf.zeros([1], tf.int32)
        following = tf.concat([tokens[1:], after], axis=0)
        same = tf.concat([segments[1:], after], axis=0) == segments
        same = same & (segments > 0)
        scored = tf.concat([ex["scored"][1:], after], axis=0) > 0
        return {
            "decoder_input_tokens": tokens,
            "decoder_target_tokens": tf.where(same, following, 0),
            "decoder_loss_weights": tf.cast(same & scored, tf.int32),
            "decoder_mask": tf.cast(segments > 0, tf.int32),
            "decoder_segment_ids": segments,
            "decoder_positions": ex["row_positions"],
        }

    packed = _packed(dataset.map(row), {"row": length, "scored": length})
    return packed.map(decoder, num_parallel_calls=tf.data.AUTOTUNE)


def encoder_decoder_features(
    dataset: Any, lengths: Mapping[str, int], decoder_start_id: int = 0, pack: bool = False
) -> Any:
    """``inputs`` and ``targets`` → the encoder-decoder model features (module docstring)."""
    import tensorflow as tf

    if "targets" not in lengths:
        raise ValueError(f"feature lengths need 'targets', got {dict(lengths)}")
    if "inputs" not in lengths:
        raise ValueError(f"an encoder-decoder needs an 'inputs' length, got {dict(lengths)}")
    if pack:
        return packed_encoder_decoder_features(dataset, lengths, decoder_start_id)
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


def decoder_only_features(dataset: Any, lengths: Mapping[str, int], pack: bool = False) -> Any:
    """``targets`` (and an optional prompt in ``inputs``) → decoder-only features."""
    import tensorflow as tf

    if "targets" not in lengths:
        raise ValueError(f"feature lengths need 'targets', got {dict(lengths)}")
    if pack:
        return packed_decoder_only_features(dataset, lengths)
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
