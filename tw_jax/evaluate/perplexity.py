"""Probe perplexity per instance (TemporalWiki footnote 6), for GPT-2 and T5, three variants.

``ppl_i = exp(-mean log p over the instance's scored tokens)``; a category's number is the mean
of ``ppl_i`` over its instances (:func:`mean_perplexity`), not the token-level perplexity.

Variants (``variant=``), with the formats of :mod:`tw_jax.tasks.probes`:

- ``"text"`` — GPT-2: the probe text ``subject relation object``, every token. The text is
  preceded by EOS acting as BOS (GPT-2's ``<|endoftext|>`` is its BOS), so the first token is
  scored too and a one-token probe still has a perplexity; ``prepend_bos=False`` follows the
  reference code instead (tokens 2..n given the previous ones). T5: the object given
  ``subject relation <extra_id_0>``: inputs ``subject relation <extra_id_0>`` + EOS, targets
  ``<extra_id_0> object`` + EOS as the tasks feed them, scoring only the object's tokens (not the
  sentinel, not EOS: ECBD scores the masked span only) — the metric is about the object.
- ``"object"`` — the object's tokens only: GPT-2 given ``subject relation``; T5 as ``"text"``.
- ``"cloze"`` — the natural ``cloze`` sentence: GPT-2 scores the object's tokens given the
  sentence before them; T5 scores the object given the sentence with the object replaced by
  ``<extra_id_0>``. Rows without a cloze sentence containing the object fall back to
  ``"object"`` (as the tasks do), so every row has a value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import flax.linen as nn
import numpy as np

from tw_jax.evaluate.scorer import (
    CausalExample,
    Seq2SeqExample,
    TokenScores,
    is_encoder_decoder,
    score_causal,
    score_seq2seq,
)
from tw_jax.evaluate.tokens import Span, encode_with_offsets, object_span, span_mask
from tw_jax.tasks.probes import SENTINEL, masked_cloze, probe_text

VARIANTS = ("text", "object", "cloze")


def causal_example(
    vocabulary: Any, text: str, spans: Sequence[Span] | None = None, *, prepend_bos: bool = True
) -> CausalExample:
    """``text`` as a GPT-2 example: every token scored, or those overlapping ``spans``."""
    ids, offsets = encode_with_offsets(vocabulary, text)
    if not ids:
        raise ValueError(f"nothing to score: {text!r} has no tokens")
    weights = [1.0] * len(ids) if spans is None else [float(f) for f in span_mask(offsets, spans)]
    if prepend_bos:
        return CausalExample((vocabulary.eos_id, *ids), (0.0, *weights))
    return CausalExample(tuple(ids), (0.0, *weights[1:]))


def seq2seq_example(vocabulary: Any, inputs: str, targets: str, spans: Sequence[Span]) -> Seq2SeqExample:
    """A T5 example, EOS after inputs and targets; the target tokens overlapping ``spans`` score."""
    input_ids, _ = encode_with_offsets(vocabulary, inputs)
    target_ids, offsets = encode_with_offsets(vocabulary, targets)
    weights = [float(f) for f in span_mask(offsets, spans)] + [0.0]
    eos = vocabulary.eos_id
    return Seq2SeqExample((*input_ids, eos), (*target_ids, eos), tuple(weights))


def _object_text(row: Mapping[str, str]) -> tuple[str, Span]:
    """GPT-2's object variant: ``subject relation object`` and the object's characters."""
    prefix = f"{row['subject']} {row['relation']}"
    text = f"{prefix} {row['object']}"
    return text, (len(prefix), len(text))  # the space belongs to the object (tokens.object_span)


def _t5_target(obj: str) -> tuple[str, Span]:
    text = f"{SENTINEL} {obj}"
    return text, (len(SENTINEL), len(text))


def probe_examples(
    vocabulary: Any, rows: Sequence[Mapping[str, str]], variant: str, *, t5: bool,
    prepend_bos: bool = True,
) -> list[CausalExample] | list[Seq2SeqExample]:
    """The scoring examples of probe ``rows`` for a variant (see the module docstring)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    examples: list[Any] = []
    for row in rows:
        obj = row["object"]
        cloze = masked_cloze(row) if variant == "cloze" else None
        if t5:
            source = cloze if cloze is not None else f"{row['subject']} {row['relation']} {SENTINEL}"
            target, span = _t5_target(obj)
            examples.append(seq2seq_example(vocabulary, source, target, [span]))
        elif variant == "text":
            examples.append(causal_example(vocabulary, probe_text(row), prepend_bos=prepend_bos))
        else:
            text, span = _object_text(row)
            if cloze is not None:
                text, span = row["cloze"], object_span(row["cloze"], obj)
            examples.append(causal_example(vocabulary, text, [span], prepend_bos=prepend_bos))
    return examples


def score_examples(
    model: nn.Module, params: Any, examples: Sequence[Any], *, batch_size: int = 32
) -> TokenScores:
    if is_encoder_decoder(model):
        return score_seq2seq(model, params, examples, batch_size=batch_size)
    return score_causal(model, params, examples, batch_size=batch_size)


def probe_perplexities(
    model: nn.Module,
    params: Any,
    vocabulary: Any,
    rows: Sequence[Mapping[str, str]],
    variant: str = "text",
    *,
    batch_size: int = 32,
    prepend_bos: bool = True,
) -> np.ndarray:
    """Per-instance perplexities of probe ``rows`` (CSV rows as dicts), in row order."""
    examples = probe_examples(
        vocabulary, rows, variant, t5=is_encoder_decoder(model), prepend_bos=prepend_bos
    )
    return score_examples(model, params, examples, batch_size=batch_size).perplexities()


def mean_perplexity(perplexities: Sequence[float] | np.ndarray) -> float:
    """The category's number: the mean of per-instance perplexities (NaN-free input required)."""
    values = np.asarray(perplexities, np.float64)
    if values.size == 0:
        raise ValueError("no instances to average")
    if np.isnan(values).any():
        raise ValueError(f"{int(np.isnan(values).sum())} instances had no scored token")
    return float(values.mean())
