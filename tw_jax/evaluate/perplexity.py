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

import numpy as np

from tw_jax.data.tokens import Span, object_span
from tw_jax.models import model_for
from tw_jax.tasks.probes import SENTINEL, masked_cloze, probe_text

VARIANTS = ("text", "object", "cloze")


def _object_text(row: Mapping[str, str]) -> tuple[str, Span]:
    """GPT-2's object variant: ``subject relation object`` and the object's characters."""
    prefix = f"{row['subject']} {row['relation']}"
    text = f"{prefix} {row['object']}"
    return text, (len(prefix), len(text))  # the space belongs to the object (tokens.object_span)


def _t5_target(obj: str) -> tuple[str, Span]:
    """A sentinel answer ``<extra_id_0> object`` and the object's characters."""
    text = f"{SENTINEL} {obj}"
    return text, (len(SENTINEL), len(text))


def probe_examples(
    model: Any, vocabulary: Any, rows: Sequence[Mapping[str, str]], variant: str, *,
    prepend_bos: bool = True,
) -> list[Any]:
    """The scoring examples of probe ``rows`` for a variant (see the module docstring), as
    ``model`` (a model object, config or module) builds them."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    model = model_for(model)
    examples: list[Any] = []
    for row in rows:
        obj = row["object"]
        cloze = masked_cloze(row) if variant == "cloze" else None
        if model.fills_sentinel_spans:
            source = cloze if cloze is not None else f"{row['subject']} {row['relation']} {SENTINEL}"
            target, span = _t5_target(obj)
            examples.append(model.span_example(vocabulary, source, target, [span]))
        elif variant == "text":
            examples.append(model.span_example(vocabulary, "", probe_text(row),
                                               prepend_bos=prepend_bos))
        else:
            text, span = _object_text(row)
            if cloze is not None:
                text, span = row["cloze"], object_span(row["cloze"], obj)
            examples.append(model.span_example(vocabulary, "", text, [span],
                                               prepend_bos=prepend_bos))
    return examples


def probe_perplexities(
    model: Any,
    params: Any,
    vocabulary: Any,
    rows: Sequence[Mapping[str, str]],
    variant: str = "text",
    *,
    batch_size: int = 32,
    prepend_bos: bool = True,
) -> np.ndarray:
    """Per-instance perplexities of probe ``rows`` (CSV rows as dicts), in row order."""
    model = model_for(model)
    examples = probe_examples(model, vocabulary, rows, variant, prepend_bos=prepend_bos)
    return model.score(params, examples, batch_size=batch_size).perplexities()


def mean_perplexity(perplexities: Sequence[float] | np.ndarray) -> float:
    """The category's number: the mean of per-instance perplexities (NaN-free input required)."""
    values = np.asarray(perplexities, np.float64)
    if values.size == 0:
        raise ValueError("no instances to average")
    if np.isnan(values).any():
        raise ValueError(f"{int(np.isnan(values).sum())} instances had no scored token")
    return float(values.mean())
