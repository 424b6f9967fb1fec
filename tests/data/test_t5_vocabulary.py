"""T5's SentencePiece vocabulary: seqio's own class, 100 sentinels at the top, clear errors."""

from __future__ import annotations

import shutil

import pytest
import seqio
import tensorflow as tf

from tw_jax.data.vocab_training import train_sentencepiece
from tw_jax.data.vocabularies import VocabularyFileError, t5_vocabulary


@pytest.fixture(scope="module")
def vocab(t5_model) -> seqio.SentencePieceVocabulary:
    return t5_vocabulary(t5_model)


def test_is_seqio_sentencepiece_with_t5_ids(vocab, t5_model):
    import sentencepiece as spm

    pieces = spm.SentencePieceProcessor(model_file=str(t5_model)).GetPieceSize()
    assert isinstance(vocab, seqio.SentencePieceVocabulary)
    assert vocab.extra_ids == 100 and vocab.vocab_size == pieces + 100
    assert (vocab.pad_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)


def test_sentinels_encode_to_the_top_ids_and_round_trip(vocab):
    top = vocab.vocab_size - 1
    text = "Paris is the capital of <extra_id_0> ."
    ids = vocab.encode(text)
    assert ids.count(top) == 1 and max(ids) == top
    assert vocab.decode(ids) == text

    masked = "<extra_id_0> France <extra_id_1>"
    ids = vocab.encode(masked)
    assert ids[0] == top and ids[-1] == top - 1
    assert vocab.decode(ids) == masked
    assert vocab.encode("<extra_id_99>") == [top - 99]

    # The same in TF (what span corruption and metrics use).
    assert vocab.encode_tf(tf.constant(masked)).numpy().tolist() == ids
    assert vocab.decode_tf(tf.constant(ids)).numpy().decode() == masked


def test_folder_with_spiece_or_spm_model(t5_model, tmp_path):
    assert t5_vocabulary(t5_model.parent) == t5_vocabulary(t5_model)
    shutil.copy(t5_model, tmp_path / "spm.model")
    folder_vocab = t5_vocabulary(tmp_path, extra_ids=0)
    assert folder_vocab.sentencepiece_model_file == str(tmp_path / "spm.model")
    assert folder_vocab.vocab_size == t5_vocabulary(t5_model).vocab_size - 100


def test_missing_model_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'none.model'}: no such"):
        t5_vocabulary(tmp_path / "none.model")
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no SentencePiece model"):
        t5_vocabulary(tmp_path)


def test_corrupt_model_names_the_path(tmp_path):
    path = tmp_path / "spiece.model"
    path.write_bytes(b"\x00 definitely not a protobuf \xff" * 10)
    with pytest.raises(VocabularyFileError, match=f"{path}: not a SentencePiece model"):
        t5_vocabulary(path)


def test_model_without_t5_padding_is_refused(tmp_path, vocab_corpus):
    import sentencepiece as spm

    prefix = tmp_path / "bos_model"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(vocab_corpus),
        model_prefix=str(prefix),
        vocab_size=200,
        minloglevel=2,
        num_threads=1,
    )  # sentencepiece defaults: unk=0, bos=1, eos=2, no pad
    with pytest.raises(VocabularyFileError, match="T5 needs pad_id=0"):
        t5_vocabulary(f"{prefix}.model")


def test_trained_model_encodes_like_sentencepiece_itself(tmp_path, vocab_corpus):
    import sentencepiece as spm

    path = train_sentencepiece(vocab_corpus, tmp_path / "sp", vocab_size=250)
    vocab = t5_vocabulary(path)
    plain = spm.SentencePieceProcessor(model_file=str(path))
    for text in vocab_corpus[:20]:
        assert vocab.encode(text) == plain.encode(text)
