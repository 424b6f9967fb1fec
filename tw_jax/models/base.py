"""The model protocol: what training and evaluation ask of a model, whatever its family.

As in T5X (``BaseModel`` → ``EncoderDecoderModel`` / ``DecoderOnlyModel``), one object per model
owns what differs between families: its Flax module, the feature converter and feature lengths,
the logits of a batch, how a scored example or a prompt is built from text, scoring, decoding,
how an answer is read from decoded text, Hugging Face import, parameter counts, freeze labels
and the layout behind the FLOP count. It also owns how an evaluation's examples are formatted
(as T5X's ``BaseModel`` owns its vocabularies, scoring and prediction): its vocabulary, a
probe's prompt and scored example, a rank-classification candidate, an ECBD cloze example and
the fillers it writes for a blank, whether its probe answers are teacher-forced or decoded, and
how long a prompt may be. Everything outside ``tw_jax/models/`` asks this object
(:func:`model_for`) and never which family it holds, nor what the family can do: the evaluators
call these methods the same way for every family.

A family is a subclass of :class:`EncoderDecoderModel` or :class:`DecoderOnlyModel` naming its
config and module classes, registered with :func:`register_family` (``tw_jax/models/families.py``
registers GPT-2, T5 and BART). The two shapes differ in how text becomes tokens:

- an encoder-decoder reads a *source* (the prompt, EOS-terminated) and scores or generates a
  *target*; prompts are right-padded;
- a decoder-only model reads one row, the source followed by the target, and scores the target's
  tokens from those before them; EOS in front stands for BOS, so the first token is scored too;
  prompts are left-padded, so generation continues from the last prompt token.

Packed batches (several examples a row, :mod:`tw_jax.models.features`) carry segment ids and
positions, which :meth:`BaseModel.logits` hands to the module: each example attends to itself
only, at its own positions, so its loss is what it would be alone.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.data.tokens import Span, encode_with_offsets, prefix_id, span_mask
from tw_jax.models import decoding, features
from tw_jax.models.token_scores import (
    CausalExample,
    Seq2SeqExample,
    TokenScores,
    score_causal,
    score_seq2seq,
)
from tw_jax.models.variants import ParamCount, count_params, param_labels

Batch = Mapping[str, jax.Array]


class BaseModel(abc.ABC):
    """A model config with the behaviour of its family (see the module docstring)."""

    config_class: ClassVar[type]
    module_class: ClassVar[type[nn.Module]]
    model_type: ClassVar[str]  # config.json's ``model_type`` of its Hugging Face checkpoints
    objective: ClassVar[str]  # the task form it trains on: "ssm", "lm" or "denoise" ({objective})
    # The vocabulary it reads: "t5", "gpt2", "bart" or "model" (a model folder's tokenizer.json).
    vocabulary_kind: ClassVar[str]
    # How its probe answers are read (tw_jax.evaluate.qa): "teacher_forced" or "free" decoding.
    qa_protocol: ClassVar[str]
    prompt_padding: ClassVar[str]  # "left" or "right"
    feature_names: ClassVar[tuple[str, ...]]
    packing_features: ClassVar[tuple[str, ...]]  # what a packed batch adds
    task_features: ClassVar[tuple[str, ...]]  # what a task must give it (seqio output features)

    def __init__(self, config: Any) -> None:
        if not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} needs a {self.config_class.__name__}, got "
                            f"{type(config).__name__}")
        self.config = config

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"

    @functools.cached_property
    def module(self) -> nn.Module:
        return self.module_class(self.config)

    # --- shapes and features -------------------------------------------------------------

    @property
    def max_length(self) -> int | None:
        """The longest row the model reads (learned positions), or None (relative ones)."""
        return None

    @property
    def eos_id(self) -> int:
        return int(self.config.eos_token_id)

    @abc.abstractmethod
    def feature_lengths(self, task_lengths: Mapping[str, int]) -> dict[str, int]:
        """Lengths of the model's token streams (``encoder``, ``decoder``) for the tasks'
        ``TASK_FEATURE_LENGTHS``: batch shapes, and the positions of the FLOP count."""

    def batch_features(self, pack: bool = False) -> tuple[str, ...]:
        """The features of a batch: :attr:`feature_names`, and segment ids and positions when
        packed."""
        return (*self.feature_names, *(self.packing_features if pack else ()))

    @abc.abstractmethod
    def convert_features(self, dataset: Any, task_lengths: Mapping[str, int],
                         pack: bool = False) -> Any:
        """A tf.data stream of task features → fixed-length model features; ``pack``: several
        examples a row, with segment ids and positions (:mod:`tw_jax.models.features`)."""

    @abc.abstractmethod
    def dummy_inputs(self, batch_size: int = 1, length: int = 8) -> tuple[jax.Array, ...]:
        """Positional inputs for ``module.init``."""

    def abstract_variables(self, batch_size: int = 1, length: int = 8) -> Any:
        """Shapes, dtypes and logical axes of every variable (``jax.eval_shape``, no memory)."""
        inputs = self.dummy_inputs(batch_size, length)
        return jax.eval_shape(lambda rng: self.module.init(rng, *inputs), jax.random.key(0))

    # --- training and teacher forcing ----------------------------------------------------

    @abc.abstractmethod
    def logits(self, params: Any, batch: Batch, *, deterministic: bool,
               rng: jax.Array | None) -> jax.Array:
        """Logits ``(batch, length, vocab)`` of the decoder positions of a feature batch."""

    # --- scoring -------------------------------------------------------------------------

    @abc.abstractmethod
    def span_example(self, vocabulary: Any, source: str, target: str,
                     spans: Sequence[Span] | None = None, *, separator: str = "",
                     prepend_bos: bool = True) -> Any:
        """An example scoring the tokens of ``target`` that overlap ``spans`` (character ranges
        in ``target``; None: all of them) given ``source``. A model that reads source and target
        as one text joins them with ``separator``."""

    @abc.abstractmethod
    def sequence_example(self, ids: Sequence[int], weights: Sequence[float]) -> Any:
        """An example scoring token ``ids`` (weighted) as a text of their own, no prompt."""

    @abc.abstractmethod
    def score(self, params: Any, examples: Sequence[Any], *, batch_size: int = 32) -> TokenScores:
        """Summed log-likelihood and count of every example's weighted tokens."""

    def truncate_left(self, example: Any, max_length: int | None) -> tuple[Any, bool]:
        """``(example, cut)``: the example within ``max_length`` tokens; nothing to cut here."""
        return example, False

    # --- decoding ------------------------------------------------------------------------

    @abc.abstractmethod
    def prompt_ids(self, vocabulary: Any, text: str) -> list[int]:
        """The token ids of a prompt to decode from."""

    @abc.abstractmethod
    def answer_text(self, text: str) -> str:
        """The answer a decoded text holds."""

    def prompt_rows(self, prompts: Sequence[Sequence[int]], rows: int,
                    length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, mask)`` of ``rows`` rows, padded on :attr:`prompt_padding`'s side; rows past the
        prompts are filler with one visible token (never none)."""
        length = length or max((len(p) for p in prompts), default=1)
        left = self.prompt_padding == "left"
        ids = np.zeros((rows, length), np.int32)
        mask = np.zeros((rows, length), np.int32)
        for i, row in enumerate(prompts):
            row = list(row)[:length]
            start = length - len(row) if left else 0
            ids[i, start : start + len(row)] = row
            mask[i, start : start + len(row)] = 1
        mask[len(prompts):, -1 if left else 0] = 1
        return ids, mask

    def decode(self, params: Any, ids: Any, mask: Any, *, max_new_tokens: int,
               eos_id: int | None, beam_size: int = 1, pad_id: int = 0) -> jax.Array:
        """New tokens ``(batch, max_new_tokens)``: greedy, or the best beam of a beam search."""
        if beam_size == 1:
            return decoding.greedy_decode(
                self.module, params, jnp.asarray(ids), jnp.asarray(mask),
                max_new_tokens=max_new_tokens, eos_id=eos_id, pad_id=pad_id,
            )
        beams, _ = decoding.beam_search(
            self.module, params, jnp.asarray(ids), jnp.asarray(mask), beam_size=beam_size,
            max_new_tokens=max_new_tokens, eos_id=eos_id, pad_id=pad_id,
        )
        return beams[:, 0]

    # --- how evaluations format examples ------------------------------------------------

    def load_vocabulary(self, path: str) -> Any:
        """The seqio vocabulary of :attr:`vocabulary_kind` from local or ``gs://`` files."""
        from tw_jax.data import hf_tokenizer, vocabularies

        return {"t5": vocabularies.t5_vocabulary, "gpt2": vocabularies.gpt2_vocabulary,
                "bart": vocabularies.bart_vocabulary,
                "model": hf_tokenizer.model_tokenizer}[self.vocabulary_kind](path)

    def probe_prompt(self, row: Mapping[str, str], *, cloze: bool = False) -> str:
        """The prompt that asks for a probe row's object: ``subject relation``, which the model
        continues (``cloze`` asks for the masked cloze sentence where a family reads one)."""
        return f"{row['subject']} {row['relation']}"

    def probe_example(self, vocabulary: Any, row: Mapping[str, str], variant: str, *,
                      prepend_bos: bool = True) -> Any:
        """The scoring example of a probe row for a perplexity variant (``text``, ``object``,
        ``cloze``): the tokens :func:`tw_jax.tasks.probes.probe_spec` marks, which the probe
        tasks' features score too."""
        return self._probe_example(vocabulary, row, variant, sentinel=False,
                                   prepend_bos=prepend_bos)

    def _probe_example(self, vocabulary: Any, row: Mapping[str, str], variant: str, *,
                       sentinel: bool, prepend_bos: bool) -> Any:
        from tw_jax.tasks.probes import VARIANTS, probe_spec

        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
        spec = probe_spec(row, variant, sentinel=sentinel)
        spans = None if spec.spans is None else list(spec.spans)
        return self.span_example(vocabulary, spec.source, spec.target, spans,
                                 prepend_bos=prepend_bos)

    def fill_example(self, vocabulary: Any, prompt: str, filler: str, *,
                     separator: str = " ") -> Any:
        """An example scoring ``filler`` as the answer ``prompt`` asks for (a candidate of rank
        classification): the filler's tokens after ``prompt + separator``."""
        return self.span_example(vocabulary, prompt, filler, separator=separator)

    def cloze_example(self, vocabulary: Any, left: str, filler: str, right: str, *,
                      max_length: int | None = None) -> tuple[Any, bool]:
        """``(example, cut)``: an example scoring the tokens of ``filler`` in the blank between
        ``left`` and ``right`` (ECBD's masked span), and whether its context was cut to
        ``max_length`` tokens. Here the left context, then the filler: a left-to-right model
        cannot read the right context before the span."""
        text = left + filler
        return self.truncate_left(
            self.span_example(vocabulary, "", text, [(filler_start(left), len(text))]), max_length)

    def cloze_fillers(self, params: Any, vocabulary: Any, sentences: Sequence[str], *, k: int,
                      beam_size: int, max_new_tokens: int,
                      batch_size: int = 8) -> list[list[str]] | None:
        """The ``k`` best distinct fillers the model writes for each sentence's blank
        (``<extra_id_0>``, as ECBD's masked sentences carry it), or None: a family that does not
        write fillers for a blank (ECBD's recall@k, Appendix D, is T5's)."""
        return None

    def prompt_budget(self, input_length: int, max_new_tokens: int) -> int:
        """The most prompt tokens it reads when its answer may take ``max_new_tokens``:
        ``input_length``, the answer having a decoder of its own."""
        return input_length

    # --- parameters ----------------------------------------------------------------------

    def param_labels(self, params: Any) -> Any:
        """The freeze label of every parameter (what the method trains)."""
        return param_labels(self.config, params)

    def count_params(self, params: Any | None = None) -> ParamCount:
        """Trainable and total parameters; from shapes alone (``jax.eval_shape``) when
        ``params`` is None."""
        if params is None:
            params = self.abstract_variables()["params"]
        return count_params(self.config, params)

    @classmethod
    @abc.abstractmethod
    def load_hf(cls, folder: str, **overrides: Any) -> tuple[Any, Any]:
        """``(config, params)`` of a Hugging Face folder (``config.json`` + safetensors)."""

    @classmethod
    def hf_folder_config(cls, folder: str, hf: Mapping[str, Any], **overrides: Any) -> Any:
        """The config :meth:`load_hf` gives for ``folder`` (whose ``config.json`` is ``hf``),
        without reading a weight: what a run started from the folder trains."""
        return cls.config_class.from_hf_config(dict(hf), **overrides)

    @abc.abstractmethod
    def save_hf(self, folder: str, params: Any) -> None:
        """Write ``params`` as a Hugging Face folder (``config.json`` + safetensors, config
        last), local or ``gs://``; variant weights are merged or dropped as the family exports."""

    @abc.abstractmethod
    def flop_layout(self) -> tuple[dict[str, Any], Callable[[tuple[str, ...]], list]]:
        """The coarse parts of the model and where each parameter sits, for the model FLOP
        count of :mod:`tw_jax.train.flops`."""


class EncoderDecoderModel(BaseModel):
    """A source read by an encoder, a target written by a decoder (T5)."""

    prompt_padding = "right"
    qa_protocol = "free"  # CKL and EvolvingQA decode T5's answers
    feature_names = (*features.MODEL_FEATURES, *features.ENCODER_FEATURES)
    packing_features = tuple(features.ENCODER_PACKING)
    task_features = ("inputs", "targets")

    @property
    def decoder_start_id(self) -> int:
        return int(self.config.decoder_start_token_id)

    def feature_lengths(self, task_lengths: Mapping[str, int]) -> dict[str, int]:
        return {"encoder": int(task_lengths["inputs"]), "decoder": int(task_lengths["targets"])}

    def convert_features(self, dataset: Any, task_lengths: Mapping[str, int],
                         pack: bool = False) -> Any:
        return features.encoder_decoder_features(dataset, task_lengths, self.decoder_start_id,
                                                 pack=pack)

    def dummy_inputs(self, batch_size: int = 1, length: int = 8) -> tuple[jax.Array, ...]:
        dummy = jnp.zeros((batch_size, length), jnp.int32)
        return dummy, dummy

    def logits(self, params: Any, batch: Batch, *, deterministic: bool,
               rng: jax.Array | None) -> jax.Array:
        return self.module.apply(
            {"params": params}, batch["encoder_input_tokens"], batch["decoder_input_tokens"],
            attention_mask=batch["encoder_mask"], decoder_attention_mask=batch["decoder_mask"],
            deterministic=deterministic, rngs=None if deterministic else {"dropout": rng},
            **_packing(batch, features.ENCODER_PACKING),
        )

    def span_example(self, vocabulary: Any, source: str, target: str,
                     spans: Sequence[Span] | None = None, *, separator: str = "",
                     prepend_bos: bool = True) -> Seq2SeqExample:
        """EOS after the source and after the target (two texts: no separator); the EOS is never
        scored."""
        input_ids, _ = encode_with_offsets(vocabulary, source)
        target_ids, offsets = encode_with_offsets(vocabulary, target)
        weights = ([1.0] * len(target_ids) if spans is None
                   else [float(f) for f in span_mask(offsets, spans)])
        eos = vocabulary.eos_id
        return Seq2SeqExample((*input_ids, eos), (*target_ids, eos), (*weights, 0.0))

    def sequence_example(self, ids: Sequence[int], weights: Sequence[float]) -> Seq2SeqExample:
        """The tokens as targets after an empty source (EOS alone): no causal LM objective."""
        return Seq2SeqExample((self.eos_id,), tuple(ids), tuple(float(w) for w in weights))

    def score(self, params: Any, examples: Sequence[Any], *, batch_size: int = 32) -> TokenScores:
        return score_seq2seq(self.module, params, examples, batch_size=batch_size)

    def prompt_ids(self, vocabulary: Any, text: str) -> list[int]:
        return [*vocabulary.encode(text), vocabulary.eos_id]


class DecoderOnlyModel(BaseModel):
    """One row, source then target, each token predicted from those before it (GPT-2)."""

    prompt_padding = "left"
    qa_protocol = "teacher_forced"  # as the TemporalWiki reference code scores GPT-2
    feature_names = features.MODEL_FEATURES
    packing_features = tuple(features.DECODER_PACKING)
    task_features = ("targets",)  # ``inputs``, when a task has them, are the row's prompt

    @property
    def max_length(self) -> int | None:
        return getattr(self.config, "n_positions", None)

    def feature_lengths(self, task_lengths: Mapping[str, int]) -> dict[str, int]:
        return {"decoder": int(task_lengths["targets"]) + int(task_lengths.get("inputs", 0))}

    def convert_features(self, dataset: Any, task_lengths: Mapping[str, int],
                         pack: bool = False) -> Any:
        return features.decoder_only_features(dataset, task_lengths, pack=pack)

    def dummy_inputs(self, batch_size: int = 1, length: int = 8) -> tuple[jax.Array, ...]:
        return (jnp.zeros((batch_size, length), jnp.int32),)

    def logits(self, params: Any, batch: Batch, *, deterministic: bool,
               rng: jax.Array | None) -> jax.Array:
        return self.module.apply(
            {"params": params}, batch["decoder_input_tokens"],
            attention_mask=batch["decoder_mask"], deterministic=deterministic,
            rngs=None if deterministic else {"dropout": rng},
            **_packing(batch, features.DECODER_PACKING),
        )

    def span_example(self, vocabulary: Any, source: str, target: str,
                     spans: Sequence[Span] | None = None, *, separator: str = "",
                     prepend_bos: bool = True) -> CausalExample:
        """The row ``source + separator + target``; with ``prepend_bos`` the vocabulary's BOS
        goes in front (EOS standing for it where there is none: GPT-2, Qwen), so the first
        token is scored too (else it has no context and is not)."""
        text = source + separator + target
        ids, offsets = encode_with_offsets(vocabulary, text)
        if not ids:
            raise ValueError(f"nothing to score: {text!r} has no tokens")
        offset = len(source) + len(separator)
        shifted = [(start + offset, end + offset) for start, end in
                   (spans if spans is not None else [(0, len(target))])]
        weights = [float(f) for f in span_mask(offsets, shifted)]
        if spans is None and not source:
            weights = [1.0] * len(ids)
        if prepend_bos:
            return CausalExample((prefix_id(vocabulary), *ids), (0.0, *weights))
        return CausalExample(tuple(ids), (0.0, *weights[1:]))

    def sequence_example(self, ids: Sequence[int], weights: Sequence[float]) -> CausalExample:
        """Each token from those before it; the first has no context and is not scored."""
        return CausalExample(tuple(ids), (0.0, *(float(w) for w in list(weights)[1:])))

    def score(self, params: Any, examples: Sequence[Any], *, batch_size: int = 32) -> TokenScores:
        return score_causal(self.module, params, examples, batch_size=batch_size)

    def truncate_left(self, example: Any, max_length: int | None) -> tuple[Any, bool]:
        """Keep the last ``max_length`` tokens (the scored ones are at the end)."""
        if max_length is None or len(example.tokens) <= max_length:
            return example, False
        cut = len(example.tokens) - max_length
        return CausalExample(example.tokens[cut:], (0.0, *example.weights[cut + 1:])), True

    def prompt_ids(self, vocabulary: Any, text: str) -> list[int]:
        """The prompt's tokens, after the vocabulary's BOS where it has one (Llama 3, Gemma:
        as ``generate`` reads a tokenised prompt); GPT-2's prompts start with their text."""
        bos = vocabulary.bos_id
        return [*([] if bos is None else [int(bos)]), *vocabulary.encode(text)]

    def prompt_budget(self, input_length: int, max_new_tokens: int) -> int:
        """``input_length``, less the answer's tokens: prompt and answer share one row of at
        most :attr:`max_length` tokens."""
        if self.max_length is None:
            return input_length
        return min(input_length, self.max_length - max_new_tokens)


def filler_start(left: str) -> int:
    """Where a filler after ``left`` starts in ``left + filler``: at the space that ends
    ``left``, which marks the filler's first word, as the tokenizers read it."""
    return len(left) - 1 if left.endswith(" ") else len(left)


def _packing(batch: Batch, names: Mapping[str, str]) -> dict[str, jax.Array]:
    """The module arguments of a packed batch's segment ids and positions (none unpacked)."""
    return {argument: batch[feature] for feature, argument in names.items() if feature in batch}


# --- the registry --------------------------------------------------------------------------

_FAMILIES: dict[type, type[BaseModel]] = {}


def register_family(family: type[BaseModel]) -> type[BaseModel]:
    """Make ``family`` the model of its config class (usable as a class decorator)."""
    _FAMILIES[family.config_class] = family
    return family


def registered_families() -> tuple[type[BaseModel], ...]:
    """Every registered family, in the order of registration."""
    return tuple(_FAMILIES.values())


def families_by_type() -> dict[str, type[BaseModel]]:
    """Registered families by Hugging Face ``model_type``."""
    return {family.model_type: family for family in _FAMILIES.values()}


def _family_of(config: Any) -> type[BaseModel]:
    for config_class, family in _FAMILIES.items():
        if isinstance(config, config_class):
            return family
    raise TypeError(f"not a model config of a registered family: {type(config).__name__} "
                    f"(registered: {', '.join(c.__name__ for c in _FAMILIES)})")


@functools.lru_cache(maxsize=64)
def _cached_model(config: Any) -> BaseModel:
    return _family_of(config)(config)


def model_for(what: Any) -> BaseModel:
    """The model object of a config, a Flax module built from one, or a model object (one object
    per config, so its module and jitted functions are shared)."""
    if isinstance(what, BaseModel):
        return what
    config = what.config if isinstance(what, nn.Module) else what
    try:
        return _cached_model(config)
    except TypeError as error:  # an unhashable config: no sharing, same behaviour
        if "unhashable" not in str(error):
            raise
        return _family_of(config)(config)


__all__ = [
    "BaseModel",
    "DecoderOnlyModel",
    "EncoderDecoderModel",
    "families_by_type",
    "model_for",
    "register_family",
    "registered_families",
]
