"""BM25 over passages with ``bm25s`` (sparse matrices, numpy only): the lexical retriever.

Tokens: the text lower-cased, then words of two or more word characters (``bm25s``'s default
splitter, ``(?u)\\b\\w\\w+\\b``), minus ``bm25s``'s built-in English stopword list (NLTK's, shipped
inside the package: nothing is downloaded), optionally stemmed (``stemmer="english"``: the
Snowball stemmer of PyStemmer, which is then needed; off by default). A passage is indexed as
its title followed by its text, so a question that names an article's subject finds it even
when the passage itself says "It" (the Edited side of a revision often does).

Scores are ``bm25s``'s (``method="lucene"`` by default: Lucene's BM25, idf
``ln(1 + (N - df + 0.5) / (df + 0.5))`` times ``tf / (tf + k1 (1 - b + b |d| / avgdl))``,
``k1 = 1.5``, ``b = 0.75`` as ``bm25s`` sets them), precomputed per (passage, token) at build
time. Searching sums the query tokens' columns; only passages with a positive sum are returned
(as Lucene returns only matching documents: with ``lucene`` every passage that holds a query
token; the ``robertson`` and ``atire`` idf of a token in most passages is 0, and such a token
alone finds nothing), best first, ties broken by the lower position so that a search is
reproducible to the last rank. BM25L and BM25+ add the same constant to every passage (their
score of a token's absence); it is added to the scores returned, after ranking.

The index is saved as three ``.npy`` arrays (the score matrix in compressed-sparse-column form)
and ``bm25.json`` (settings and vocabulary), written through :mod:`tw_jax.io.atomic`, so a
``gs://`` folder works as a local one does (``bm25s``'s own ``save`` writes local paths only).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tw_jax.errors import DumpError, UsageError
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, write_json
from tw_jax.retrieval.base import (
    Passage,
    Retriever,
    read_index_settings,
    register_retriever,
)

FORMAT = 1
SETTINGS_FILE = "bm25.json"
ARRAYS = ("data", "indices", "indptr")
NONOCCURRENCE = "nonoccurrence"
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
STOPWORDS = ("en", "none")
STEMMERS = ("english",)
_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenization.Tokenizer's default splitter


def _english_stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def _stemmer(name: str | None) -> Callable[[str], str] | None:
    if name is None:
        return None
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        raise UsageError(f"BM25 stemmer {name!r} needs PyStemmer (pip install PyStemmer), "
                         "or leave stemming off") from None
    return Stemmer.Stemmer(name).stemWord


class Tokenizer:
    """Text → tokens, the same for passages and questions (see the module docstring)."""

    def __init__(self, stopwords: str = "en", stemmer: str | None = None) -> None:
        if stopwords not in STOPWORDS:
            raise UsageError(f"BM25 stopwords {stopwords!r}: choose from {', '.join(STOPWORDS)}")
        if stemmer is not None and stemmer not in STEMMERS:
            raise UsageError(f"BM25 stemmer {stemmer!r}: choose from {', '.join(STEMMERS)} "
                             "or none")
        self._stop = _english_stopwords() if stopwords == "en" else frozenset()
        self._stem = _stemmer(stemmer)
        self._stemmed: dict[str, str] = {}

    def __call__(self, text: str) -> list[str]:
        words = [w for w in _TOKEN.findall(text.lower()) if w not in self._stop]
        if self._stem is None:
            return words
        out = []
        for word in words:
            stem = self._stemmed.get(word)
            if stem is None:
                stem = self._stemmed[word] = self._stem(word)
            out.append(stem)
        return out


@register_retriever
class BM25Retriever(Retriever):
    """BM25 with ``bm25s`` (see the module docstring for tokens, scores and storage)."""

    name = "bm25"

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, method: str = "lucene",
                 stopwords: str = "en", stemmer: str | None = None, title: bool = True) -> None:
        if method not in METHODS:
            raise UsageError(f"BM25 method {method!r}: choose from {', '.join(METHODS)}")
        if k1 < 0 or not 0 <= b <= 1:
            raise UsageError(f"BM25 needs k1 >= 0 and 0 <= b <= 1; got k1={k1}, b={b}")
        self.k1, self.b, self.method = float(k1), float(b), method
        self.stopwords, self.stemmer, self.title = stopwords, stemmer, bool(title)
        self.tokenize = Tokenizer(stopwords, stemmer)
        self._vocab: dict[str, int] = {}
        self._arrays: dict[str, np.ndarray] | None = None
        self._nonoccurrence: np.ndarray | None = None
        self._num_docs = 0

    def settings(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "method": self.method, "stopwords": self.stopwords,
                "stemmer": self.stemmer, "title": self.title}

    def _document(self, passage: Passage) -> str:
        return f"{passage.title} {passage.text}" if self.title else passage.text

    @property
    def num_passages(self) -> int:
        return self._num_docs

    def build(self, passages: Sequence[Passage]) -> None:
        import bm25s

        if not passages:
            raise UsageError("BM25: no passages to index")
        corpus = [self.tokenize(self._document(p)) for p in passages]
        if not any(corpus):
            raise UsageError(f"BM25: none of the {len(passages)} passages has a word to index "
                             "(all empty or stopwords)")
        model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method, backend="numpy",
                           csc_backend="numpy")
        model.index(corpus, create_empty_token=False, show_progress=False)
        self._arrays = {name: np.asarray(model.scores[name]) for name in ARRAYS}
        self._num_docs = int(model.scores["num_docs"])
        self._vocab = dict(model.vocab_dict)
        non = model.nonoccurrence_array
        self._nonoccurrence = None if non is None else np.asarray(non)

    def _require_index(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            raise UsageError("BM25: build() or load() an index before searching")
        return self._arrays

    def scores(self, question: str) -> tuple[np.ndarray, float]:
        """(every passage's score from the query's tokens, the constant that BM25L and BM25+
        add to all passages alike: 0 for the other methods)."""
        arrays = self._require_index()
        data, indices, indptr = arrays["data"], arrays["indices"], arrays["indptr"]
        ids = [self._vocab[t] for t in self.tokenize(question) if t in self._vocab]
        scores = np.zeros(self._num_docs, dtype=data.dtype)
        for token in ids:  # a repeated query word counts each time, as in bm25s
            start, end = indptr[token], indptr[token + 1]
            np.add.at(scores, indices[start:end], data[start:end])
        shift = 0.0
        if self._nonoccurrence is not None and ids:
            shift = float(self._nonoccurrence[ids].sum())
        return scores, shift

    def search(self, questions: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        if k < 1:
            raise UsageError(f"BM25: k must be at least 1, got {k}")
        found = []
        for question in questions:
            scores, shift = self.scores(question)
            found.append([(p, s + shift) for p, s in _top_k(scores, k)])
        return found

    def save(self, folder: str) -> None:
        arrays = self._require_index()
        if self._nonoccurrence is not None:
            arrays = {**arrays, NONOCCURRENCE: self._nonoccurrence}
        for name, array in arrays.items():
            with atomic_open(paths.join(folder, f"{name}.npy"), "wb") as handle:
                np.save(handle, array, allow_pickle=False)
        write_json(paths.join(folder, SETTINGS_FILE), {  # last: the folder is whole once it is
            "format": FORMAT, "retriever": self.name, "settings": self.settings(),
            "num_passages": self._num_docs, "arrays": sorted(arrays), "vocab": self._vocab})

    @classmethod
    def load(cls, folder: str) -> BM25Retriever:
        path = paths.join(folder, SETTINGS_FILE)
        meta = read_index_settings(folder, SETTINGS_FILE, FORMAT, "BM25")
        try:
            retriever = cls(**meta["settings"])
            names, vocab, count = meta["arrays"], meta["vocab"], int(meta["num_passages"])
        except (KeyError, TypeError, ValueError) as error:
            raise DumpError(path, None, f"not a BM25 index of format {FORMAT} ({error})") from None
        arrays = {name: _read_array(paths.join(folder, f"{name}.npy")) for name in names}
        retriever._nonoccurrence = arrays.pop(NONOCCURRENCE, None)
        missing = [name for name in ARRAYS if name not in arrays]
        if missing:
            raise DumpError(path, None, f"lists no {', '.join(missing)} array")
        retriever._arrays = arrays
        retriever._vocab = {str(t): int(i) for t, i in vocab.items()}
        retriever._num_docs = count
        if len(arrays["indptr"]) != len(retriever._vocab) + 1:
            raise DumpError(paths.join(folder, "indptr.npy"), None,
                            f"{len(arrays['indptr'])} entries for a vocabulary of "
                            f"{len(retriever._vocab)} tokens (expected one more)")
        return retriever


def _read_array(path: str) -> np.ndarray:
    if not paths.exists(path):
        raise DumpError(path, None, "missing from the BM25 index")
    try:
        return np.load(io.BytesIO(paths.read_bytes(path)), allow_pickle=False)
    except ValueError as error:
        raise DumpError(path, None, f"not a numpy array file ({error})") from None


def _top_k(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best positions with a positive score, best first, ties to the lower position."""
    candidates = np.flatnonzero(scores > 0)
    if candidates.size == 0:
        return []
    values = scores[candidates]
    if candidates.size > k:  # keep everything that ties with the k-th best, then order exactly
        threshold = np.partition(values, candidates.size - k)[candidates.size - k]
        keep = values >= threshold
        candidates, values = candidates[keep], values[keep]
    order = np.lexsort((candidates, -values))[:k]
    return [(int(candidates[i]), float(values[i])) for i in order]
