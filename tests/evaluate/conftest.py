"""Tiny vocabularies and models for the evaluation tests (trained or built here, never fetched).

``unigram_gpt2`` is a GPT-2 whose output ignores its input: the final layer norm has scale 0 and
bias e_0, so every position's logits are column 0 of the embedding, which the fixture sets. Its
log-likelihoods are then known in closed form (``log_probs[token]``), so perplexities and rank
decisions can be checked against hand computations that do not run the model.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from eval_helpers import PROBE_FIELDS, write_probe_stats

from tw_jax.models.gpt2 import GPT2, GPT2Config
from tw_jax.models.t5 import T5, T5Config

SENTENCES = [
    "Barack Obama was born in Honolulu and studied at Columbia University.",
    "Angela Merkel met Emmanuel Macron in Paris on Monday.",
    "The head of government of Trurmouth is Groris Funley.",
    "Dravminster population 24042 and Real Graltport head coach Stano Wevton.",
    "She walked to the market and bought some bread and fresh apples.",
    "Microsoft and Google opened offices in London, Berlin and Tokyo.",
    "The river flows quietly through the valley towards the sea.",
    "Numbers like 1995, 2021 and 3.14 appear in many articles.",
]


def _corpus() -> list[str]:
    rng = random.Random(7)
    return [" ".join(rng.sample(SENTENCES, k=4)) for _ in range(200)]


@pytest.fixture(scope="session")
def vocab_files(tmp_path_factory) -> dict:
    """``{"gpt2": folder, "t5": spiece.model}`` of the tests' tiny vocabularies."""
    from tw_jax.data.vocab_training import write_demo_vocabularies

    return write_demo_vocabularies(_corpus(), tmp_path_factory.mktemp("eval_vocabs"))


@pytest.fixture(scope="session")
def vocabs(vocab_files) -> dict:
    from tw_jax.data.vocabularies import gpt2_vocabulary, t5_vocabulary

    return {"gpt2": gpt2_vocabulary(vocab_files["gpt2"]),
            "t5": t5_vocabulary(vocab_files["t5"])}


@pytest.fixture()
def register_probes(vocab_files):
    """``register(data_dir)``: the folder's tasks with the tests' vocabularies (what
    :func:`tw_jax.evaluate.month_eval.evaluate_month` evaluates through)."""
    import tw_jax.tasks

    def register(data_dir) -> list[str]:
        return tw_jax.tasks.register_all(str(data_dir), t5_vocab=str(vocab_files["t5"]),
                                         gpt2_vocab=str(vocab_files["gpt2"]))

    yield register
    tw_jax.tasks.register_all(None)


@pytest.fixture()
def month_probes(tmp_path, register_probes):
    """``write(rows)``: ``{category: [(subject, relation, object, previous_object, cloze)]}`` as
    the probe files of month 0809 of a data folder, its tasks registered; returns the folder."""

    def write(rows: dict) -> Path:
        folder = tmp_path / "0809" / "probes"
        folder.mkdir(parents=True)
        for category, category_rows in rows.items():
            with open(folder / f"{category}.csv", "w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(PROBE_FIELDS)
                writer.writerows(category_rows)
        write_probe_stats(folder, {c: len(r) for c, r in rows.items()})
        register_probes(tmp_path)
        return tmp_path

    return write


@pytest.fixture(scope="session")
def gpt2_vocab(vocabs):
    return vocabs["gpt2"]


@pytest.fixture(scope="session")
def t5_vocab(vocabs):
    return vocabs["t5"]


def gpt2_config(vocab) -> GPT2Config:
    return GPT2Config(vocab_size=vocab.vocab_size, n_positions=128, n_embd=32, n_layer=2,
                      n_head=4, initializer_range=0.2, dropout_rate=0.0,
                      bos_token_id=vocab.eos_id, eos_token_id=vocab.eos_id)


@pytest.fixture(scope="session")
def random_gpt2(gpt2_vocab) -> tuple[GPT2, dict]:
    model = GPT2(gpt2_config(gpt2_vocab))
    variables = jax.jit(model.init)(jax.random.key(1), jnp.zeros((1, 8), jnp.int32))
    return model, nn.unbox(variables["params"])


@pytest.fixture(scope="session")
def unigram_gpt2(random_gpt2) -> tuple[GPT2, dict, np.ndarray]:
    """(model, params, log_probs): every position predicts ``softmax(u)``, u fixed below."""
    model, params = random_gpt2
    vocab_size = params["wte"]["embedding"].shape[0]
    u = np.random.RandomState(3).normal(0.0, 2.0, vocab_size).astype(np.float32)
    params = jax.tree.map(lambda x: x, params)  # a copy whose leaves we may replace
    params["wte"]["embedding"] = params["wte"]["embedding"].at[:, 0].set(jnp.asarray(u))
    scale = params["ln_f"]["scale"]
    params["ln_f"]["scale"] = jnp.zeros_like(scale)
    params["ln_f"]["bias"] = jnp.zeros_like(scale).at[0].set(1.0)
    log_probs = u.astype(np.float64) - np.log(np.exp(u.astype(np.float64)).sum())
    return model, params, log_probs


@pytest.fixture(scope="session")
def random_t5(t5_vocab) -> tuple[T5, dict]:
    config = T5Config(vocab_size=t5_vocab.vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                      num_heads=4, relative_attention_num_buckets=8, dropout_rate=0.0,
                      initializer_factor=3.0, eos_token_id=t5_vocab.eos_id)
    model = T5(config)
    dummy = jnp.zeros((1, 8), jnp.int32)
    variables = jax.jit(model.init)(jax.random.key(2), dummy, dummy)
    return model, nn.unbox(variables["params"])


@pytest.fixture(scope="session")
def pos_nlp():
    from tw_jax.evaluate.propn import load_pos_pipeline

    return load_pos_pipeline()
