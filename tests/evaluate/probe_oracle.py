"""Row-by-row probe scoring, the tests' oracle for the seqio path.

``tw-jax eval`` and the lifelong runner measure probes through the probe tasks and
``seqio.Evaluator`` (:mod:`tw_jax.evaluate.mixture_eval`); these functions compute the same
figures one probe row at a time from the model's own examples (``probe_example``,
``probe_prompt``), so the tests can check that both give the same numbers and check either
against hand computations.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.evaluate.qa import (
    TEACHER_FORCED,
    decode_answers,
    qa_scores,
    resolve_protocol,
    until_first_period,
)
from tw_jax.evaluate.rank import PREVIOUS_SEPARATOR
from tw_jax.models import model_for
from tw_jax.models.token_scores import CausalExample, Seq2SeqExample, bucket_length
from tw_jax.tasks.metrics import instance_perplexities


def probe_examples(model: Any, vocabulary: Any, rows: Sequence[Mapping[str, str]], variant: str,
                   *, prepend_bos: bool = True) -> list[Any]:
    """The model's scoring example of each probe row for a perplexity variant."""
    model = model_for(model)
    return [model.probe_example(vocabulary, row, variant, prepend_bos=prepend_bos)
            for row in rows]


def probe_perplexities(model: Any, params: Any, vocabulary: Any,
                       rows: Sequence[Mapping[str, str]], variant: str = "text", *,
                       batch_size: int = 32, prepend_bos: bool = True) -> np.ndarray:
    """Per-instance perplexities of probe ``rows``, in row order."""
    model = model_for(model)
    examples = probe_examples(model, vocabulary, rows, variant, prepend_bos=prepend_bos)
    scores = model.score(params, examples, batch_size=batch_size)
    return instance_perplexities(scores.log_likelihood, scores.num_tokens)


@functools.partial(jax.jit, static_argnums=0)
def _argmax_tokens(model: Any, params: Any, batch: Mapping[str, jax.Array]) -> jax.Array:
    return jnp.argmax(model.logits(params, batch, deterministic=True, rng=None), axis=-1)


def _teacher_forced_batch(model: Any, examples: Sequence[Any], rows: int
                          ) -> tuple[dict[str, np.ndarray], list[list[int]]]:
    """Model features of ``examples`` (``rows`` rows) and, per example, the positions whose
    logits predict its scored tokens: a causal token ``t`` at position ``t - 1``, a target
    ``t`` at decoder position ``t`` (the decoder reads the targets after the start token)."""
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
    assert all(isinstance(e, Seq2SeqExample) for e in examples)
    in_len = bucket_length(max(len(e.inputs) for e in examples))
    out_len = bucket_length(max(len(e.targets) for e in examples))
    inputs, input_mask = np.zeros((rows, in_len), np.int32), np.zeros((rows, in_len), np.int32)
    decoder, decoder_mask = np.zeros((rows, out_len), np.int32), np.zeros((rows, out_len), np.int32)
    for i, example in enumerate(examples):
        inputs[i, : len(example.inputs)] = example.inputs
        input_mask[i, : len(example.inputs)] = 1
        shifted = [model.decoder_start_id, *example.targets[:-1]]
        decoder[i, : len(shifted)] = shifted
        decoder_mask[i, : len(shifted)] = 1
    input_mask[n:, 0] = decoder_mask[n:, 0] = 1  # filler rows attend to one token, not none
    positions = [[t for t, w in enumerate(e.weights) if w > 0] for e in examples]
    return {"encoder_input_tokens": inputs, "encoder_mask": input_mask,
            "decoder_input_tokens": decoder, "decoder_mask": decoder_mask}, positions


def teacher_forced_answers(model: Any, params: Any, vocabulary: Any,
                           rows: Sequence[Mapping[str, str]], *, cloze: bool = False,
                           batch_size: int = 32) -> list[str]:
    """TemporalWiki's teacher-forced answers (:mod:`tw_jax.evaluate.qa`): the argmax tokens at
    the gold object's positions, EOS dropped, detokenised and cut after the first "."."""
    model = model_for(model)
    examples = [model.truncate_left(e, model.max_length)[0] for e in probe_examples(
        model, vocabulary, rows, "cloze" if cloze else "object")]
    eos = vocabulary.eos_id
    answers: list[str] = []
    for start in range(0, len(examples), batch_size):
        batch, positions = _teacher_forced_batch(model, examples[start : start + batch_size],
                                                 batch_size)
        argmax = np.asarray(_argmax_tokens(model, params, batch))
        for i, where in enumerate(positions):
            predicted = [int(t) for t in argmax[i, where] if int(t) != eos]
            answers.append(until_first_period(vocabulary.decode(predicted).strip()))
    return answers


def probe_answers(model: Any, params: Any, vocabulary: Any, rows: Sequence[Mapping[str, str]],
                  *, protocol: str | None = None, cloze: bool = False, max_new_tokens: int = 10,
                  beam_size: int = 1, batch_size: int = 32) -> list[str]:
    """Each probe row's answer under ``protocol`` (None: the model's own)."""
    model = model_for(model)
    if resolve_protocol(model, protocol) == TEACHER_FORCED:
        return teacher_forced_answers(model, params, vocabulary, rows, cloze=cloze,
                                      batch_size=batch_size)
    prompts = [model.probe_prompt(row, cloze=cloze) for row in rows]
    return decode_answers(model, params, vocabulary, prompts, max_new_tokens=max_new_tokens,
                          beam_size=beam_size, batch_size=batch_size)


def previous_answers(row: Mapping[str, str]) -> list[str]:
    """The ``previous_object`` of a probe row, split on `` | `` (empty when none)."""
    return [p for p in row.get("previous_object", "").split(PREVIOUS_SEPARATOR) if p.strip()]


def probe_qa(model: Any, params: Any, vocabulary: Any, rows: Sequence[Mapping[str, str]],
             **options: Any) -> tuple[dict[str, float], list[str]]:
    """EM/F1 (and the previous-answer scores) of probe rows, and the predictions."""
    predictions = probe_answers(model, params, vocabulary, rows, **options)
    scores = qa_scores(predictions, [[r["object"]] for r in rows],
                       [previous_answers(r) for r in rows])
    return scores, predictions
