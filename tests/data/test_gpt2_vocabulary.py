"""GPT-2's byte-level BPE as a seqio vocabulary: parity, exact round trip, tf.data graphs, errors."""

from __future__ import annotations

import copy
import json
import pickle
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tokenizers import Tokenizer

from tw_jax.data.vocab_training import EOS_TOKEN, gpt2_byte_to_unicode
from tw_jax.data.vocabularies import (
    ByteLevelBPEVocabulary,
    VocabularyFileError,
    gpt2_vocabulary,
)

FIXED = [
    "",
    " ",
    "Hello world!",
    "Paris is the capital of France.",
    "Café naïve façade Ångström Zoë",
    "e\u0301 (e + combining acute) and \u00e9 stay distinct",
    "東京は日本の首都です。北京 서울",
    "😀🎉 👩\u200d💻 🇫🇷 ❤️ 🧪",
    "1 22 333 4444 55555 666666 3.14159 1,000,000 -42 ½ ² ٣",
    "She's they'll we've I'm you'd it's SHE'S 'tis",
    "  leading, trailing  ",
    "runs    of spaces\t\ttabs\n\n\nnewlines\r\nCRLF \u00a0nbsp\u3000ideographic",
    "\n",
    "\x00\x01\x7f control bytes \x1b[0m",
    "mixed 12abc abc12 a1b2 ...!!!??? ---___",
    "Москва — столица. Αθήνα. עברית. العربية. हिन्दी.",
]

ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789 '.,;:!?-\"()[]{}"
    "  \t\n\r\u00a0\u2009\u3000éèüñçåøßÆŒ東京日本中国한국ё漢字😀🎉👍🏽\u200d\u0301\U0001f1eb\U0001f1f7"
)


def corpus() -> list[str]:
    rng = random.Random(7)
    random_texts = [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 60))) for _ in range(300)
    ]
    return FIXED + random_texts


def reference_gpt2_encode(text: str, vocab: dict[str, int], merges: list[tuple[str, str]]):
    """OpenAI's GPT-2 encoder (encoder.py), written out independently of `tokenizers`."""
    regex = pytest.importorskip("regex")
    pattern = regex.compile(
        r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    )
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    byte_encoder = gpt2_byte_to_unicode()
    ids = []
    for piece in pattern.findall(text):
        word = tuple(byte_encoder[b] for b in piece.encode("utf-8"))
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda pair: ranks.get(pair, float("inf")))
            if best not in ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = tuple(merged)
        ids.extend(vocab[token] for token in word)
    return ids


@pytest.fixture(scope="module")
def vocab(gpt2_dir) -> ByteLevelBPEVocabulary:
    return gpt2_vocabulary(gpt2_dir)


def test_ids_match_tokenizers_and_openai_reference(vocab, gpt2_dir):
    library = Tokenizer.from_file(str(gpt2_dir / "tokenizer.json"))
    with open(gpt2_dir / "vocab.json", encoding="utf-8") as handle:
        table = json.load(handle)
    with open(gpt2_dir / "merges.txt", encoding="utf-8") as handle:
        merges = [tuple(line.split()) for line in handle.read().splitlines()[1:]]
    merged_anywhere = 0
    for text in corpus():
        ids = vocab.encode(text)
        assert ids == library.encode(text).ids, text
        assert ids == reference_gpt2_encode(text, table, merges), text
        merged_anywhere += any(i >= 256 for i in ids)
    assert merged_anywhere > 50  # the corpus exercises merges, not only single bytes


def test_decode_inverts_encode_exactly(vocab):
    for text in corpus():
        assert vocab.decode(vocab.encode(text)) == text


def test_both_loading_paths_give_the_same_vocabulary(gpt2_dir, tmp_path):
    from_json = gpt2_vocabulary(gpt2_dir / "tokenizer.json")
    only_pair = tmp_path / "pair"
    only_pair.mkdir()
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(gpt2_dir / name, only_pair / name)
    from_folder = gpt2_vocabulary(only_pair)
    from_merges = gpt2_vocabulary(only_pair / "merges.txt")
    from_vocab_file = gpt2_vocabulary(only_pair / "vocab.json")
    assert "merges.txt" in str(from_folder) and "tokenizer.json" in str(from_json)
    assert from_json == from_folder == from_merges == from_vocab_file
    assert hash(from_json) == hash(from_folder)
    for text in corpus():
        assert from_folder.encode(text) == from_json.encode(text)
    # merges.txt written on Windows (CRLF) reads the same.
    crlf = (only_pair / "merges.txt").read_text(encoding="utf-8").replace("\n", "\r\n")
    (only_pair / "merges.txt").write_bytes(crlf.encode("utf-8"))
    assert gpt2_vocabulary(only_pair) == from_json


def test_gpt2_layout_special_ids_and_sizes(vocab, gpt2_dir):
    with open(gpt2_dir / "vocab.json", encoding="utf-8") as handle:
        table = json.load(handle)
    assert vocab.vocab_size == len(table) == vocab.tokenizer.get_vocab_size()
    assert vocab.eos_id == table[EOS_TOKEN] == vocab.vocab_size - 1
    assert vocab.encode("!") == [0] and vocab.encode(" ") == [220] and vocab.encode("\n") == [198]
    assert vocab.pad_id == 0
    assert vocab.unk_id is None and vocab.bos_id is None and vocab.extra_ids == 0


def test_eos_token_in_text_and_decoding_stops_at_eos(vocab):
    eos = vocab.eos_id
    assert vocab.encode(f"a{EOS_TOKEN}b") == vocab.encode("a") + [eos] + vocab.encode("b")
    ids = vocab.encode("done.") + [eos] + vocab.encode("ignored")
    assert vocab.decode(ids) == "done."
    assert vocab.decode_tf(tf.constant(ids)).numpy() == b"done."


def test_id_zero_is_an_exclamation_mark_and_out_of_range_ids_are_dropped(vocab):
    hi = vocab.encode("hi")
    # Documented caveat: zeros after a row's EOS vanish, zeros without one read as "!".
    padded = tf.constant([hi + [vocab.eos_id, 0, 0], hi + [0, 0, 0]])
    assert vocab.decode_tf(padded).numpy().tolist() == [b"hi", b"hi!!!"]
    assert vocab.decode(hi + [vocab.vocab_size, 50303]) == "hi"
    assert vocab.decode_tf(tf.constant(hi + [vocab.vocab_size, -1])).numpy() == b"hi"


def test_encode_tf_in_a_dataset_map_matches_eager_and_decode_tf_inverts_it(vocab):
    texts = corpus()
    dataset = tf.data.Dataset.from_tensor_slices(texts).map(vocab.encode_tf)
    assert dataset.element_spec == tf.TensorSpec([None], tf.int32)
    encoded = [ids.numpy().tolist() for ids in dataset]
    assert encoded == [vocab.encode(t) for t in texts]

    decoded = dataset.map(vocab.decode_tf)
    assert decoded.element_spec == tf.TensorSpec([], tf.string)
    assert [s.numpy().decode("utf-8") for s in decoded] == texts


def test_batches_ranks_and_ragged_inputs_keep_their_shape(vocab):
    texts = FIXED[2:8]
    expected = [vocab.encode(t) for t in texts]
    batch = vocab.encode_tf(tf.constant(texts))
    assert isinstance(batch, tf.RaggedTensor) and batch.shape.as_list() == [6, None]
    assert batch.to_list() == expected

    grid = vocab.encode_tf(tf.constant([texts[:3], texts[3:]]))
    assert grid.shape.as_list() == [2, 3, None]
    assert grid.to_list() == [expected[:3], expected[3:]]

    ragged = vocab.encode_tf(tf.ragged.constant([texts[:1], texts[1:]]))
    assert ragged.to_list() == [expected[:1], expected[1:]]

    # Graph mode with unknown batch size: the static shape still says "rank 2, int32".
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode(strings):
        out = vocab.encode_tf(strings)
        assert out.shape.as_list() == [None, None] and out.dtype == tf.int32
        return out.to_tensor(default_value=-1)

    dense = encode(tf.constant(texts)).numpy()
    assert [[i for i in row if i != -1] for row in dense.tolist()] == expected

    # Decoding: dense 2-D, ragged 2-D and 3-D give one string per row.
    text_bytes = [t.encode("utf-8") for t in texts]
    assert vocab.decode_tf(batch).numpy().tolist() == text_bytes
    padded = batch.to_tensor(default_value=vocab.eos_id)
    assert vocab.decode_tf(padded).numpy().tolist() == text_bytes
    assert vocab.decode_tf(grid).to_list() == [text_bytes[:3], text_bytes[3:]]
    assert vocab.decode_tf(tf.constant([], tf.int32)).numpy() == b""


def test_decode_tf_replaces_broken_utf8_like_tokenizers(vocab):
    rng = random.Random(3)
    rows = [
        [
            rng.randrange(vocab.eos_id) if rng.random() < 0.3 else rng.randrange(94, 256)
            for _ in range(rng.randint(0, 12))
        ]
        for _ in range(500)
    ]
    got = vocab.decode_tf(tf.ragged.constant(rows, dtype=tf.int32)).numpy().tolist()
    want = [vocab.tokenizer.decode(row).encode("utf-8") for row in rows]
    assert got == want
    assert sum(b"\xef\xbf\xbd" in g for g in got) > 100  # many rows had broken byte sequences
    assert [vocab.decode(row) for row in rows] == [w.decode("utf-8") for w in want]


def test_invalid_utf8_is_a_clear_error_eagerly_and_in_a_graph(vocab):
    with pytest.raises(ValueError, match="not valid UTF-8"):
        vocab.encode_tf(tf.constant(b"ok \xff\xfe"))
    dataset = tf.data.Dataset.from_tensor_slices([b"fine", b"ok \xff\xfe"]).map(vocab.encode_tf)
    with pytest.raises(tf.errors.OpError, match="not valid UTF-8.*ok \\\\xff"):
        list(dataset)


def test_pickle_and_deepcopy_keep_the_vocabulary(vocab):
    for clone in (pickle.loads(pickle.dumps(vocab)), copy.deepcopy(vocab)):
        assert clone == vocab
        assert clone.encode(FIXED[7]) == vocab.encode(FIXED[7])
        assert clone.decode_tf(tf.constant(vocab.encode(FIXED[4]))).numpy().decode() == FIXED[4]


def test_missing_files_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nowhere")):
        gpt2_vocabulary(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no tokenizer.json, nor vocab.json"):
        gpt2_vocabulary(tmp_path / "empty")
    (tmp_path / "lonely").mkdir()
    (tmp_path / "lonely" / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        gpt2_vocabulary(tmp_path / "lonely" / "merges.txt")


def _copy(gpt2_dir, tmp_path, names=("vocab.json", "merges.txt", "tokenizer.json")):
    for name in names:
        shutil.copy(gpt2_dir / name, tmp_path / name)
    return tmp_path


def test_corrupt_tokenizer_json_names_the_file(gpt2_dir, tmp_path):
    folder = _copy(gpt2_dir, tmp_path, ["tokenizer.json"])
    path = folder / "tokenizer.json"
    path.write_text('{"model": {"type": "BPE", "vocab": ')
    with pytest.raises(VocabularyFileError, match=f"{path}: not valid JSON"):
        gpt2_vocabulary(folder)

    spec = json.loads((gpt2_dir / "tokenizer.json").read_text())
    spec["pre_tokenizer"]["add_prefix_space"] = True
    path.write_text(json.dumps(spec))
    with pytest.raises(VocabularyFileError, match="add_prefix_space"):
        gpt2_vocabulary(path)

    spec = json.loads((gpt2_dir / "tokenizer.json").read_text())
    spec["model"]["type"] = "WordPiece"
    path.write_text(json.dumps(spec))
    with pytest.raises(VocabularyFileError, match="expected 'BPE'"):
        gpt2_vocabulary(path)

    with pytest.raises(
        VocabularyFileError, match=f"{gpt2_dir / 'tokenizer.json'}: no '<eos>' token"
    ):
        ByteLevelBPEVocabulary(gpt2_dir, eos_token="<eos>")


def test_corrupt_vocab_or_merges_names_the_file_and_line(gpt2_dir, tmp_path):
    folder = _copy(gpt2_dir, tmp_path, ["vocab.json", "merges.txt"])
    merges = folder / "merges.txt"
    lines = merges.read_text().splitlines()
    merges.write_text("\n".join(lines[:3] + ["a b c"] + lines[3:]) + "\n")
    with pytest.raises(VocabularyFileError, match=f"{merges}: line 4: expected two tokens"):
        gpt2_vocabulary(folder)

    merges.write_text("#version: 0.2\nzzzq yyyq\n")
    with pytest.raises(VocabularyFileError, match=f"{merges}: does not fit"):
        gpt2_vocabulary(folder)

    (folder / "vocab.json").write_text("[1, 2, 3]")
    with pytest.raises(VocabularyFileError, match="token -> id"):
        gpt2_vocabulary(folder)


def test_vocabulary_without_every_byte_is_refused(gpt2_dir, tmp_path):
    folder = _copy(gpt2_dir, tmp_path, ["tokenizer.json"])
    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    spec["model"]["vocab"] = {EOS_TOKEN: 0}
    spec["model"]["merges"] = []
    spec["added_tokens"][0]["id"] = 0
    (folder / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(VocabularyFileError, match="lacks 256 of the 256 byte tokens"):
        gpt2_vocabulary(folder)


def test_hugging_face_gpt2_tokenizer_agrees(gpt2_dir, tmp_path):
    """transformers' GPT2Tokenizer on the same vocab.json + merges.txt, and the file it saves."""
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "pair"
    folder.mkdir()
    _copy(gpt2_dir, folder, ["vocab.json", "merges.txt"])
    hf = transformers.GPT2Tokenizer.from_pretrained(str(folder))
    ours = gpt2_vocabulary(folder)
    assert hf.eos_token_id == ours.eos_id and hf.pad_token_id is None
    for text in corpus():
        assert hf(text)["input_ids"] == ours.encode(text), text
    hf.save_pretrained(str(tmp_path / "saved"))
    assert gpt2_vocabulary(tmp_path / "saved" / "tokenizer.json") == ours


def test_vocab_json_without_eos_is_refused(gpt2_dir, tmp_path):
    folder = _copy(gpt2_dir, tmp_path, ["vocab.json", "merges.txt"])
    table = json.loads((folder / "vocab.json").read_text())
    del table[EOS_TOKEN]
    (folder / "vocab.json").write_text(json.dumps(table))
    with pytest.raises(VocabularyFileError, match=f"{folder / 'vocab.json'}: no"):
        gpt2_vocabulary(folder)


def test_decode_tf_accepts_int64_ids(vocab):
    ids = np.array(vocab.encode(FIXED[5]), dtype=np.int64)
    assert vocab.decode_tf(tf.constant(ids)).numpy().decode("utf-8") == FIXED[5]
