"""The registered model families: GPT-2 (decoder-only) and T5 (encoder-decoder).

Each is the protocol of :mod:`tw_jax.models.base` with its config and module, its Hugging Face
loader, its FLOP layout, and how it reads an answer from decoded text. A new family is a module
like this one: a subclass of :class:`~tw_jax.models.base.DecoderOnlyModel` or
:class:`~tw_jax.models.base.EncoderDecoderModel`, decorated with
:func:`~tw_jax.models.base.register_family`.
"""

from __future__ import annotations

from typing import Any

from tw_jax.models import flop_layout
from tw_jax.models.base import DecoderOnlyModel, EncoderDecoderModel, register_family
from tw_jax.models.gpt2 import GPT2, GPT2Config
from tw_jax.models.hf_io import load_gpt2, save_gpt2
from tw_jax.models.t5 import T5, T5Config
from tw_jax.models.t5_io import load_t5, save_t5
from tw_jax.text.answers import answer_from_gpt2, answer_from_t5


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
    fills_sentinel_spans = True

    @classmethod
    def load_hf(cls, folder: str, **overrides: Any) -> tuple[Any, Any]:
        return load_t5(folder, **overrides)

    def save_hf(self, folder: str, params: Any) -> None:
        save_t5(folder, self.config, params)

    def flop_layout(self) -> tuple[dict[str, Any], Any]:
        return flop_layout.t5_layout(self.config)

    def answer_text(self, text: str) -> str:
        return answer_from_t5(text)
