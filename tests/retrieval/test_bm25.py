"""BM25 on passages small enough that every score is computed here by hand from the formula."""

from __future__ import annotations

import math
import socket

import pytest

from tw_jax.errors import DumpError, UsageError
from tw_jax.retrieval.base import Passage
from tw_jax.retrieval.bm25 import BM25Retriever, Tokenizer

K1, B = 1.5, 0.75
# Tokens after lower-casing and the stopword list: [cat, sat, mat], [dog, sat], [cats, dogs],
# and twice [sat, mat]. No title (title=False) so the lengths are those.
PASSAGES = [
    Passage("p0", "Alpha", "The cat sat on the mat."),
    Passage("p1", "Beta", "The dog sat."),
    Passage("p2", "Gamma", "Cats and dogs!"),
    Passage("p3", "Delta", "sat on a mat"),
    Passage("p4", "Epsilon", "Sat on the MAT"),
]
LENGTHS = [3, 2, 2, 2, 2]
AVGDL = sum(LENGTHS) / len(LENGTHS)  # 11 / 5
N = len(PASSAGES)


def lucene(tf: int, df: int, dl: int) -> float:
    """Lucene's BM25 (bm25s method="lucene"): ln(1 + (N - df + .5)/(df + .5)) · tf/(tf + k1·(1 -
    b + b·dl/avgdl))."""
    idf = math.log(1 + (N - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + K1 * (1 - B + B * dl / AVGDL))


@pytest.fixture()
def bm25() -> BM25Retriever:
    retriever = BM25Retriever(title=False)
    retriever.build(PASSAGES)
    return retriever


def test_tokens_are_lower_case_words_of_two_characters_without_stopwords():
    tokenize = Tokenizer()
    assert tokenize("Where is the Cat? L. J. Kulric won 24,042 votes; it's naïve!") == [
        "where", "cat", "kulric", "won", "24", "042", "votes", "naïve"]
    assert Tokenizer(stopwords="none")("Where is the Cat?") == ["where", "is", "the", "cat"]


def test_scores_are_lucenes_bm25_to_float32_precision(bm25):
    [[(position, score)]] = bm25.search(["Where is the cat?"], k=5)
    assert position == 0 and score == pytest.approx(lucene(1, 1, 3), rel=1e-6)

    [found] = bm25.search(["dog sat"], k=5)
    expected = {0: lucene(1, 4, 3), 1: lucene(1, 1, 2) + lucene(1, 4, 2),
                3: lucene(1, 4, 2), 4: lucene(1, 4, 2)}
    assert [p for p, _ in found] == [1, 3, 4, 0]  # 3 and 4 tie: the lower position first
    for position, score in found:
        assert score == pytest.approx(expected[position], rel=1e-6)


def test_only_matching_passages_come_back_and_k_cuts_ties_by_position(bm25):
    assert bm25.search(["zebra", "the of and", ""], k=3) == [[], [], []]
    [found] = bm25.search(["mat"], k=1)
    assert [p for p, _ in found] == [3]  # p3 and p4 tie above p0 (shorter); p3 comes first
    assert [p for p, _ in bm25.search(["mat"], k=10)[0]] == [3, 4, 0]
    with pytest.raises(UsageError, match="k must be at least 1"):
        bm25.search(["mat"], k=0)


def test_titles_are_indexed_by_default():
    with_title = BM25Retriever()
    with_title.build(PASSAGES)
    assert [p for p, _ in with_title.search(["gamma"], k=3)[0]] == [2]
    without = BM25Retriever(title=False)
    without.build(PASSAGES)
    assert without.search(["gamma"], k=3) == [[]]


def test_building_and_searching_never_touch_the_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("BM25 tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    retriever = BM25Retriever()
    retriever.build(PASSAGES)
    assert retriever.search(["dog"], k=2)[0][0][0] == 1


def test_save_and_load_give_the_same_answers(bm25, tmp_path):
    bm25.save(str(tmp_path / "index"))
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == [
        "bm25.json", "data.npy", "indices.npy", "indptr.npy"]
    loaded = BM25Retriever.load(str(tmp_path / "index"))
    questions = ["dog sat", "cat on a mat", "cats"]
    assert loaded.search(questions, k=5) == bm25.search(questions, k=5)
    assert loaded.settings() == bm25.settings() and loaded.fingerprint() == bm25.fingerprint()


def test_bm25l_keeps_its_non_occurrence_scores_through_save(tmp_path):
    retriever = BM25Retriever(method="bm25l", title=False)
    retriever.build(PASSAGES)
    retriever.save(str(tmp_path / "l"))
    loaded = BM25Retriever.load(str(tmp_path / "l"))
    assert (tmp_path / "l" / "nonoccurrence.npy").exists()
    assert loaded.search(["dog sat"], k=5) == retriever.search(["dog sat"], k=5)
    assert [p for p, _ in loaded.search(["dog"], k=5)[0]] == [1]  # still only matching ones


def test_save_and_load_through_a_bucket(bm25, gcs_bucket):
    folder = f"{gcs_bucket}/index/bm25"
    bm25.save(folder)
    loaded = BM25Retriever.load(folder)
    assert loaded.search(["dog sat", "mat"], k=5) == bm25.search(["dog sat", "mat"], k=5)


def test_the_fingerprint_follows_the_settings_that_change_the_index():
    base = BM25Retriever().fingerprint()
    assert BM25Retriever().fingerprint() == base
    assert len({base, BM25Retriever(k1=0.9).fingerprint(), BM25Retriever(b=0.4).fingerprint(),
                BM25Retriever(title=False).fingerprint(),
                BM25Retriever(stopwords="none").fingerprint()}) == 5


def test_bad_settings_and_bad_folders_are_one_line_errors(tmp_path, bm25, monkeypatch):
    with pytest.raises(UsageError, match="method 'okapi'"):
        BM25Retriever(method="okapi")
    with pytest.raises(UsageError, match="0 <= b <= 1"):
        BM25Retriever(b=2)
    with pytest.raises(UsageError, match="no passages"):
        BM25Retriever().build([])
    with pytest.raises(UsageError, match="none of the 1 passages"):
        BM25Retriever().build([Passage("x", "", "the a of")])
    with pytest.raises(UsageError, match="build\\(\\) or load\\(\\)"):
        BM25Retriever().search(["cat"], k=1)
    monkeypatch.setitem(__import__("sys").modules, "Stemmer", None)  # PyStemmer not installed
    with pytest.raises(UsageError, match="needs PyStemmer"):
        BM25Retriever(stemmer="english")

    with pytest.raises(DumpError, match=r"bm25\.json: no BM25 index here"):
        BM25Retriever.load(str(tmp_path / "nothing"))
    bm25.save(str(tmp_path / "i"))
    (tmp_path / "i" / "indices.npy").unlink()
    with pytest.raises(DumpError, match=r"indices\.npy: missing from the BM25 index"):
        BM25Retriever.load(str(tmp_path / "i"))
    (tmp_path / "i" / "bm25.json").write_text("{not json")
    with pytest.raises(DumpError, match=r"bm25\.json, line 1: not JSON"):
        BM25Retriever.load(str(tmp_path / "i"))
