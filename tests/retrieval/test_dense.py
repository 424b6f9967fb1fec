"""The dense (DPR) retriever: exact maximum inner product search on hand-made embeddings, the
retriever end to end with tiny random encoders (build, search, save, load), its errors, and the
same answers on an 8-device forced-host CPU mesh as on one device. Parity with Hugging Face's
DPR encoders is in tests/retrieval/test_dpr_parity.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from xla_flags import forced_devices

from tw_jax.errors import DumpError, UsageError
from tw_jax.retrieval.base import Passage, retriever_class
from tw_jax.retrieval.bert import BertConfig
from tw_jax.retrieval.bert_io import load_bert_encoder, save_bert_encoder
from tw_jax.retrieval.dense import DenseRetriever, exact_top_k

WORDS = ["the", "a", "of", "in", "is", "was", "who", "what", "which", "when", "where", "city",
         "capital", "river", "country", "king", "queen", "paris", "france", "berlin", "germany",
         "london", "england", "rome", "italy", "seine", "thames", "tiber", "born", "died",
         "president", "minister", "##s", "##ed", "##ing", ".", ",", "?", ";"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
TINY = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=48, max_position_embeddings=64,
                  initializer_range=0.2, dropout_rate=0.0, attention_dropout=0.0)
PASSAGES = [
    Passage("0", "Paris", "Paris is the capital of France."),
    Passage("1", "Berlin", "Berlin is the capital city of Germany."),
    Passage("2", "Seine", "The Seine is a river in France; it runs through Paris."),
    Passage("3", "London", "London is the capital of England, on the river Thames. " * 4),
    Passage("4", "Rome", "Rome is the capital of Italy, on the Tiber."),
    Passage("5", "", "The king of England was born in London and died in Rome."),
    Passage("6", "Italy", "Italy is a country. Its president was born in Rome."),
]
QUESTIONS = ["What is the capital of France?", "Which river runs through Paris?",
             "Where was the king of England born?"]


def test_exact_top_k_on_hand_made_embeddings():
    passages = np.asarray([[1, 0], [2, 0], [2, 0], [0, 5], [-1, 0], [0, -1]], np.float32)
    questions = np.asarray([[1, 0], [0, 1], [1, 1]], np.float32)
    scores, ids = exact_top_k(questions, passages, 3)
    # q0 scores 1, 2, 2, 0, -1, 0: the tie at 2 goes to the lower position.
    np.testing.assert_array_equal(ids, [[1, 2, 0], [3, 0, 1], [3, 1, 2]])
    np.testing.assert_array_equal(scores, [[2, 2, 1], [5, 0, 0], [5, 2, 2]])
    chunked = exact_top_k(questions, passages, 3, chunk_rows=2)  # running top-k over 3 chunks
    np.testing.assert_array_equal(chunked[1], ids)
    np.testing.assert_array_equal(chunked[0], scores)
    every, order = exact_top_k(questions[:1], passages, 10)  # k beyond the passages: all of them
    np.testing.assert_array_equal(order, [[1, 2, 0, 3, 5, 4]])
    np.testing.assert_array_equal(every, [[2, 2, 1, 0, 0, -1]])


@pytest.mark.parametrize("chunk_rows", [1 << 18, 7, 1])
@pytest.mark.parametrize("resident_bytes", [None, 0], ids=["kept", "streamed"])
def test_exact_top_k_equals_a_numpy_argsort(chunk_rows, resident_bytes):
    """The same answer whether the chunks stay on the device or are uploaded for each search."""
    rs = np.random.RandomState(0)
    questions = rs.randint(-3, 4, (9, 8)).astype(np.float32)  # integers: exact float sums
    passages = rs.randint(-3, 4, (53, 8)).astype(np.float32)
    scores, ids = exact_top_k(questions, passages, 11, chunk_rows=chunk_rows,
                              resident_bytes=resident_bytes)
    full = questions @ passages.T
    expected = np.argsort(-full, axis=1, kind="stable")[:, :11]
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_array_equal(scores, np.take_along_axis(full, expected, axis=1))


@pytest.fixture(scope="module")
def retriever():
    dense = DenseRetriever.random(0, TINY, VOCAB, max_length=48, batch_size=4)
    dense.build(PASSAGES)
    return dense


def test_registered_as_dpr_with_settings_that_name_the_weights(retriever):
    assert retriever_class("dpr") is DenseRetriever
    settings = retriever.settings()
    assert settings["segment_ids"] == "zeros" and settings["max_length"] == 48
    assert settings["question_weights"] != settings["ctx_weights"]  # seeds 0 and 1
    other = DenseRetriever.random(0, TINY, VOCAB, max_length=48, segment_ids="pair")
    assert other.fingerprint() != retriever.fingerprint()
    assert DenseRetriever.random(0, TINY, VOCAB, max_length=48).fingerprint() == \
        retriever.fingerprint()


def test_search_ranks_by_inner_product_of_the_two_encoders(retriever):
    found = retriever.search(QUESTIONS, k=4)
    assert [len(hits) for hits in found] == [4, 4, 4]
    q = retriever.encode_questions(QUESTIONS)
    full = q @ retriever.embeddings.T
    for row, hits in zip(full, found, strict=True):
        expected = np.argsort(-row, kind="stable")[:4]
        assert [i for i, _ in hits] == expected.tolist()
        np.testing.assert_allclose([s for _, s in hits], row[expected], rtol=1e-5, atol=1e-5)
    assert retriever.search(QUESTIONS[:1], k=100)[0].__len__() == len(PASSAGES)
    assert retriever.search([], k=3) == []


def test_embeddings_do_not_depend_on_batch_or_bucket(retriever):
    alone = np.concatenate([retriever.encode_passages([p]) for p in PASSAGES])
    np.testing.assert_allclose(retriever.embeddings, alone, atol=1e-5)
    # The long passage (4 sentences) fell in a longer bucket than the others.
    lengths = [len(ids) for ids in retriever.encoders["ctx"].tokenizer.encode(
        [p.text for p in PASSAGES], [p.title for p in PASSAGES]).ids]
    assert max(lengths) == 48 and min(lengths) < 16


def test_pair_segment_ids_change_titled_passages_only():
    zeros = DenseRetriever.random(0, TINY, VOCAB, max_length=48)
    pair = DenseRetriever.random(0, TINY, VOCAB, max_length=48, segment_ids="pair")
    a, b = zeros.encode_passages(PASSAGES), pair.encode_passages(PASSAGES)
    np.testing.assert_array_equal(a[5], b[5])  # no title: one segment either way
    assert np.abs(a[0] - b[0]).max() > 1e-3


def test_save_and_load_give_the_same_results(retriever, tmp_path):
    folder = tmp_path / "index"
    retriever.save(str(folder))
    assert sorted(os.listdir(folder)) == ["ctx_encoder", "dpr.json", "embeddings.npy",
                                          "question_encoder"]
    meta = json.loads((folder / "dpr.json").read_text())
    assert (meta["num_passages"], meta["dim"]) == (len(PASSAGES), 32)
    assert meta["fingerprint"] == retriever.fingerprint()
    config, _, role = load_bert_encoder(folder / "ctx_encoder")
    assert role == "ctx" and config == TINY
    loaded = DenseRetriever.load(str(folder))
    assert loaded.fingerprint() == retriever.fingerprint()
    np.testing.assert_array_equal(loaded.embeddings, retriever.embeddings)
    assert loaded.search(QUESTIONS, 5) == retriever.search(QUESTIONS, 5)
    # An index over folders records them, not copies of the weights.
    again = tmp_path / "again"
    loaded.save(str(again))
    assert sorted(os.listdir(again)) == ["dpr.json", "embeddings.npy"]
    meta = json.loads((again / "dpr.json").read_text())
    assert meta["encoders"]["ctx"]["folder"] == str(folder / "ctx_encoder")
    assert DenseRetriever.load(str(again)).search(QUESTIONS, 5) == retriever.search(QUESTIONS, 5)


def test_load_refuses_changed_encoders_and_broken_files(retriever, tmp_path):
    folder = tmp_path / "index"
    retriever.save(str(folder))
    with pytest.raises(DumpError, match="no DPR index here"):
        DenseRetriever.load(str(tmp_path))
    np.save(folder / "embeddings.npy", np.zeros((3, 32), np.float32))
    with pytest.raises(DumpError, match=r"embeddings.npy: holds float32 \(3, 32\); dpr.json says "
                                        r"float32 \(7, 32\)"):
        DenseRetriever.load(str(folder))
    other = DenseRetriever.random(5, TINY, VOCAB, max_length=48).encoders["ctx"]
    save_bert_encoder(folder / "ctx_encoder", other.config, other.params, "ctx", other.tokenizer)
    with pytest.raises(DumpError, match=r"other encoder weights.*ctx_encoder \(.*\) changed"):
        DenseRetriever.load(str(folder))
    (folder / "dpr.json").write_text("{")
    with pytest.raises(DumpError, match="dpr.json, line 1: not JSON"):
        DenseRetriever.load(str(folder))


def test_settings_and_use_errors_are_one_line(tmp_path):
    with pytest.raises(UsageError, match="DPR needs question_encoder and ctx_encoder"):
        DenseRetriever()
    with pytest.raises(UsageError, match="segment_ids 'one'"):
        DenseRetriever.random(0, TINY, VOCAB, segment_ids="one")
    with pytest.raises(UsageError, match="max_length=128 exceeds the question encoder's "
                                         "max_position_embeddings=64"):
        DenseRetriever.random(0, TINY, VOCAB, max_length=128)
    fresh = DenseRetriever.random(0, TINY, VOCAB, max_length=48)
    with pytest.raises(UsageError, match="build\\(\\) or load\\(\\) an index"):
        fresh.search(QUESTIONS, 3)
    with pytest.raises(UsageError, match="no passages"):
        fresh.build([])
    with pytest.raises(FileNotFoundError, match="no config.json in .*missing"):
        DenseRetriever(question_encoder=str(tmp_path / "missing"), ctx_encoder=str(tmp_path))


def test_save_and_load_through_a_bucket(retriever, gcs_bucket):
    folder = f"{gcs_bucket}/index/dpr"
    retriever.save(folder)
    loaded = DenseRetriever.load(folder)
    np.testing.assert_array_equal(loaded.embeddings, retriever.embeddings)
    assert loaded.search(QUESTIONS, 3) == retriever.search(QUESTIONS, 3)


# Runs in a fresh interpreter: the device count is fixed when jax first initialises its backend.
_EIGHT_DEVICES = textwrap.dedent(
    """
    import jax, numpy as np
    from tw_jax.retrieval.base import Passage
    from tw_jax.retrieval.dense import DenseRetriever, exact_top_k
    from tw_jax.retrieval.bert import BertConfig
    from tw_jax.models.sharding import make_mesh

    assert len(jax.devices()) == 8
    one = make_mesh(devices=jax.devices()[:1])
    rs = np.random.RandomState(0)
    q = rs.randn(5, 16).astype(np.float32)
    p = rs.randn(203, 16).astype(np.float32)
    p[7] = p[50] = 10 * q[0]  # q0's best two: a tie between the rows of two devices
    for shape in [(8, 1, 1), (2, 2, 2)]:
        mesh = make_mesh(shape)
        for chunk in (1 << 18, 40):
            s8, i8 = exact_top_k(q, p, 12, mesh, chunk)
            s1, i1 = exact_top_k(q, p, 12, one, chunk)
            np.testing.assert_array_equal(i8, i1)
            np.testing.assert_allclose(s8, s1, rtol=1e-6)
            assert list(i1[0, :2]) == [7, 50], i1[0]

    vocab = VOCAB
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=48, max_position_embeddings=64,
                        initializer_range=0.2, dropout_rate=0.0, attention_dropout=0.0)
    passages = [Passage(str(i), t, x) for i, (t, x) in enumerate(PASSAGES)]
    results = {}
    for name, mesh in [("one", one), ("data", make_mesh((8, 1, 1))), ("mixed", make_mesh((2, 2, 2)))]:
        dense = DenseRetriever.random(0, config, vocab, max_length=48, batch_size=3, mesh=mesh,
                                      search_chunk=4)
        dense.build(passages)
        results[name] = (dense.embeddings, dense.search(QUESTIONS, 5))
    for name in ("data", "mixed"):
        np.testing.assert_allclose(results[name][0], results["one"][0], atol=1e-5)
        for a, b in zip(results[name][1], results["one"][1], strict=True):
            assert [i for i, _ in a] == [i for i, _ in b], (name, a, b)
            np.testing.assert_allclose([s for _, s in a], [s for _, s in b], atol=1e-4)
    print("OK")
    """
)


def test_eight_device_mesh_gives_the_one_device_answers():
    script = (f"VOCAB = {VOCAB!r}\nPASSAGES = {[(p.title, p.text) for p in PASSAGES]!r}\n"
              f"QUESTIONS = {QUESTIONS!r}\n" + _EIGHT_DEVICES)
    env = dict(os.environ, XLA_FLAGS=forced_devices(8), JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK" in result.stdout


def test_chunks_stay_on_the_devices_within_the_budget():
    from tw_jax.models.sharding import make_mesh
    from tw_jax.retrieval.dense import CPU_RESIDENT_BYTES, _Searcher, resident_budget

    mesh = make_mesh(devices=jax.devices()[:1])
    assert resident_budget(mesh) == CPU_RESIDENT_BYTES  # the CPU reports no memory limit
    passages = np.ones((10, 4), np.float32)  # three chunks of 4 rows: 3 * 4 * 4 * 4 bytes
    kept = _Searcher(passages, mesh, chunk_rows=4, resident_bytes=192)
    assert kept._resident is not None and len(kept._resident) == 3
    assert _Searcher(passages, mesh, chunk_rows=4, resident_bytes=191)._resident is None
