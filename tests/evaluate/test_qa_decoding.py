"""EM/F1 against the new and the previous answer, under both answer protocols: teacher-forced
argmax along the gold answer (TemporalWiki's GPT-2 reference; the row-by-row oracle of
``probe_oracle.py``, which ``test_mixture_eval.py`` holds the seqio path to) and free decoding;
batched answers equal each prompt alone."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from eval_helpers import set_unigram
from probe_oracle import probe_examples, probe_qa, teacher_forced_answers

from tw_jax.evaluate.month_eval import EvalSettings
from tw_jax.evaluate.qa import decode_answers, default_protocol, qa_scores, until_first_period
from tw_jax.models import decoding, model_for
from tw_jax.tasks import metrics


def test_scores_against_new_and_previous_answers():
    scores = qa_scores(["Paris", "the London", "Berlin"], [["Paris"], ["London"], ["Rome"]],
                       [[], ["Londres"], ["Berlin", "Bonn"]])
    assert scores["em"] == pytest.approx(200 / 3) and scores["f1"] == pytest.approx(200 / 3)
    assert scores["em_previous"] == 50.0 and scores["f1_previous"] == 50.0
    assert "em_previous" not in qa_scores(["a"], [["a"]], [[]])


PARIS_ROWS = [
    {"subject": "France", "relation": "capital", "object": "Paris", "previous_object": ""},
    {"subject": "England", "relation": "capital", "object": "London",
     "previous_object": "Paris"},
]


def test_a_model_that_always_says_paris_under_both_protocols(unigram_gpt2, gpt2_vocab):
    model, params, _ = unigram_gpt2
    (paris,) = gpt2_vocab.encode(" Paris")
    assert len(gpt2_vocab.encode(" London")) == 1  # one token, as " Paris" is
    params, _ = set_unigram(params, {paris: -0.01}, params["wte"]["embedding"].shape[0])
    # Teacher-forced: one argmax per gold token, and both objects are one token.
    scores, predictions = probe_qa(model, params, gpt2_vocab, PARIS_ROWS)
    assert predictions == ["Paris", "Paris"]
    assert scores == {"em": 50.0, "f1": 50.0, "em_previous": 100.0, "f1_previous": 100.0}
    # Free decoding of three tokens.
    scores, predictions = probe_qa(model, params, gpt2_vocab, PARIS_ROWS, protocol="free",
                                   max_new_tokens=3)
    assert predictions == ["Paris Paris Paris"] * 2
    # F1 "Paris Paris Paris" vs "Paris": precision 1/3, recall 1 -> 0.5.
    assert scores == {"em": 0.0, "f1": 25.0, "em_previous": 0.0, "f1_previous": 50.0}


def positional_gpt2(random_gpt2, outputs: dict[int, int]) -> dict:
    """Parameters of the tiny GPT-2 whose argmax at position ``p`` is ``outputs[p]``, whatever
    the tokens: the blocks add nothing (output projections zero), position ``p``'s embedding is
    ``C (e_2p - e_2p+1)`` with C = 1e4, so the final LayerNorm gives about
    ``4 (e_2p - e_2p+1)``, and the tied head reads column ``2p`` of the token embedding, which
    is 5 for ``outputs[p]`` and 0 elsewhere (logit 20 against 0; the token embeddings move the
    LayerNorm's input by 5 in 1e4)."""
    model, params = random_gpt2
    params = jax.tree.map(np.asarray, params)
    vocab, width = params["wte"]["embedding"].shape
    wte = np.zeros((vocab, width), np.float32)
    wpe = np.zeros_like(params["wpe"]["embedding"])
    for p in range(width // 2):
        wpe[p, 2 * p], wpe[p, 2 * p + 1] = 1e4, -1e4
    for p, token in outputs.items():
        wte[token, 2 * p] = 5.0
    params["wte"]["embedding"], params["wpe"]["embedding"] = wte, wpe
    for i in range(model.config.n_layer):
        for path in (("attn", "out"), ("mlp", "c_proj")):
            layer = params[f"h_{i}"][path[0]][path[1]]
            layer["kernel"], layer["bias"] = (np.zeros_like(layer["kernel"]),
                                              np.zeros_like(layer["bias"]))
    params["ln_f"]["scale"] = np.ones_like(params["ln_f"]["scale"])
    params["ln_f"]["bias"] = np.zeros_like(params["ln_f"]["bias"])
    return jax.tree.map(jnp.asarray, params)


# Three-token prompts, so every row's gold tokens sit at the same positions.
CUT_ROWS = [
    {"subject": "Angela Merkel", "relation": "met", "object": "Paris", "previous_object": ""},
    {"subject": "Barack Obama", "relation": "studied", "object": "Paris London",
     "previous_object": ""},
    {"subject": "Obama", "relation": "born", "object": "Berlin and Tokyo",
     "previous_object": "Paris"},
]


def test_teacher_forced_reads_the_gold_answers_length_and_cuts_at_the_first_period(
        random_gpt2, gpt2_vocab):
    """A teacher-forced row is EOS (as BOS), the 3 prompt tokens, then the object's tokens, so
    the k-th object token is predicted at position 3 + k; free decoding starts from the prompt
    alone (positions 0-2) and predicts its first token at position 2."""
    vocab = gpt2_vocab
    model, _ = random_gpt2
    for row in CUT_ROWS:
        assert len(vocab.encode(f"{row['subject']} {row['relation']}")) == 3
    (paris,), (dot,), (london,) = (vocab.encode(t) for t in (" Paris", ".", " London"))
    assert len(vocab.encode(" Berlin and Tokyo")) == 3
    params = positional_gpt2(random_gpt2, {2: london, 3: paris, 4: dot, 5: london})

    scores, predictions = probe_qa(model, params, vocab, CUT_ROWS)
    # " Paris" | " Paris" "." -> "Paris." | " Paris" "." " London" -> "Paris." (cut)
    assert predictions == ["Paris", "Paris.", "Paris."]
    # F1: 1 | "paris" vs "paris london": P 1, R 1/2 -> 2/3 | 0
    assert scores == pytest.approx({"em": 100 / 3, "f1": 500 / 9, "em_previous": 100.0,
                                    "f1_previous": 100.0})

    scores, predictions = probe_qa(model, params, vocab, CUT_ROWS, protocol="free",
                                   max_new_tokens=4)
    assert predictions == ["London Paris. London"] * 3  # free decoding is not cut at "."
    # "london paris london" vs "paris": P 1/3, R 1 -> 1/2 | vs "paris london": P 2/3, R 1 ->
    # 4/5 | vs "berlin and tokyo": 0; previous "paris": 1/2
    assert scores == pytest.approx({"em": 0.0, "f1": 130 / 3, "em_previous": 0.0,
                                    "f1_previous": 50.0})


def test_until_first_period():
    assert until_first_period("Paris. London.") == "Paris."
    assert until_first_period("Paris") == "Paris"
    assert until_first_period(".") == "."


def _alone(model, params, example) -> list[int]:
    """The argmax at an example's scored positions, from one unpadded forward pass."""
    apply = jax.jit(model_for(model).module.apply)  # op by op, T5 takes minutes on a CPU
    weights = np.asarray(example.weights)
    if hasattr(example, "tokens"):
        logits = apply({"params": params}, jnp.asarray([example.tokens]))[0]
        return [int(t) for t in np.asarray(logits).argmax(-1)[np.flatnonzero(weights) - 1]]
    start = model_for(model).decoder_start_id
    decoder = jnp.asarray([[start, *example.targets[:-1]]])
    logits = apply({"params": params}, jnp.asarray([example.inputs]), decoder)[0]
    return [int(t) for t in np.asarray(logits).argmax(-1)[np.flatnonzero(weights)]]


@pytest.mark.parametrize("kind", ["gpt2", "t5"])
def test_teacher_forced_batches_equal_each_row_alone(kind, vocabs, random_gpt2, random_t5):
    vocab = vocabs[kind]
    model, params = random_gpt2 if kind == "gpt2" else random_t5
    rows = [*CUT_ROWS, {"subject": "Microsoft and Google", "relation": "opened offices in",
                        "object": "London, Berlin and Tokyo"}]
    got = teacher_forced_answers(model, params, vocab, rows, batch_size=3)
    for row, answer in zip(rows, got, strict=True):
        (example,) = probe_examples(model, vocab, [row], "object")
        tokens = [t for t in _alone(model, params, example) if t != vocab.eos_id]
        assert answer == until_first_period(vocab.decode(tokens).strip())
    assert any(got), "a random model still answers something"


def test_the_default_protocol_is_teacher_forced_for_gpt2_and_free_decoding_for_t5(
        vocabs, random_gpt2, random_t5):
    gpt2, _ = random_gpt2
    t5, t5_params = random_t5
    assert default_protocol(gpt2) == "teacher_forced" and default_protocol(t5) == "free"
    # T5 answers exactly as before: its sentinel prompt, decoded.
    _, predictions = probe_qa(t5, t5_params, vocabs["t5"], CUT_ROWS, max_new_tokens=4)
    prompts = [model_for(t5).probe_prompt(r) for r in CUT_ROWS]
    assert prompts[0] == "Angela Merkel met <extra_id_0>"
    assert predictions == decode_answers(t5, t5_params, vocabs["t5"], prompts, max_new_tokens=4)


def test_bad_protocols_and_probes_are_named(random_gpt2, gpt2_vocab):
    model, params = random_gpt2
    with pytest.raises(ValueError, match="unknown QA protocol 'beam'; known: teacher_forced, free"):
        probe_qa(model, params, gpt2_vocab, PARIS_ROWS, protocol="beam")
    with pytest.raises(ValueError, match="unknown QA protocol 'greedy'"):
        EvalSettings(groups=("qa",), qa_protocol="greedy")


@pytest.mark.parametrize("kind", ["gpt2", "t5"])
def test_batched_decoding_equals_each_prompt_alone(kind, vocabs, random_gpt2, random_t5):
    vocab = vocabs[kind]
    model, params = random_gpt2 if kind == "gpt2" else random_t5
    prompts = ["Barack Obama was born in", "Paris", "Angela Merkel met Emmanuel Macron in"]
    if kind == "t5":
        prompts = [p + " <extra_id_0>" for p in prompts]
    for beam in (1, 2):
        got = decode_answers(model, params, vocab, prompts, max_new_tokens=5, beam_size=beam,
                             batch_size=2)
        for prompt, answer in zip(prompts, got, strict=True):
            ids = [*vocab.encode(prompt), *([vocab.eos_id] if kind == "t5" else [])]
            ids = jnp.asarray([ids])
            if beam == 1:
                out = decoding.greedy_decode(model, params, ids, max_new_tokens=5,
                                             eos_id=vocab.eos_id)[0]
            else:
                out = decoding.beam_search(model, params, ids, beam_size=2, max_new_tokens=5,
                                           eos_id=vocab.eos_id)[0][0, 0]
            tokens = np.asarray(out).tolist()
            if vocab.eos_id in tokens:
                tokens = tokens[: tokens.index(vocab.eos_id)]
            text = vocab.decode(tokens)
            post = metrics.answer_from_t5 if kind == "t5" else metrics.answer_from_gpt2
            assert answer == post(text)
