"""Scoring against a hand computation; greedy, beam search and padding agree with each other."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tw_jax.models import decoding, scoring


def _tokens(seed: int, shape: tuple[int, int]) -> jnp.ndarray:
    return jnp.asarray(np.random.RandomState(seed).randint(0, 99, shape), jnp.int32)


def test_scores_equal_log_softmax_gather_by_hand(tiny_model):
    model, params = tiny_model
    tokens = _tokens(2, (3, 9))
    got = np.asarray(scoring.causal_lm_log_likelihoods(model, params, tokens))
    logits = np.asarray(jax.jit(model.apply)({"params": params}, tokens[:, :-1]), np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    targets = np.asarray(tokens[:, 1:])
    expected = np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    weights = np.ones_like(expected)
    weights[0, 4:] = 0
    np.testing.assert_allclose(
        scoring.sequence_log_likelihood(got, weights), (expected * weights).sum(-1), atol=1e-4
    )
    ppl = np.exp(-(expected * weights).sum() / weights.sum())
    np.testing.assert_allclose(scoring.perplexity(got, weights), ppl, rtol=1e-5)


def test_beam_one_equals_greedy_with_and_without_eos(tiny_model):
    model, params = tiny_model
    prompts = _tokens(3, (4, 6))
    free = decoding.greedy_decode(model, params, prompts, max_new_tokens=10, eos_id=None)
    beams, _ = decoding.beam_search(
        model, params, prompts, beam_size=1, max_new_tokens=10, eos_id=None
    )
    np.testing.assert_array_equal(beams[:, 0], free)
    eos = int(free[0, 3])  # a token row 0 emits mid-way, so EOS handling is exercised
    greedy = np.asarray(
        decoding.greedy_decode(model, params, prompts, max_new_tokens=10, eos_id=eos, pad_id=0)
    )
    beams, _ = decoding.beam_search(
        model, params, prompts, beam_size=1, max_new_tokens=10, eos_id=eos, pad_id=0
    )
    np.testing.assert_array_equal(beams[:, 0], greedy)
    first = int(np.argmax(np.asarray(free[0]) == eos))
    assert greedy[0, first] == eos and np.all(greedy[0, first + 1:] == 0)


def test_left_padded_rows_decode_as_they_would_alone(tiny_model):
    model, params = tiny_model
    long, short = _tokens(4, (1, 7)), _tokens(5, (1, 4))
    batch = jnp.concatenate([long, jnp.pad(short, ((0, 0), (3, 0)))], axis=0)
    mask = jnp.asarray([[1] * 7, [0, 0, 0, 1, 1, 1, 1]])
    together = decoding.greedy_decode(model, params, batch, mask, max_new_tokens=6, eos_id=None)
    for row, alone in enumerate([long, short]):
        expected = decoding.greedy_decode(model, params, alone, max_new_tokens=6, eos_id=None)
        np.testing.assert_array_equal(together[row], expected[0])


def test_beam_scores_are_teacher_forced_log_likelihoods(tiny_model):
    model, params = tiny_model
    prompts = _tokens(6, (2, 5))
    seqs, scores = decoding.beam_search(
        model, params, prompts, beam_size=3, max_new_tokens=6, eos_id=None
    )
    assert np.all(np.diff(np.asarray(scores), axis=1) <= 0)  # best first
    for beam in range(3):
        full = jnp.concatenate([prompts, seqs[:, beam]], axis=1)
        log_probs = scoring.causal_lm_log_likelihoods(model, params, full)[:, 4:]
        np.testing.assert_allclose(log_probs.sum(-1), scores[:, beam], atol=1e-4)
    greedy = decoding.greedy_decode(model, params, prompts, max_new_tokens=6, eos_id=None)
    greedy_score = scoring.causal_lm_log_likelihoods(
        model, params, jnp.concatenate([prompts, greedy], 1)
    )[:, 4:].sum(-1)
    assert np.all(np.asarray(scores[:, 0]) >= np.asarray(greedy_score) - 1e-5)
