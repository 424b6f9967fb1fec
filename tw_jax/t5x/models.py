"""tw_jax's models as T5X models: ``EncoderDecoderModel`` for the encoder-decoder families (T5,
BART), ``DecoderOnlyModel`` for the decoder-only ones (GPT-2), each with every method variant
(LoRA, K-Adapter, Modular) its config carries.

T5X drives a model through a handful of methods (``get_initial_variables``, ``loss_fn``,
``score_batch``, ``predict_batch_with_aux``); its stock classes implement them by calling the Flax
module with T5X's call signature. Ours implement them through the model protocol
(:mod:`tw_jax.models.base`) instead, so the very module ``tw-jax train`` trains runs under T5X
unchanged, with the same parameter paths, and nothing here asks which family it holds:

- variables: ``params`` and ``params_axes`` (T5X's logical axis annotations), read from the
  logical names our modules box their parameters with;
- logits: :meth:`tw_jax.models.base.BaseModel.logits` of T5X's batch (``encoder_input_tokens``,
  ``decoder_input_tokens``, ``decoder_target_tokens``, masks from our feature converter);
  T5X's loss, z-loss, loss normalisation and metrics then apply as to any T5X model;
- decoding: T5X's own ``beam_search`` / ``temperature_sample`` over our decode cache. An
  encoder-decoder encodes once and fills its cross-attention keys/values once (a zero-length
  decoder call), then each step reads them from the cache; a decoder-only model fills the cache
  with its left-padded prompt but the last token, which the first step feeds.

Batches come from our feature converter (:class:`FeatureConverter`): GPT-2's token 0 is "!", so
seqio's converters, which take 0 for padding, would drop it; ours derive masks from real lengths
and keep the probe tasks' scored tokens (``targets_weights``) in ``decoder_loss_weights``, so
``score_batch`` scores what ``tw-jax eval`` scores; packed (T5X's ``pack=True``) rows carry
segment ids and positions, so each example's loss is what it is alone.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, MutableMapping
from typing import Any

import flax.core
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.linen import partitioning as flax_partitioning
from t5x import decoding as t5x_decoding
from t5x import models as t5x_models

from tw_jax.evaluate.seqio_eval import PROMPT_LENGTH, ModelFeatureConverter
from tw_jax.models import BaseModel, model_for
from tw_jax.models.base import DecoderOnlyModel as ProtocolDecoderOnly
from tw_jax.models.base import EncoderDecoderModel as ProtocolEncoderDecoder
from tw_jax.models.decode_cache import decode_step as encoder_decoder_step
from tw_jax.models.decode_cache import init_cache as encoder_decoder_cache
from tw_jax.models.decoding import decode_step as decoder_only_step
from tw_jax.models.decoding import init_cache as decoder_only_cache


class FeatureConverter(ModelFeatureConverter):
    """tw_jax's feature converter with T5X's constructor (``pack``, ``use_custom_packing_ops``).

    T5X builds it as ``model.FEATURE_CONVERTER_CLS(pack=...)``; the model it converts for is
    bound by :meth:`for_model`. Packed, it gives the model's packed features (segment ids and
    positions, :mod:`tw_jax.models.features`), as T5X's training run files ask for.
    """

    def __init__(self, model: Any, pack: bool = False, use_custom_packing_ops: bool = False,
                 **unused: Any) -> None:
        del use_custom_packing_ops, unused
        super().__init__(model)
        self.packed = bool(pack)

    def __call__(self, ds: Any, task_feature_lengths: Mapping[str, int]) -> Any:
        if not self.packed:
            return super().__call__(ds, task_feature_lengths)
        lengths = {k: int(v) for k, v in task_feature_lengths.items()
                   if k in ("inputs", "targets")}
        return self.model.convert_features(ds, lengths, pack=True)

    @classmethod
    def for_model(cls, model: Any) -> Any:
        return functools.partial(cls, model_for(model))


def variables_with_axes(boxed: Mapping[str, Any]) -> dict[str, Any]:
    """``{"params": arrays, "params_axes": {..., "<name>_axes": AxisMetadata}}``: T5X's layout
    of a model's variables, from parameters boxed with logical axis names."""
    params = nn.unbox(boxed["params"])

    def axes(tree: Any) -> Any:
        if isinstance(tree, nn.Partitioned):
            raise TypeError("a boxed leaf where a dict was expected")
        out = {}
        for key, value in tree.items():
            if isinstance(value, nn.Partitioned):
                out[f"{key}_axes"] = flax_partitioning.AxisMetadata(names=tuple(value.names))
            elif isinstance(value, Mapping):
                out[key] = axes(value)
            else:
                raise ValueError(f"parameter {key!r} has no logical axis names; every tw_jax "
                                 "parameter is created with nn.with_logical_partitioning")
        return out

    return {"params": params, "params_axes": axes(flax.core.unfreeze(boxed["params"]))}


class _ProtocolModel:
    """What both T5X shapes share: the protocol model, its variables and logits."""

    tw_model: BaseModel

    def _init_variables(self, rng: jax.Array, batch: int, length: int) -> Any:
        inputs = self.tw_model.dummy_inputs(batch, length)
        boxed = self.tw_model.module.init(rng, *inputs)
        return flax.core.freeze(variables_with_axes(boxed))

    def _compute_logits(self, params: Any, batch: Mapping[str, jax.Array],
                        dropout_rng: jax.Array | None = None, mutable: Any = False,
                        other_variables: Any = None) -> jax.Array:
        if mutable or other_variables:
            raise NotImplementedError(
                "tw_jax's T5X models compute logits without extra variable collections "
                "(score_batch(return_intermediates=True) is not supported)")
        deterministic = dropout_rng is None
        return self.tw_model.logits(params, batch, deterministic=deterministic,
                                    rng=dropout_rng)


def _decode(decode_fn: Any, first_tokens: jax.Array, width: int, cache: Any,
            step: Any, eos_id: int, num_decodes: int, decoder_params: Mapping[str, Any]
            ) -> tuple[jax.Array, jax.Array]:
    """T5X's ``decode_fn`` from a prefilled cache. The first step feeds ``first_tokens`` (the
    decoder start token, or a prompt's last token) in place of T5X's BOS; ``step(tokens,
    cache, index)`` gives the next logits, ``index`` counting steps from 0 per row."""
    rows = first_tokens.shape[0]
    expanded_first = jnp.repeat(first_tokens, num_decodes, axis=0)

    def tokens_to_logits(state: t5x_decoding.DecodingState) -> tuple[jax.Array, Any]:
        index = jnp.broadcast_to(jnp.reshape(state.cur_index, (-1,)), state.cur_token.shape[:1])
        tokens = jnp.where(index[:, None] == 0, expanded_first[:, None], state.cur_token)
        logits, new_cache = step(tokens, state.cache, index)
        return logits[:, -1], new_cache

    return decode_fn(
        inputs=jnp.zeros((rows, width), jnp.int32), cache=cache,
        tokens_to_logits=tokens_to_logits, eos_id=eos_id, num_decodes=num_decodes,
        **decoder_params)


class EncoderDecoderModel(_ProtocolModel, t5x_models.EncoderDecoderModel):
    """A tw_jax encoder-decoder (T5, BART) as T5X's ``EncoderDecoderModel``."""

    def __init__(self, config: Any, vocabulary: Any, optimizer_def: Any, **kwargs: Any) -> None:
        self.tw_model = model_for(config)
        if not isinstance(self.tw_model, ProtocolEncoderDecoder):
            raise TypeError(f"{type(self.tw_model).__name__} is not an encoder-decoder; "
                            "use tw_jax.t5x.model(), which picks T5X's model class")
        kwargs.setdefault("feature_converter_cls", FeatureConverter.for_model(self.tw_model))
        super().__init__(self.tw_model.module, vocabulary, vocabulary, optimizer_def, **kwargs)

    def get_initial_variables(self, rng: jax.Array, input_shapes: Mapping[str, Any],
                              input_types: Mapping[str, Any] | None = None) -> Any:
        batch, length = input_shapes["encoder_input_tokens"][:2]
        return self._init_variables(rng, int(batch), int(length))

    def predict_batch_with_aux(
        self, params: Any, batch: Mapping[str, jax.Array], rng: jax.Array | None = None,
        decoder_params: MutableMapping[str, Any] | None = None,
        return_all_decodes: bool | None = None, num_decodes: int | None = None,
        prompt_with_targets: bool = False,
    ) -> tuple[jax.Array, Mapping[str, jax.Array]]:
        """Decodes with T5X's ``decode_fn`` (beam search by default): the encoder runs once,
        its keys/values enter the cross-attention cache once."""
        if prompt_with_targets:
            raise NotImplementedError("prompt_with_targets is not supported by tw_jax's models")
        defaults = self._default_decoder_params
        return_all_decodes = (defaults.return_all_decodes if return_all_decodes is None
                              else return_all_decodes)
        num_decodes = defaults.num_decodes if num_decodes is None else num_decodes
        model, module = self.tw_model, self.tw_model.module
        source, source_mask = batch["encoder_input_tokens"], batch["encoder_mask"]
        width = batch["decoder_input_tokens"].shape[1]
        encoded = module.apply({"params": params}, source, source_mask,
                               method=type(module).encode)
        # One row per example: T5X's decode_fn repeats the cache for its beams or samples.
        cache = encoder_decoder_cache(module, params, source.shape[0], width, source.shape[1])
        _, cache = encoder_decoder_step(module, params, cache,
                                        jnp.zeros((source.shape[0], 0), jnp.int32),
                                        encoded, source_mask)

        def step(tokens: jax.Array, cache: Any, index: jax.Array) -> tuple[jax.Array, Any]:
            del index
            return encoder_decoder_step(module, params, cache, tokens)

        decodes, scores = _decode(
            self._decode_fn, jnp.full((source.shape[0],), model.decoder_start_id, jnp.int32),
            width, cache, step, self._eos_id(decoder_params), num_decodes,
            _decoder_params(decoder_params, rng))
        return _best(decodes, scores, return_all_decodes)

    def _eos_id(self, decoder_params: Mapping[str, Any] | None) -> int:
        return int((decoder_params or {}).get("eos_id", self.tw_model.eos_id))


class DecoderOnlyModel(_ProtocolModel, t5x_models.DecoderOnlyModel):
    """A tw_jax decoder-only model (GPT-2) as T5X's ``DecoderOnlyModel``."""

    def __init__(self, config: Any, vocabulary: Any, optimizer_def: Any, **kwargs: Any) -> None:
        self.tw_model = model_for(config)
        if not isinstance(self.tw_model, ProtocolDecoderOnly):
            raise TypeError(f"{type(self.tw_model).__name__} is not decoder-only; "
                            "use tw_jax.t5x.model(), which picks T5X's model class")
        kwargs.setdefault("feature_converter_cls", FeatureConverter.for_model(self.tw_model))
        super().__init__(self.tw_model.module, vocabulary, optimizer_def, **kwargs)

    def get_initial_variables(self, rng: jax.Array, input_shapes: Mapping[str, Any],
                              input_types: Mapping[str, Any] | None = None) -> Any:
        batch, length = input_shapes["decoder_input_tokens"][:2]
        return self._init_variables(rng, int(batch), int(length))

    def predict_batch_with_aux(
        self, params: Any, batch: Mapping[str, jax.Array], rng: jax.Array | None = None, *,
        return_all_decodes: bool = False, num_decodes: int = 1,
        decoder_params: MutableMapping[str, Any] | None = None,
    ) -> tuple[jax.Array, Mapping[str, jax.Array]]:
        """Continues each row's prompt (its first ``prompt_length`` tokens, from our feature
        converter) with T5X's ``decode_fn`` (temperature sampling, greedy by default), for as
        many new tokens as the row is wide."""
        if PROMPT_LENGTH not in batch:
            raise ValueError(f"decoding needs the {PROMPT_LENGTH!r} feature of tw_jax's feature "
                             "converter (the model's FEATURE_CONVERTER_CLS)")
        module = self.tw_model.module
        rows, width = batch["decoder_input_tokens"].shape
        prompts, mask = left_aligned_prompts(batch["decoder_input_tokens"],
                                             batch[PROMPT_LENGTH])
        positions = jnp.maximum(jnp.cumsum(mask, axis=-1) - 1, 0)
        cache = decoder_only_cache(module, params, rows, 2 * width)
        _, cache = decoder_only_step(module, params, cache, prompts[:, :-1],
                                     positions[:, :-1], mask[:, :-1])
        last_position = jnp.repeat(positions[:, -1], num_decodes, axis=0)

        def step(tokens: jax.Array, cache: Any, index: jax.Array) -> tuple[jax.Array, Any]:
            position = (last_position + index)[:, None]
            return decoder_only_step(module, params, cache, tokens, position)

        decodes, scores = _decode(
            self._decode_fn, prompts[:, -1], width, cache, step,
            int((decoder_params or {}).get("eos_id", self.tw_model.eos_id)), num_decodes,
            _decoder_params(decoder_params, rng))
        return _best(decodes, scores, return_all_decodes)


def left_aligned_prompts(tokens: jax.Array, prompt_length: jax.Array
                         ) -> tuple[jax.Array, jax.Array]:
    """``(ids, mask)``: each row's first ``prompt_length`` tokens moved to the right end of the
    row (left padding), so every prompt ends in the last column. A row without a prompt keeps
    one visible filler token (the decoder must read something)."""
    rows, width = tokens.shape
    length = jnp.clip(prompt_length.astype(jnp.int32), 1, width)
    column = jnp.arange(width)[None, :]
    source = column - (width - length[:, None])
    ids = jnp.take_along_axis(tokens, jnp.clip(source, 0, width - 1), axis=1)
    mask = (source >= 0).astype(jnp.int32)
    return ids * mask, mask


def _decoder_params(decoder_params: Mapping[str, Any] | None, rng: jax.Array | None
                    ) -> dict[str, Any]:
    params = dict(decoder_params or {})
    params.pop("eos_id", None)
    if rng is not None:
        if params.get("decode_rng") is not None:
            raise ValueError("an rng both as argument and as decoder_params['decode_rng']")
        params["decode_rng"] = rng
    return params


def _best(decodes: jax.Array, scores: jax.Array, return_all_decodes: bool
          ) -> tuple[jax.Array, Mapping[str, jax.Array]]:
    """T5X's outputs: every decode (sorted by increasing score) or the best one."""
    if return_all_decodes:
        return decodes, {"scores": scores}
    return decodes[:, -1, :], {"scores": scores[:, -1]}


def t5x_model_class(config: Any) -> type:
    """T5X's model class for a tw_jax model config: by the protocol's shape."""
    if isinstance(model_for(config), ProtocolEncoderDecoder):
        return EncoderDecoderModel
    return DecoderOnlyModel


def model(config: Any, vocabulary: Any, optimizer_def: Any, **kwargs: Any) -> Any:
    """The T5X model of a tw_jax model config (gin: ``tw_jax.t5x.model``): T5X's
    ``EncoderDecoderModel`` or ``DecoderOnlyModel`` by the model's shape; ``kwargs`` are T5X's
    (``z_loss``, ``label_smoothing``, ``loss_normalizing_factor``, ``decode_fn`` ...)."""
    return t5x_model_class(config)(config, vocabulary, optimizer_def, **kwargs)


__all__ = [
    "DecoderOnlyModel",
    "EncoderDecoderModel",
    "FeatureConverter",
    "left_aligned_prompts",
    "model",
    "t5x_model_class",
    "variables_with_axes",
]
