"""Tiny vocabularies trained once per session on a varied corpus (nothing is downloaded)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

SENTENCES = [
    "Paris is the capital of France and its largest city.",
    "The film was released on 8 October 2016 and grossed 13.7 million dollars worldwide.",
    "Zoë Saldaña starred in Avatar; Jürgen Klopp manages Liverpool F.C. in the Premier League.",
    "Café, naïve, façade, résumé and Ångström keep their accents.",
    "東京は日本の首都です。 北京是中国的首都。 서울은 한국의 수도입니다.",
    "Emoji travel too: 😀 🎉 👩‍💻 🇫🇷 and ❤️.",
    "Numbers: 1, 22, 333, 4444, 55555, 3.14159, 1,000,000 and -42.",
    "She's sure they'll come; we've said I'm ready and you'd agree it's done.",
    "Whitespace   runs\tand\ttabs\n\nand newlines   \n  survive.",
    "Москва — столица России. Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "In 2021 the population was 2,165,423 (an increase of 0.4%).",
    "He said: \"quotes\", 'single', (parens) [brackets] {braces} <angles>.",
]


def _corpus() -> list[str]:
    """~60 KB: the sentences above, shuffled into paragraphs with a fixed seed."""
    rng = random.Random(1234)
    texts = []
    for _ in range(300):
        picked = rng.sample(SENTENCES, k=4)
        texts.append(" ".join(picked) + "\n" + " ".join(reversed(picked)))
    return texts


@pytest.fixture(scope="session")
def vocab_corpus() -> list[str]:
    return _corpus()


@pytest.fixture(scope="session")
def demo_vocab_dir(tmp_path_factory, vocab_corpus) -> dict[str, Path]:
    """The demo's writer on the test corpus: t5/spiece.model and gpt2/{3 files}."""
    from tw_jax.data.vocab_training import write_demo_vocabularies

    return write_demo_vocabularies(vocab_corpus, tmp_path_factory.mktemp("vocabs"))


@pytest.fixture(scope="session")
def gpt2_dir(demo_vocab_dir) -> Path:
    return demo_vocab_dir["gpt2"]


@pytest.fixture(scope="session")
def t5_model(demo_vocab_dir) -> Path:
    return demo_vocab_dir["t5"]
