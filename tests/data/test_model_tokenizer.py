"""A model folder's own tokenizer as a seqio vocabulary: the ids ``transformers.AutoTokenizer``
gives for the same folder, each family's BOS/EOS rule, exact text round trips in and out of
tf.data, and one line naming the file for a folder it cannot use."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tw_jax.data.hf_tokenizer import ModelTokenizerVocabulary, TokenizerFolderError
from tw_jax.data.tokenizer_styles import STYLES, write_tokenizer
from tw_jax.data.tokens import encode_with_offsets, prefix_id

TEXTS = ["Paris is the capital of France.", "The Eiffel Tower was built in 1889 by Gustave "
         "Eiffel.", "Naïve café résumé, 東京 and Zürich.", "Groris Funley heads Trurmouth."] * 8
SAMPLES = ["Trurmouth head of government Groris Funley", " Groris Funley", "Zürich 東京 ☃\n x",
           "1889  two  spaces"]
# style -> (BOS token or None, EOS token): what each family's files say
FRAMING = {"llama3": ("<|begin_of_text|>", "<|end_of_text|>"),
           "qwen2": (None, "<|endoftext|>"),
           "gemma3": ("<bos>", "<eos>")}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("tokenizers")
    return {style: Path(write_tokenizer(root / style, style, TEXTS, vocab_size=400))
            for style in STYLES}


@pytest.mark.parametrize("style", STYLES)
def test_ids_and_framing_are_transformers(folders, style):
    from transformers import AutoTokenizer

    vocabulary = ModelTokenizerVocabulary(folders[style])
    reference = AutoTokenizer.from_pretrained(folders[style])
    bos, eos = FRAMING[style]
    tokenizer = vocabulary.tokenizer
    assert vocabulary.bos_id == (None if bos is None else tokenizer.token_to_id(bos))
    assert vocabulary.eos_id == tokenizer.token_to_id(eos) == reference.eos_token_id
    assert vocabulary.bos_id == reference.bos_token_id
    for text in SAMPLES:
        ids = list(vocabulary.encode(text))
        framed = reference(text)["input_ids"]  # the tokenizer's own special tokens added
        assert framed == ([] if bos is None else [vocabulary.bos_id]) + ids, text
        assert vocabulary.decode(ids) == text
        assert encode_with_offsets(vocabulary, text)[0] == ids
    # what a causal row starts with: BOS, or EOS standing for it (Qwen, as GPT-2)
    assert prefix_id(vocabulary) == (vocabulary.eos_id if bos is None else vocabulary.bos_id)


@pytest.mark.parametrize("style", STYLES)
def test_tf_graph_round_trip(folders, style):
    vocabulary = ModelTokenizerVocabulary(folders[style])
    encoded = vocabulary.encode_tf(tf.constant(SAMPLES))
    assert encoded.to_list() == [vocabulary.encode(s) for s in SAMPLES]
    decoded = vocabulary.decode_tf(encoded).numpy().tolist()
    assert [d.decode("utf-8") for d in decoded] == SAMPLES
    # decoding stops at the first EOS, as seqio's vocabularies do
    ids = np.array([[*vocabulary.encode("Paris"), vocabulary.eos_id, *vocabulary.encode("x")]])
    assert vocabulary.decode_tf(tf.constant(ids)).numpy().tolist() == [b"Paris"]


def test_offsets_cover_the_text(folders):
    vocabulary = ModelTokenizerVocabulary(folders["llama3"])
    text = SAMPLES[0]
    ids, offsets = encode_with_offsets(vocabulary, text)
    assert len(ids) == len(offsets) and offsets[-1][1] == len(text)
    assert all(0 <= start <= end <= len(text) for start, end in offsets)


def test_equal_for_equal_files(folders, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (copy / name).write_bytes((folders["qwen2"] / name).read_bytes())
    assert ModelTokenizerVocabulary(copy) == ModelTokenizerVocabulary(folders["qwen2"])
    assert ModelTokenizerVocabulary(copy) != ModelTokenizerVocabulary(folders["llama3"])


def _folder_with(tmp_path, folders, style: str, **config) -> str:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((folders[style] / "tokenizer.json").read_bytes())
    base = json.loads((folders[style] / "tokenizer_config.json").read_text())
    for key, value in config.items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    (folder / "tokenizer_config.json").write_text(json.dumps(base))
    return str(folder)


def test_eos_from_config_json_when_the_tokenizer_config_has_none(tmp_path, folders):
    folder = _folder_with(tmp_path, folders, "qwen2", eos_token=None)
    with pytest.raises(TokenizerFolderError, match="no end-of-text token"):
        ModelTokenizerVocabulary(folder)
    (tmp_path / "model" / "config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    assert ModelTokenizerVocabulary(folder).eos_id == 2


def test_add_bos_token_in_the_config_decides(tmp_path, folders):
    folder = _folder_with(tmp_path, folders, "gemma3", add_bos_token=False)
    assert ModelTokenizerVocabulary(folder).bos_id is None  # the config over the post-processor


@pytest.mark.parametrize("broken, message", [
    ("missing", "tokenizer.json: no such file"),
    ("not json", "tokenizer.json: not valid JSON"),
    ("unknown eos", "tokenizer_config.json: names the token '<nope>'"),
])
def test_unusable_folders_name_the_file(tmp_path, folders, broken, message):
    folder = _folder_with(tmp_path, folders, "llama3",
                          eos_token="<nope>" if broken == "unknown eos" else "<|end_of_text|>")
    if broken == "missing":
        (tmp_path / "model" / "tokenizer.json").unlink()
    if broken == "not json":
        (tmp_path / "model" / "tokenizer.json").write_text("{cut")
    with pytest.raises((TokenizerFolderError, FileNotFoundError), match=message):
        ModelTokenizerVocabulary(folder)
