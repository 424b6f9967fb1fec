"""EM and F1 of answers (SQuAD normalisation), against the new and the previous answer, and
how a model's answers are read: the QA *protocols* and free decoding.

What a model's answer to a probe is, the *protocol* (one of :data:`PROTOCOLS`), which
:class:`tw_jax.evaluate.seqio_eval.SeqioModel` applies to the probe tasks:

- ``"teacher_forced"`` — how the TemporalWiki reference code scores GPT-2 (TemporalWiki: "We
  also show the F1 score on TWIKI-PROBES in Table 6"; the paper does not say how): the prompt
  and the gold answer are read as one row, the model's argmax is taken at every position that
  predicts a gold-answer token, those argmax tokens (as many as the gold answer has) are
  detokenised, the text is cut after its first "." if it has one (:func:`until_first_period`),
  and that is scored against the gold answer. The row is the one probe perplexity scores (the
  probe tasks' ``object`` or ``cloze`` form): for GPT-2, EOS standing for BOS, then ``subject
  relation object``, the object's tokens being the gold answer's; EOS among the argmax tokens is
  dropped, as the reference's ``skip_special_tokens`` drops it.
- ``"free"`` — the answer the model writes from the prompt alone (:func:`decode_answers`):
  greedy decoding (``beam_size=1``) or beam search of ``max_new_tokens`` tokens, batched with
  padded static shapes (GPT-2 prompts are left-padded, T5 inputs right-padded). GPT-2 continues
  ``subject relation`` and the answer is the continuation up to its first line break or EOS; T5
  fills ``subject relation <extra_id_0>`` (or the masked cloze sentence) and the answer is the
  first span after the sentinel.

``protocol=None`` takes :func:`default_protocol`, the model's own
(:attr:`~tw_jax.models.base.BaseModel.qa_protocol`): teacher-forced for a decoder-only model
(TemporalWiki's GPT-2), free decoding for an encoder-decoder (CKL and EvolvingQA decode T5's
answers; their numbers are unchanged). Scores come from :func:`tw_jax.tasks.metrics.squad`.

For UPDATED probes (and EvolvingQA's edited questions) ``previous`` answers give ``em_previous``
and ``f1_previous``: how often the model still says the outdated answer (under teacher forcing
the prediction has the new answer's length).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tw_jax.models import model_for
from tw_jax.models.token_scores import bucket_length
from tw_jax.tasks import metrics

TEACHER_FORCED, FREE = "teacher_forced", "free"
PROTOCOLS: tuple[str, ...] = (TEACHER_FORCED, FREE)


def default_protocol(model: Any) -> str:
    """The protocol of the paper a model's numbers reproduce, the model's own: teacher-forced
    for a decoder-only model (TemporalWiki's GPT-2), free decoding for an encoder-decoder (CKL,
    EvolvingQA)."""
    return model_for(model).qa_protocol


def resolve_protocol(model: Any, protocol: str | None) -> str:
    """``protocol``, or the model's default when None; an unknown name is an error."""
    if protocol is None:
        return default_protocol(model)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown QA protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    return protocol


def decode_answers(
    model: Any,
    params: Any,
    vocabulary: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 10,
    beam_size: int = 1,
    batch_size: int = 32,
) -> list[str]:
    """The answer text each prompt gets (sentinels stripped for T5, first line for GPT-2)."""
    model = model_for(model)
    encoded = [model.prompt_ids(vocabulary, p) for p in prompts]
    if any(not e for e in encoded):
        raise ValueError("an empty prompt cannot be continued")
    return decode_token_rows(model, params, vocabulary, encoded, max_new_tokens=max_new_tokens,
                             beam_size=beam_size, batch_size=batch_size)


def decode_token_rows(
    model: Any, params: Any, vocabulary: Any, rows: Sequence[Sequence[int]], *,
    max_new_tokens: int, beam_size: int = 1, batch_size: int = 32,
) -> list[str]:
    """The answer each tokenised prompt (as the model's ``prompt_ids`` makes them) gets,
    batched with static shapes: ``batch_size`` rows padded to a bucketed length."""
    model = model_for(model)
    eos = vocabulary.eos_id
    answers: list[str] = []
    for start in range(0, len(rows), batch_size):
        chunk = [list(r) for r in rows[start : start + batch_size]]
        length = bucket_length(max(len(r) for r in chunk))
        ids, mask = model.prompt_rows(chunk, batch_size, length)
        out = model.decode(params, ids, mask, max_new_tokens=max_new_tokens, eos_id=eos,
                           beam_size=beam_size, pad_id=0)
        for row in np.asarray(out)[: len(chunk)]:
            tokens = row.tolist()
            if eos in tokens:
                tokens = tokens[: tokens.index(eos)]
            answers.append(model.answer_text(vocabulary.decode(tokens)))
    return answers


# --- teacher forcing ---------------------------------------------------------------------------


def until_first_period(text: str) -> str:
    """The text up to and including its first ".", all of it when it has none: the reference
    code's ``text[:text.find(".") + 1]`` on GPT-2's answers."""
    cut = text.find(".")
    return text if cut < 0 else text[: cut + 1]


# --- scores ------------------------------------------------------------------------------------


def qa_scores(
    predictions: Sequence[str],
    answers: Sequence[Sequence[str]],
    previous: Sequence[Sequence[str]] | None = None,
) -> dict[str, float]:
    """``em``/``f1`` against ``answers`` and, over rows with previous answers, ``em_previous``/
    ``f1_previous`` (percent): the probe tasks' own metric, :func:`tw_jax.tasks.metrics.squad`."""
    previous = previous if previous is not None else [[] for _ in answers]
    targets = [metrics.Target(answers=list(a), num_tokens=None, previous=list(p))
               for a, p in zip(answers, previous, strict=True)]
    return metrics.squad(targets, list(predictions))
