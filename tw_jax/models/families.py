"""The registered model families: GPT-2, the Llama-style decoders (Llama, Qwen2, Qwen3,
Mistral) and Gemma 3 (decoder-only), T5 and BART (encoder-decoders).

Each is the protocol of :mod:`tw_jax.models.base` with its config and module, its Hugging Face
loader, its FLOP layout, and how it reads an answer from decoded text. A new family is a module
like this one: a subclass of :class:`~tw_jax.models.base.DecoderOnlyModel` or
:class:`~tw_jax.models.base.EncoderDecoderModel`, decorated with
:func:`~tw_jax.models.base.register_family`; a decoder read from Hugging Face like Llama's and
Gemma's subclasses :class:`HFDecoderModel` and names its classes, loader, writer and layout.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import flax.linen as nn
import jax

from tw_jax.data.model_folder import has_tokenizer
from tw_jax.data.tokens import Span, encode_with_offsets, span_mask
from tw_jax.models import flop_layout, t5_fill
from tw_jax.models.bart import BART, BARTConfig
from tw_jax.models.bart_io import BIAS, load_bart, save_bart
from tw_jax.models.base import (
    DecoderOnlyModel,
    EncoderDecoderModel,
    filler_start,
    register_family,
)
from tw_jax.models.gemma import Gemma, Gemma3MultimodalConfig, GemmaConfig
from tw_jax.models.gemma_io import load_gemma, save_gemma
from tw_jax.models.gpt2 import GPT2, GPT2Config
from tw_jax.models.hf_io import load_gpt2, save_gpt2
from tw_jax.models.llama import Llama, LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config
from tw_jax.models.llama_io import load_llama, save_llama
from tw_jax.models.t5 import T5, T5Config
from tw_jax.models.t5_fill import SENTINEL, SENTINEL_END
from tw_jax.models.t5_io import load_t5, save_t5
from tw_jax.models.token_scores import Seq2SeqExample, TokenScores
from tw_jax.models.variants import FROZEN, TRAINABLE, ParamCount, param_labels, path_names
from tw_jax.preprocess.probes.probe_csv import masked_cloze
from tw_jax.text.answers import answer_from_bart, answer_from_gpt2, answer_from_t5


@register_family
class GPT2Model(DecoderOnlyModel):
    """GPT-2: trained on LM DiffSets, prompts continued, answers up to the first line break."""

    config_class = GPT2Config
    module_class = GPT2
    model_type = "gpt2"
    objective = "lm"
    vocabulary_kind = "gpt2"

    @classmethod
    def load_hf(cls, folder: str, **overrides: Any) -> tuple[Any, Any]:
        return load_gpt2(folder, **overrides)

    def save_hf(self, folder: str, params: Any) -> None:
        save_gpt2(folder, self.config, params)

    def flop_layout(self) -> tuple[dict[str, Any], Any]:
        return flop_layout.gpt2_layout(self.config)

    def answer_text(self, text: str) -> str:
        return answer_from_gpt2(text)


@register_family
class T5Model(EncoderDecoderModel):
    """T5: trained with salient span masking; prompts hold ``<extra_id_0>``, answers are the
    first sentinel span."""

    config_class = T5Config
    module_class = T5
    model_type = "t5"
    objective = "ssm"
    vocabulary_kind = "t5"

    @classmethod
    def load_hf(cls, folder: str, **overrides: Any) -> tuple[Any, Any]:
        return load_t5(folder, **overrides)

    def save_hf(self, folder: str, params: Any) -> None:
        save_t5(folder, self.config, params)

    def flop_layout(self) -> tuple[dict[str, Any], Any]:
        return flop_layout.t5_layout(self.config)

    def answer_text(self, text: str) -> str:
        return answer_from_t5(text)

    def probe_prompt(self, row: Mapping[str, str], *, cloze: bool = False) -> str:
        """``subject relation <extra_id_0>``, or with ``cloze`` the cloze sentence with the
        object masked where the row has one."""
        masked = masked_cloze(row) if cloze else None
        return masked if masked is not None else f"{row['subject']} {row['relation']} {SENTINEL}"

    def probe_example(self, vocabulary: Any, row: Mapping[str, str], variant: str, *,
                      prepend_bos: bool = True) -> Any:
        """The object as the sentinel span of the probe's prompt (not the sentinel, not EOS)."""
        return self._probe_example(vocabulary, row, variant, sentinel=True,
                                   prepend_bos=prepend_bos)

    def fill_example(self, vocabulary: Any, prompt: str, filler: str, *,
                     separator: str = " ") -> Seq2SeqExample:
        """The target ``<extra_id_0> filler`` after the prompt, which holds ``<extra_id_0>`` or
        gets it appended; the filler's tokens (with the space before it) are scored."""
        prompt = prompt if SENTINEL in prompt else f"{prompt} {SENTINEL}"
        target = f"{SENTINEL} {filler}"
        return self.span_example(vocabulary, prompt, target, [(len(SENTINEL), len(target))])

    def cloze_example(self, vocabulary: Any, left: str, filler: str, right: str, *,
                      max_length: int | None = None) -> tuple[Any, bool]:
        """Input ``left <extra_id_0> right`` + EOS, target ``<extra_id_0> filler <extra_id_1>``
        + EOS; only the filler's tokens between the two sentinels are scored. Nothing is cut
        (relative positions)."""
        target = f"{SENTINEL} {filler} {SENTINEL_END}"
        span = (len(SENTINEL), len(SENTINEL) + 1 + len(filler))
        return self.span_example(vocabulary, left + SENTINEL + right, target, [span]), False

    def cloze_fillers(self, params: Any, vocabulary: Any, sentences: Sequence[str], *, k: int,
                      beam_size: int, max_new_tokens: int,
                      batch_size: int = 8) -> list[list[str]] | None:
        """The first spans of beam search's finished sequences (:func:`t5_fill.top_k_spans`)."""
        return t5_fill.top_k_spans(self.module, params, vocabulary, sentences, k=k,
                                   beam_size=beam_size, max_new_tokens=max_new_tokens,
                                   batch_size=batch_size)


@register_family
class BARTModel(EncoderDecoderModel):
    """BART: a denoising autoencoder. A masked text carries ``<mask>`` and the target is the whole
    text; texts are framed ``<s> … </s>`` on both sides, as BART's tokenizer and pre-training
    frame them (ECBD, Section 3: "We follow the target sequence format used in LMs'
    pre-training tasks").

    ``objective`` is BART's own, ``denoise``: no registered task has that form yet (the ``ssm``
    tasks are tokenised for T5, the ``lm`` ones are decoder-only rows), so a training run names
    a task that does not exist and stops there, rather than training on another vocabulary's ids.
    """

    config_class = BARTConfig
    module_class = BART
    model_type = "bart"
    objective = "denoise"
    vocabulary_kind = "bart"
    mask_token = "<mask>"  # a masked text carries it; the target is the whole text

    @property
    def max_length(self) -> int | None:
        return int(self.config.max_position_embeddings)

    @property
    def bos_id(self) -> int:
        return int(self.config.bos_token_id)

    def span_example(self, vocabulary: Any, source: str, target: str,
                     spans: Sequence[Span] | None = None, *, separator: str = "",
                     prepend_bos: bool = True) -> Seq2SeqExample:
        """``<s> source </s>`` and ``<s> target </s>``; ``<s>`` and ``</s>`` are never scored."""
        input_ids, _ = encode_with_offsets(vocabulary, source)
        target_ids, offsets = encode_with_offsets(vocabulary, target)
        weights = ([1.0] * len(target_ids) if spans is None
                   else [float(f) for f in span_mask(offsets, spans)])
        bos, eos = self.bos_id, self.eos_id
        return Seq2SeqExample((bos, *input_ids, eos), (bos, *target_ids, eos),
                              (0.0, *weights, 0.0))

    def sequence_example(self, ids: Sequence[int], weights: Sequence[float]) -> Seq2SeqExample:
        """The tokens after ``<s>`` as targets of an empty source (``<s> </s>``)."""
        return Seq2SeqExample((self.bos_id, self.eos_id), (self.bos_id, *ids),
                              (0.0, *(float(w) for w in weights)))

    def truncate_left(self, example: Any, max_length: int | None) -> tuple[Any, bool]:
        """Drop the tokens after ``<s>`` of the source and of the target until each fits in
        ``max_length`` positions (the left context); cutting a scored token is an error."""
        if max_length is None:
            return example, False
        inputs, targets, weights = example.inputs, example.targets, example.weights
        cut_in, cut_out = max(0, len(inputs) - max_length), max(0, len(targets) - max_length)
        if any(weights[1 : 1 + cut_out]):
            raise ValueError(f"a scored token lies in the first {cut_out} target tokens that "
                             f"{len(targets)} tokens must lose to fit {max_length} positions")
        if not cut_in and not cut_out:
            return example, False
        return Seq2SeqExample(inputs[:1] + inputs[1 + cut_in :], targets[:1] + targets[1 + cut_out :],
                              weights[:1] + weights[1 + cut_out :]), True

    def score(self, params: Any, examples: Sequence[Any], *, batch_size: int = 32) -> TokenScores:
        """As every encoder-decoder; an example longer than the learned positions is an error
        (a position past the table would read no embedding at all)."""
        limit = self.max_length
        for number, example in enumerate(examples):
            longest = max(len(example.inputs), len(example.targets))
            if limit is not None and longest > limit:
                raise ValueError(f"example {number} has {longest} tokens; BART takes at most "
                                 f"{limit} (truncate_left cuts the left context)")
        return super().score(params, examples, batch_size=batch_size)

    def prompt_ids(self, vocabulary: Any, text: str) -> list[int]:
        return [self.bos_id, *vocabulary.encode(text), self.eos_id]

    def cloze_example(self, vocabulary: Any, left: str, filler: str, right: str, *,
                      max_length: int | None = None) -> tuple[Any, bool]:
        """Input ``left <mask> right``, target the whole text with the filler in place, both
        framed ``<s> … </s>``; only the filler's tokens are scored, teacher forcing feeding the
        decoder the left context before them (ECBD, Section 3). A context longer than
        ``max_length`` loses its first tokens."""
        text = left + filler
        return self.truncate_left(self.span_example(
            vocabulary, left + self.mask_token + right, text + right,
            [(filler_start(left), len(text))]), max_length)

    def param_labels(self, params: Any) -> Any:
        """The method's labels, with ``final_logits_bias`` always frozen: Hugging Face keeps it
        as a buffer that no optimizer sees."""
        labels = param_labels(self.config, params)
        return jax.tree_util.tree_map_with_path(
            lambda path, label: FROZEN if BIAS in path_names(path) else label, labels)

    def count_params(self, params: Any | None = None) -> ParamCount:
        """Trainable (under :meth:`param_labels`) and total parameters; from shapes alone when
        ``params`` is None. The tied LM head is the shared embedding and counts once."""
        if params is None:
            params = self.abstract_variables()["params"]
        params = nn.unbox(params)
        sizes = [math.prod(leaf.shape) for leaf in jax.tree.leaves(params)]
        labels = jax.tree.leaves(self.param_labels(params))
        trainable = sum(size for size, label in zip(sizes, labels, strict=True)
                        if label == TRAINABLE)
        return ParamCount(int(trainable), int(sum(sizes)))

    @classmethod
    def load_hf(cls, folder: str, **overrides: Any) -> tuple[Any, Any]:
        return load_bart(folder, **overrides)

    def save_hf(self, folder: str, params: Any) -> None:
        save_bart(folder, self.config, params)

    def flop_layout(self) -> tuple[dict[str, Any], Any]:
        return flop_layout.bart_layout(self.config)

    def answer_text(self, text: str) -> str:
        return answer_from_bart(text)


class HFDecoderModel(DecoderOnlyModel):
    """A decoder-only language model read from Hugging Face (the Llama-style decoders, Gemma 3):
    trained on LM DiffSets like GPT-2, prompts continued, answers up to the first line break,
    as long as its config's ``max_position_embeddings``. A family subclasses it with its config
    and module classes, its ``model_type``, its loader and writer (``*_io.py``) and its FLOP
    layout; it is not a family itself (no config class, never registered).

    Its vocabulary is its config's ``tokenizer``: a name (a model folder's ``tokenizer.json``,
    :mod:`tw_jax.data.hf_tokenizer`, whose tasks are ``*_lm_<name>``), set by :meth:`load_hf`
    from a folder that has one; or None, GPT-2's vocabulary and its ``_lm`` tasks (the tiny
    configs of tests and smoke runs, 50,257 ids).
    """

    # The family's Hugging Face folder reader ``(folder, **overrides) -> (config, params)``,
    # writer ``(folder, config, params)`` and FLOP layout ``(config) -> (parts, locate)``.
    hf_loader: ClassVar[Callable[..., tuple[Any, Any]]]
    hf_saver: ClassVar[Callable[[str, Any, Any], None]]
    layout: ClassVar[Callable[[Any], tuple[dict[str, Any], Any]]]

    @property
    def objective(self) -> str:  # type: ignore[override]
        from tw_jax.tasks import names  # the task layer, imported only when tasks are wanted

        return names.lm_objective(self.config.tokenizer)

    @property
    def vocabulary_kind(self) -> str:  # type: ignore[override]
        return "gpt2" if self.config.tokenizer is None else "model"

    @property
    def max_length(self) -> int | None:
        return int(self.config.max_position_embeddings)

    @classmethod
    def load_hf(cls, folder: str, **overrides: Any) -> tuple[Any, Any]:
        """The folder's model; with a ``tokenizer.json`` there, its tokenizer is the model's,
        named after the folder (``Llama-3.2-1B`` -> ``llama_3_2_1b``) unless ``tokenizer`` is
        given."""
        return cls.hf_loader(folder, **_with_tokenizer(folder, overrides))

    @classmethod
    def hf_folder_config(cls, folder: str, hf: Mapping[str, Any], **overrides: Any) -> Any:
        return cls.config_class.from_hf_config(dict(hf), **_with_tokenizer(folder, overrides))

    def save_hf(self, folder: str, params: Any) -> None:
        type(self).hf_saver(folder, self.config, params)

    def flop_layout(self) -> tuple[dict[str, Any], Any]:
        return type(self).layout(self.config)

    def answer_text(self, text: str) -> str:
        return answer_from_gpt2(text)


def _with_tokenizer(folder: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with the folder's tokenizer as the model's (named after the folder) where
    the folder has a ``tokenizer.json`` and no ``tokenizer`` is given."""
    if "tokenizer" in overrides or not has_tokenizer(folder):
        return overrides
    from tw_jax.tasks import names  # the task layer, imported only when a tokenizer is named

    return {**overrides,
            "tokenizer": names.tokenizer_name(os.path.basename(folder.rstrip("/")))}


class LlamaModel(HFDecoderModel):
    """A Llama-style decoder (``tw_jax/models/llama.py``). One class for the four model types,
    which differ in config fields only; each type is registered as its own subclass below, as
    the registry maps a config class (and a ``config.json``'s ``model_type``) to one family."""

    config_class = LlamaConfig
    module_class = Llama
    model_type = "llama"
    hf_loader = staticmethod(load_llama)
    hf_saver = staticmethod(save_llama)
    layout = staticmethod(flop_layout.llama_layout)


# The subclass configs first: the registry finds a config's family by isinstance, in this order.
@register_family
class Qwen2Model(LlamaModel):
    """Qwen 2 / 2.5: biases on the query, key and value projections."""

    config_class = Qwen2Config
    model_type = "qwen2"


@register_family
class Qwen3Model(LlamaModel):
    """Qwen 3: RMSNorm on queries and keys, ``head_dim`` of its own."""

    config_class = Qwen3Config
    model_type = "qwen3"


@register_family
class MistralModel(LlamaModel):
    """Mistral: sliding-window attention."""

    config_class = MistralConfig
    model_type = "mistral"


register_family(LlamaModel)


class GemmaModel(HFDecoderModel):
    """Gemma 3's text decoder (``tw_jax/models/gemma.py``, ``model_type`` ``gemma3_text``).

    Its rows start with its tokenizer's ``<bos>`` (:meth:`span_example` puts the vocabulary's
    BOS in front, :func:`tw_jax.data.tokens.prefix_id`).
    """

    config_class = GemmaConfig
    module_class = Gemma
    model_type = "gemma3_text"
    hf_loader = staticmethod(load_gemma)
    hf_saver = staticmethod(save_gemma)
    layout = staticmethod(flop_layout.gemma_layout)


# The subclass config first, as for the Llama types: the registry finds a family by isinstance.
@register_family
class Gemma3MultimodalModel(GemmaModel):
    """A multimodal Gemma 3 folder (``model_type`` ``gemma3``): its text decoder only, loaded as
    a :class:`GemmaConfig` model (whose family is :class:`GemmaModel`); it exports as
    ``gemma3_text``."""

    config_class = Gemma3MultimodalConfig
    model_type = "gemma3"


register_family(GemmaModel)
