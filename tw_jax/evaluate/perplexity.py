"""Probe perplexity per instance (TemporalWiki footnote 6), for GPT-2 and T5, three variants.

``ppl_i = exp(-(1/|y_i|) Σ_j log p(y_ij | context))`` over instance ``i``'s scored tokens
``y_i``; a category's number is the mean of ``ppl_i`` over its instances
(:func:`mean_perplexity`), not the token-level perplexity: TemporalWiki (Jang et al. 2022),
footnote 6, "per-instance perplexity averaged over instances". Both formulas are
:mod:`tw_jax.tasks.metrics`'s, which ``tw-jax eval`` uses too; which tokens count is
:func:`tw_jax.tasks.probes.probe_spec`'s, which the probe tasks' features follow, so
``tw-jax eval`` on a probe task gives this module's number (``docs/metrics.md``).

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

from tw_jax.models import model_for
from tw_jax.tasks.metrics import instance_perplexities, mean_perplexity
from tw_jax.tasks.probes import VARIANTS, probe_spec

__all__ = ["VARIANTS", "mean_perplexity", "probe_examples", "probe_perplexities"]


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
        spec = probe_spec(row, variant, sentinel=model.fills_sentinel_spans)
        spans = None if spec.spans is None else list(spec.spans)
        examples.append(model.span_example(vocabulary, spec.source, spec.target, spans,
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
    scores = model.score(params, examples, batch_size=batch_size)
    return instance_perplexities(scores.log_likelihood, scores.num_tokens)
