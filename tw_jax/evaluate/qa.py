"""EM and F1 of probe answers (SQuAD normalisation), against the new and the previous answer.

What a model's answer is, the *protocol* (``protocol=``, one of :data:`PROTOCOLS`):

- ``"teacher_forced"`` — how the TemporalWiki reference code scores GPT-2 (TemporalWiki: "We
  also show the F1 score on TWIKI-PROBES in Table 6"; the paper does not say how): the prompt and the gold answer are read as one row, the model's argmax is taken at every position
  that predicts a gold-answer token, those argmax tokens (as many as the gold answer has) are
  detokenised, the text is cut after its first "." if it has one, and that is scored against the
  gold answer. The row is the one probe perplexity scores (:mod:`tw_jax.evaluate.perplexity`,
  variant ``object``, or ``cloze`` with ``cloze=True``): for GPT-2, EOS standing for BOS, then
  ``subject relation object``, the object's tokens being the gold answer's; EOS among the argmax
  tokens is dropped, as the reference's ``skip_special_tokens`` drops it.
- ``"free"`` — the answer the model writes from the prompt alone: greedy decoding
  (``beam_size=1``) or beam search of ``max_new_tokens`` tokens, batched with padded static shapes
  (GPT-2 prompts are left-padded, T5 inputs right-padded). GPT-2 continues ``subject relation``
  and the answer is the continuation up to its first line break or EOS; T5 fills
  ``subject relation <extra_id_0>`` (or the masked cloze sentence) and the answer is the first
  span after the sentinel.

``protocol=None`` takes :func:`default_protocol`: teacher-forced for a decoder-only model
(TemporalWiki's GPT-2), free decoding for an encoder-decoder (CKL and EvolvingQA decode T5's
answers; their numbers are unchanged). Scores come from :func:`tw_jax.tasks.metrics.squad`.

For UPDATED probes (and EvolvingQA's edited questions) ``previous`` answers give ``em_previous``
and ``f1_previous``: how often the model still says the outdated answer (under teacher forcing
the prediction has the new answer's length).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.evaluate.perplexity import probe_examples
from tw_jax.evaluate.rank import PREVIOUS_SEPARATOR
from tw_jax.models import DecoderOnlyModel, model_for
from tw_jax.models.token_scores import CausalExample, Seq2SeqExample, bucket_length
from tw_jax.tasks import metrics
from tw_jax.tasks.probes import SENTINEL, masked_cloze

TEACHER_FORCED, FREE = "teacher_forced", "free"
PROTOCOLS: tuple[str, ...] = (TEACHER_FORCED, FREE)


def default_protocol(model: Any) -> str:
    """The protocol of the paper a model's numbers reproduce: teacher-forced for a decoder-only
    model (TemporalWiki's GPT-2), free decoding for an encoder-decoder (CKL, EvolvingQA)."""
    return TEACHER_FORCED if isinstance(model_for(model), DecoderOnlyModel) else FREE


def resolve_protocol(model: Any, protocol: str | None) -> str:
    """``protocol``, or the model's default when None; an unknown name is an error."""
    if protocol is None:
        return default_protocol(model)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown QA protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    return protocol


def probe_prompt(row: Mapping[str, str], *, sentinel: bool, cloze: bool = False) -> str:
    """The prompt that asks a model for the row's object (``sentinel``: a model that fills
    sentinel spans, T5)."""
    if sentinel:
        masked = masked_cloze(row) if cloze else None
        return masked if masked is not None else f"{row['subject']} {row['relation']} {SENTINEL}"
    return f"{row['subject']} {row['relation']}"


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


@functools.partial(jax.jit, static_argnums=0)
def _argmax_tokens(model: Any, params: Any, batch: Mapping[str, jax.Array]) -> jax.Array:
    logits = model.logits(params, batch, deterministic=True, rng=None)
    return jnp.argmax(logits, axis=-1)


def _teacher_forced_batch(
    model: Any, examples: Sequence[Any], rows: int
) -> tuple[dict[str, np.ndarray], list[list[int]]]:
    """Model features of ``examples`` (``rows`` rows, a bucketed length) and, per example, the
    positions whose logits predict its scored tokens, in order.

    The two example shapes of :mod:`tw_jax.models.token_scores`, as the model's
    ``span_example`` builds them: a :class:`CausalExample`'s token ``t`` is predicted at
    position ``t - 1`` of its own right-padded row; a :class:`Seq2SeqExample`'s target ``t`` at
    decoder position ``t``, the decoder reading the targets shifted right after the start token.
    """
    n = len(examples)
    if all(isinstance(e, CausalExample) for e in examples):
        length = bucket_length(max(len(e.tokens) for e in examples))
        if model.max_length is not None:
            length = min(length, model.max_length)
        tokens, mask = np.zeros((rows, length), np.int32), np.zeros((rows, length), np.int32)
        for i, example in enumerate(examples):
            tokens[i, : len(example.tokens)] = example.tokens
            mask[i, : len(example.tokens)] = 1
        positions = [[t - 1 for t, w in enumerate(e.weights) if w > 0] for e in examples]
        return {"decoder_input_tokens": tokens, "decoder_mask": mask}, positions
    if all(isinstance(e, Seq2SeqExample) for e in examples):
        in_len = bucket_length(max(len(e.inputs) for e in examples))
        out_len = bucket_length(max(len(e.targets) for e in examples))
        inputs, input_mask = np.zeros((rows, in_len), np.int32), np.zeros((rows, in_len), np.int32)
        decoder, decoder_mask = (np.zeros((rows, out_len), np.int32),
                                 np.zeros((rows, out_len), np.int32))
        for i, example in enumerate(examples):
            inputs[i, : len(example.inputs)] = example.inputs
            input_mask[i, : len(example.inputs)] = 1
            shifted = [model.decoder_start_id, *example.targets[:-1]]
            decoder[i, : len(shifted)] = shifted
            decoder_mask[i, : len(shifted)] = 1
        input_mask[n:, 0] = decoder_mask[n:, 0] = 1  # filler rows attend to one token, not none
        positions = [[t for t, w in enumerate(e.weights) if w > 0] for e in examples]
        batch = {"encoder_input_tokens": inputs, "encoder_mask": input_mask,
                 "decoder_input_tokens": decoder, "decoder_mask": decoder_mask}
        return batch, positions
    kinds = sorted({type(e).__name__ for e in examples})
    raise TypeError(f"cannot teacher-force examples of kinds {kinds}")


def teacher_forced_answers(
    model: Any,
    params: Any,
    vocabulary: Any,
    rows: Sequence[Mapping[str, str]],
    *,
    cloze: bool = False,
    batch_size: int = 32,
) -> list[str]:
    """The ``"teacher_forced"`` answer of every probe row (module docstring): the argmax tokens
    at the gold object's positions, detokenised and cut after the first "."."""
    model = model_for(model)
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive: {batch_size}")
    variant = "cloze" if cloze else "object"
    examples = []
    for index, row in enumerate(rows):
        where = f"probe row {index} ({row.get('subject')!r} {row.get('relation')!r})"
        if not str(row.get("object", "")).strip():
            raise ValueError(f"{where}: no object to teacher-force")
        (example,) = probe_examples(model, vocabulary, [row], variant)
        example, _ = model.truncate_left(example, model.max_length)
        if not any(w > 0 for w in example.weights):
            raise ValueError(f"{where}: the object {row['object']!r} has no token to score "
                             f"within the model's {model.max_length} positions")
        examples.append(example)
    eos = vocabulary.eos_id
    answers: list[str] = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch, positions = _teacher_forced_batch(model, chunk, batch_size)
        argmax = np.asarray(_argmax_tokens(model, params, batch))
        for i, where in enumerate(positions):
            predicted = [int(t) for t in argmax[i, where] if int(t) != eos]
            answers.append(until_first_period(vocabulary.decode(predicted).strip()))
    return answers


# --- scores ------------------------------------------------------------------------------------


def probe_answers(
    model: Any,
    params: Any,
    vocabulary: Any,
    rows: Sequence[Mapping[str, str]],
    *,
    protocol: str | None = None,
    cloze: bool = False,
    max_new_tokens: int = 10,
    beam_size: int = 1,
    batch_size: int = 32,
) -> list[str]:
    """Each probe row's answer under ``protocol`` (None: :func:`default_protocol`);
    ``max_new_tokens`` and ``beam_size`` apply to free decoding only."""
    model = model_for(model)
    if resolve_protocol(model, protocol) == TEACHER_FORCED:
        return teacher_forced_answers(model, params, vocabulary, rows, cloze=cloze,
                                      batch_size=batch_size)
    prompts = [probe_prompt(r, sentinel=model.fills_sentinel_spans, cloze=cloze) for r in rows]
    return decode_answers(model, params, vocabulary, prompts, max_new_tokens=max_new_tokens,
                          beam_size=beam_size, batch_size=batch_size)


def previous_answers(row: Mapping[str, str]) -> list[str]:
    """The ``previous_object`` of a probe row, split on `` | `` (empty when none)."""
    return [p for p in row.get("previous_object", "").split(PREVIOUS_SEPARATOR) if p.strip()]


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


def probe_qa(
    model: Any,
    params: Any,
    vocabulary: Any,
    rows: Sequence[Mapping[str, str]],
    *,
    protocol: str | None = None,
    cloze: bool = False,
    max_new_tokens: int = 10,
    beam_size: int = 1,
    batch_size: int = 32,
) -> tuple[dict[str, float], list[str]]:
    """EM/F1 (and the previous-answer scores) of probe rows under ``protocol``; also returns
    the predictions."""
    predictions = probe_answers(
        model, params, vocabulary, rows, protocol=protocol, cloze=cloze,
        max_new_tokens=max_new_tokens, beam_size=beam_size, batch_size=batch_size,
    )
    scores = qa_scores(
        predictions, [[r["object"]] for r in rows], [previous_answers(r) for r in rows]
    )
    return scores, predictions
