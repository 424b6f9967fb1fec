"""Training the tiny vocabularies: T5 and GPT-2 conventions, determinism, speed, bad input."""

from __future__ import annotations

import json
import time

import pytest

from tw_jax.data.vocab_training import (
    EOS_TOKEN,
    MERGES_HEADER,
    gpt2_byte_to_unicode,
    train_byte_level_bpe,
    train_sentencepiece,
    write_demo_vocabularies,
)


def sample_world_texts(root) -> list[str]:
    """The sample world's article texts (what the demo trains its vocabularies on)."""
    texts = []
    for path in sorted((root / "truth").glob("articles-*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                article = json.loads(line)
                texts.append("\n".join(" ".join(p) for p in article["paragraphs"]))
    return texts


def test_gpt2_byte_table_matches_gpt2():
    table = gpt2_byte_to_unicode()
    order = list(table.values())
    assert len(set(order)) == 256 and sorted(table) == list(range(256))
    # Facts of GPT-2's released vocab.json: "!" is 0, byte 0 is "Ā" (188), space is "Ġ" (220).
    assert order[0] == "!" and order[188] == "Ā" and order[220] == "Ġ" and table[32] == "Ġ"
    assert table[10] == "Ċ" and table[ord("a")] == "a"


def test_sentencepiece_follows_t5_conventions(tmp_path, vocab_corpus):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    path = train_sentencepiece(vocab_corpus, tmp_path / "t5", vocab_size=250)
    assert path == tmp_path / "t5.model"
    model = spm.SentencePieceProcessor(model_file=str(path))
    assert model.GetPieceSize() == 250
    assert (model.pad_id(), model.eos_id(), model.unk_id(), model.bos_id()) == (0, 1, 2, -1)
    assert [model.IdToPiece(i) for i in range(3)] == ["<pad>", "</s>", "<unk>"]
    proto = sentencepiece_model_pb2.ModelProto.FromString(path.read_bytes())
    assert proto.trainer_spec.model_type == sentencepiece_model_pb2.TrainerSpec.UNIGRAM


def test_training_is_deterministic(tmp_path, vocab_corpus):
    first = train_sentencepiece(vocab_corpus, tmp_path / "a" / "m", vocab_size=250)
    second = train_sentencepiece(vocab_corpus, tmp_path / "b" / "m", vocab_size=250)
    assert first.read_bytes() == second.read_bytes()

    one = train_byte_level_bpe(vocab_corpus, tmp_path / "one", vocab_size=600)
    two = train_byte_level_bpe(vocab_corpus, tmp_path / "two", vocab_size=600)
    for name in ("tokenizer.json", "vocab.json", "merges.txt"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


def test_byte_level_bpe_files_have_gpt2_layout(tmp_path, vocab_corpus):
    out = train_byte_level_bpe(vocab_corpus, tmp_path / "gpt2", vocab_size=400)
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    lines = (out / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert lines[0] == MERGES_HEADER
    merges = [tuple(line.split(" ")) for line in lines[1:]]
    assert len(vocab) == 400 and len(merges) == 400 - 257
    assert [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])[:256]] == list(
        gpt2_byte_to_unicode().values()
    )
    # One id per merge, in merge order, then EOS last.
    assert [vocab[a + b] for a, b in merges] == list(range(256, 256 + len(merges)))
    assert vocab[EOS_TOKEN] == 399
    spec = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    assert spec["model"]["vocab"] == vocab
    assert spec["added_tokens"][0]["content"] == EOS_TOKEN and spec["added_tokens"][0]["special"]
    assert spec["pre_tokenizer"]["type"] == "ByteLevel"
    assert spec["pre_tokenizer"]["add_prefix_space"] is False


def test_long_lines_are_cut_not_dropped(tmp_path):
    # One 40 KB line: SentencePiece skips sentences over max_sentence_length without a word.
    words = [f"word{i % 97}" for i in range(6000)]
    path = train_sentencepiece(
        [" ".join(words)], tmp_path / "long", vocab_size=60, max_sentence_bytes=256
    )
    import sentencepiece as spm

    model = spm.SentencePieceProcessor(model_file=str(path))
    assert model.GetPieceSize() == 60
    assert model.decode(model.encode("word42 word7")) == "word42 word7"


def test_empty_corpus_and_impossible_sizes_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="no text to train on"):
        train_sentencepiece(["", "  \n "], tmp_path / "empty")
    with pytest.raises(ValueError, match=f"SentencePiece training for {tmp_path / 'tiny'}"):
        train_sentencepiece(["just a few words"], tmp_path / "tiny", vocab_size=5000)
    with pytest.raises(ValueError, match="room for 256 bytes"):
        train_byte_level_bpe(["text"], tmp_path / "bpe", vocab_size=100)
    with pytest.raises(TypeError, match="not a single string"):
        train_byte_level_bpe("one text, not a list", tmp_path / "bpe")
    with pytest.raises(TypeError, match="not a single string"):
        train_sentencepiece("one text, not a list", tmp_path / "sp")


def test_demo_vocabularies_on_the_sample_world_are_small_and_fast(sample_world, tmp_path):
    from tw_jax.data.vocabularies import gpt2_vocabulary, t5_vocabulary

    root, _ = sample_world
    texts = sample_world_texts(root)
    assert 400_000 < sum(len(t) for t in texts) < 1_000_000
    # CPU time of this process (its threads included), not wall time: what other work on the
    # machine takes does not count
    start = time.process_time()
    paths = write_demo_vocabularies(texts, tmp_path / "vocab")
    elapsed = time.process_time() - start
    assert elapsed < 30, f"{elapsed:.1f} CPU s"  # ~1-2 s on one core

    assert paths == {
        "t5": tmp_path / "vocab" / "t5" / "spiece.model",
        "gpt2": tmp_path / "vocab" / "gpt2",
    }
    assert sorted(p.name for p in paths["gpt2"].iterdir()) == [
        "merges.txt",
        "tokenizer.json",
        "vocab.json",
    ]
    t5 = t5_vocabulary(paths["t5"].parent)
    gpt2 = gpt2_vocabulary(paths["gpt2"])
    assert t5.vocab_size == 1000 + 100
    assert gpt2.vocab_size == 256 + 1000 + 1 and gpt2.eos_id == 1256
    sentence = texts[0].split("\n")[0]
    assert gpt2.decode(gpt2.encode(sentence)) == sentence
    assert len(gpt2.encode(sentence)) < len(sentence.encode("utf-8")) / 2  # merges learned
    assert t5.decode(t5.encode(sentence)) == sentence
