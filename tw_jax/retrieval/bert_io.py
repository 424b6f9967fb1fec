"""Hugging Face BERT and DPR encoder folders (``config.json`` + safetensors + WordPiece vocabulary)
to and from :class:`~tw_jax.retrieval.bert.BertEncoder`'s parameter tree, and their tokenizer.

Weights: as in ``tw_jax/models/hf_io.py`` and ``bart_io.py``, only ``safetensors.numpy`` is read (nothing is
unpickled, no PyTorch). Hugging Face keeps every projection as a biased ``torch.nn.Linear`` laid
out ``(out, in)``; we keep ``(in, ...)`` kernels with separate head axes, so import transposes
and reshapes and export does the reverse, exactly. Three folder kinds load:

- ``DPRQuestionEncoder`` (``model_type`` ``dpr``): tensors ``question_encoder.bert_model.*`` and,
  with ``projection_dim > 0``, ``question_encoder.encode_proj.*``;
- ``DPRContextEncoder``: the same under ``ctx_encoder.``;
- a plain ``BertModel`` (``model_type`` ``bert``): tensors without prefix, or under ``bert.`` when
  saved from a model with heads (``bert-base-uncased`` itself, whose old LayerNorms are named
  ``gamma``/``beta``).

What an encoder never uses is skipped and logged: BERT's tanh ``pooler`` (DPR embeds with the
[CLS] hidden state, not the pooler), pre-training heads (``cls.*``), and the ``position_ids`` /
``token_type_ids`` buffers older checkpoints carry. Any other tensor, a missing one, or one of
another shape is an error naming the file and the tensor.

Tokenizer: DPR tokenises with BERT's WordPiece (``bert-base-uncased``'s ``vocab.txt``, lower
case). :class:`WordPieceTokenizer` wraps the ``tokenizers`` package, built from the encoder
folder's ``tokenizer.json`` when present, else from its ``vocab.txt`` and
``tokenizer_config.json`` (``do_lower_case``, ``strip_accents``, ``tokenize_chinese_chars``);
nothing is ever downloaded. Folders may be local or in a bucket (``gs://``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

from tw_jax.io import paths
from tw_jax.io.atomic import write_json
from tw_jax.models.hf_io import (
    TensorReader,
    TensorWriter,
    read_config,
    read_safetensors,
    write_folder,
)
from tw_jax.retrieval.bert import BertConfig

# DPR role -> (tensor prefix of the encoder, Hugging Face architecture).
ROLES: dict[str, tuple[str, str]] = {
    "question": ("question_encoder.", "DPRQuestionEncoder"),
    "ctx": ("ctx_encoder.", "DPRContextEncoder"),
}
_BERT_MODEL = "bert_model."
_READER = "span_predictor."
# Never part of an encoder's output (see the module docstring); skipped when present.
_SKIPPED_PARTS = ("pooler.", "cls.")
_SKIPPED_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
_ATTENTION = ("query", "key", "value")

VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _prefixes(tensors: dict[str, np.ndarray], source: str, role: str | None) -> tuple[str, str, str]:
    """``(role, prefix of the BERT tensors, prefix of encode_proj)`` of a folder's tensors.

    ``role`` is ``question`` or ``ctx`` for a DPR encoder, ``bert`` for a plain BertModel; a
    given ``role`` must match what the tensors hold.
    """
    word = "embeddings.word_embeddings.weight"
    found = {name: (outer + _BERT_MODEL, outer) for name, (outer, _) in ROLES.items()
             if outer + _BERT_MODEL + word in tensors}
    for prefix in ("", "bert."):
        if prefix + word in tensors:
            found["bert"] = (prefix, prefix)
    if not found:
        if any(name.startswith(_READER) for name in tensors):
            raise ValueError(f"{source}: a DPRReader checkpoint, not a question or context encoder")
        raise KeyError(f"{source}: no tensor named '*{word}' (looked for question_encoder."
                       f"{_BERT_MODEL}, ctx_encoder.{_BERT_MODEL}, bert. and no prefix): not a "
                       "BERT or DPR encoder")
    if role is None:
        if len(found) > 1:
            raise ValueError(f"{source}: holds several encoders ({sorted(found)}); pass role")
        role = next(iter(found))
    if role not in found:
        raise ValueError(f"{source}: no {role!r} encoder in this folder (it holds "
                         f"{sorted(found)})")
    return (role, *found[role])


def bert_params_from_hf(
    tensors: dict[str, np.ndarray], config: BertConfig, source: str | os.PathLike[str] = "<tensors>",
    role: str | None = None,
) -> tuple[dict[str, Any], str]:
    """``(params, role)`` from Hugging Face BERT / DPR tensors (names as ``save_pretrained``
    writes them); ``role`` (``question``, ``ctx``, ``bert``) is found from the names when None.

    Refuses missing tensors, tensors of another shape, and tensors this config has no place for.
    """
    source = os.fspath(source)
    role, prefix, outer = _prefixes(tensors, source, role)
    reader = TensorReader(tensors, source, config.param_dtype)
    linear = reader.linear
    h, heads, head_dim = config.hidden_size, config.num_attention_heads, config.head_dim

    def norm(name: str) -> dict[str, np.ndarray]:
        # Checkpoints converted from TensorFlow (bert-base-uncased) name them gamma/beta.
        old = f"{name}.gamma" in tensors and f"{name}.weight" not in tensors
        return reader.layer_norm(name, h, *(("gamma", "beta") if old else ("weight", "bias")))

    def embedding(name: str, rows: int) -> dict[str, np.ndarray]:
        return {"embedding": reader.take(f"{prefix}embeddings.{name}.weight", (rows, h))}

    params: dict[str, Any] = {
        "word_embeddings": embedding("word_embeddings", config.vocab_size),
        "position_embeddings": embedding("position_embeddings", config.max_position_embeddings),
        "token_type_embeddings": embedding("token_type_embeddings", config.type_vocab_size),
        "embeddings_norm": norm(f"{prefix}embeddings.LayerNorm"),
    }
    for i in range(config.num_hidden_layers):
        p = f"{prefix}encoder.layer.{i}"
        attention: dict[str, Any] = {}
        for name in _ATTENTION:
            dense = linear(f"{p}.attention.self.{name}", h, h)
            attention[name] = {"kernel": dense["kernel"].reshape(h, heads, head_dim),
                               "bias": dense["bias"].reshape(heads, head_dim)}
        dense = linear(f"{p}.attention.output.dense", h, h)
        attention["out"] = {"kernel": dense["kernel"].reshape(heads, head_dim, h),
                            "bias": dense["bias"]}
        params[f"layer_{i}"] = {
            "attention": attention,
            "attention_norm": norm(f"{p}.attention.output.LayerNorm"),
            "intermediate": linear(f"{p}.intermediate.dense", h, config.intermediate_size),
            "output": linear(f"{p}.output.dense", config.intermediate_size, h),
            "output_norm": norm(f"{p}.output.LayerNorm"),
        }
    if config.projection_dim:
        params["encode_proj"] = linear(f"{outer}encode_proj", h, config.projection_dim)

    skipped = []
    for name in reader.unused():
        inner = name.removeprefix(prefix) if name.startswith(prefix) else name
        if inner.startswith(_SKIPPED_PARTS) or inner in _SKIPPED_BUFFERS:
            skipped.append(name)
    if skipped:
        logging.info("%s: %d tensors an encoder does not use, skipped: %s", source, len(skipped),
                     ", ".join(skipped[:6]) + (" ..." if len(skipped) > 6 else ""))
    unused = [name for name in reader.unused() if name not in skipped]
    if unused:
        hint = (" (encode_proj.* present: is config.json's projection_dim 0?)"
                if any("encode_proj" in name for name in unused) else "")
        raise ValueError(f"{source}: tensors not part of a BERT encoder of this config: "
                         f"{unused[:5]}{hint}")
    return params, role


def bert_params_to_hf(params: dict[str, Any], config: BertConfig, role: str) -> dict[str, np.ndarray]:
    """Hugging Face tensors from our tree: ``DPRQuestionEncoder`` / ``DPRContextEncoder`` names
    for ``role`` ``question`` / ``ctx``, ``BertModel`` names (no prefix) for ``bert``."""
    if role == "bert":
        prefix = outer = ""
        if config.projection_dim:
            raise ValueError("a BertModel has no encode_proj: export with role question or ctx")
    elif role in ROLES:
        outer = ROLES[role][0]
        prefix = outer + _BERT_MODEL
    else:
        raise ValueError(f"unknown role {role!r}: question, ctx or bert")
    h = config.hidden_size
    out = TensorWriter(np.float32)
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        out.put(f"{prefix}embeddings.{name}.weight", params[name]["embedding"])
    out.layer_norm(f"{prefix}embeddings.LayerNorm", params["embeddings_norm"])
    for i in range(config.num_hidden_layers):
        layer, p = params[f"layer_{i}"], f"{prefix}encoder.layer.{i}"
        for name in _ATTENTION:
            out.linear(f"{p}.attention.self.{name}", layer["attention"][name], h)
        out.linear(f"{p}.attention.output.dense", layer["attention"]["out"], h)
        out.layer_norm(f"{p}.attention.output.LayerNorm", layer["attention_norm"])
        out.linear(f"{p}.intermediate.dense", layer["intermediate"], h)
        out.linear(f"{p}.output.dense", layer["output"], config.intermediate_size)
        out.layer_norm(f"{p}.output.LayerNorm", layer["output_norm"])
    if config.projection_dim:
        out.linear(f"{outer}encode_proj", params["encode_proj"], h)
    return out.tensors


def load_bert_encoder(
    path: str | os.PathLike[str], role: str | None = None, **overrides: Any
) -> tuple[BertConfig, dict[str, Any], str]:
    """``(config, numpy params, role)`` of a Hugging Face DPR encoder or BertModel folder;
    ``overrides`` set config fields (``dtype="bfloat16"``)."""
    folder = os.fspath(path)
    config = BertConfig.from_hf_config(read_config(folder), **overrides)
    params, role = bert_params_from_hf(read_safetensors(folder), config, folder, role)
    return config, params, role


def save_bert_encoder(
    path: str | os.PathLike[str], config: BertConfig, params: dict[str, Any], role: str,
    tokenizer: WordPieceTokenizer | None = None,
) -> None:
    """A folder Hugging Face loads as ``DPRQuestionEncoder`` / ``DPRContextEncoder`` /
    ``BertModel`` (``role`` question / ctx / bert), with the tokenizer's ``vocab.txt``."""
    folder = os.fspath(path)
    architecture = ROLES[role][1] if role in ROLES else "BertModel"
    tensors = bert_params_to_hf(params, config, role)
    paths.makedirs(folder)
    if tokenizer is not None:
        tokenizer.save(folder)
    write_folder(folder, config.to_hf_config(architecture), tensors)


@dataclass(frozen=True)
class Encoded:
    """Token ids and segment (token type) ids of a batch of texts, unpadded, one list per text."""

    ids: list[list[int]]
    type_ids: list[list[int]]


class WordPieceTokenizer:
    """BERT's WordPiece tokenizer (the ``tokenizers`` package) with DPR's encoding rules:
    ``[CLS] text [SEP]`` for a question, ``[CLS] title [SEP] text [SEP]`` for a titled passage
    (segment ids 0 then 1), stripped of surrounding whitespace and truncated longest-first to
    ``max_length`` tokens, as DPR's ``BertTensorizer.text_to_tensor`` calls Hugging Face's
    ``encode(title, text_pair=text, max_length=..., truncation=True)``.
    """

    def __init__(self, tokenizer: Tokenizer, vocab: dict[str, int], max_length: int,
                 lowercase: bool, source: str) -> None:
        for token in ("[CLS]", "[SEP]", "[PAD]", "[UNK]"):
            if token not in vocab:
                raise ValueError(f"{source}: the vocabulary has no {token} token")
        if max_length < 3:
            raise ValueError(f"max_length must leave room for [CLS] x [SEP], got {max_length}")
        self._tokenizer = tokenizer
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length, strategy="longest_first")
        self.vocab = dict(vocab)
        self.max_length = max_length
        self.lowercase = lowercase
        self.source = source
        self.pad_id = vocab["[PAD]"]

    @classmethod
    def from_vocab(cls, tokens: Sequence[str], max_length: int = 256, lowercase: bool = True,
                   strip_accents: bool | None = None, chinese_chars: bool = True,
                   source: str = "<vocab>") -> WordPieceTokenizer:
        """From the tokens of a ``vocab.txt`` (id = line number), as Hugging Face's BertTokenizer."""
        vocab: dict[str, int] = {}
        for index, token in enumerate(tokens):
            vocab[token] = index
        for token in SPECIAL_TOKENS:
            if token not in vocab:
                raise ValueError(f"{source}: the vocabulary has no {token} token")
        wordpiece = BertWordPieceTokenizer(
            vocab, clean_text=True, handle_chinese_chars=chinese_chars,
            strip_accents=strip_accents, lowercase=lowercase,
        )
        return cls(wordpiece._tokenizer, vocab, max_length, lowercase, source)

    @classmethod
    def from_folder(cls, path: str | os.PathLike[str], max_length: int = 256) -> WordPieceTokenizer:
        """From an encoder folder's ``tokenizer.json``, else its ``vocab.txt`` (+ optional
        ``tokenizer_config.json``); a clear error when neither is there."""
        folder = os.fspath(path)
        settings: dict[str, Any] = {}
        config_path = paths.join(folder, TOKENIZER_CONFIG)
        if paths.isfile(config_path):
            try:
                settings = json.loads(paths.read_text(config_path))
            except json.JSONDecodeError as error:
                raise ValueError(f"{config_path}: not valid JSON ({error})") from error
        lowercase = bool(settings.get("do_lower_case", True))
        fast = paths.join(folder, TOKENIZER_FILE)
        if paths.isfile(fast):
            try:
                tokenizer = Tokenizer.from_str(paths.read_text(fast))
            except Exception as error:  # the Rust side raises plain Exceptions
                raise ValueError(f"{fast}: not a tokenizers file ({error})") from error
            return cls(tokenizer, tokenizer.get_vocab(), max_length, lowercase, fast)
        vocab_path = paths.join(folder, VOCAB_FILE)
        if not paths.isfile(vocab_path):
            raise FileNotFoundError(f"no {TOKENIZER_FILE} or {VOCAB_FILE} in {folder}: DPR "
                                    "encoders need BERT's WordPiece vocabulary next to the weights")
        text = paths.read_text(vocab_path).replace("\r\n", "\n")
        tokens = text.split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        return cls.from_vocab(
            tokens, max_length, lowercase=lowercase, strip_accents=settings.get("strip_accents"),
            chinese_chars=bool(settings.get("tokenize_chinese_chars", True)), source=vocab_path)

    def encode(self, texts: Sequence[str], titles: Sequence[str] | None = None) -> Encoded:
        """Ids of ``texts`` (questions), or of ``titles`` paired with ``texts`` (passages): a
        passage with an empty title is encoded alone, as DPR's ``if title:`` does."""
        texts = [text.strip() for text in texts]
        if titles is None:
            encodings = self._tokenizer.encode_batch(texts)
        else:
            if len(titles) != len(texts):
                raise ValueError(f"{len(titles)} titles for {len(texts)} texts")
            inputs = [(title, text) if title else text for title, text in zip(titles, texts,
                                                                               strict=True)]
            encodings = self._tokenizer.encode_batch(inputs)
        return Encoded([e.ids for e in encodings], [e.type_ids for e in encodings])

    def fingerprint(self) -> str:
        """sha256 of the whole tokenizer (vocabulary, normalisation, templates, truncation)."""
        return hashlib.sha256(self._tokenizer.to_str().encode("utf-8")).hexdigest()

    def tokens(self) -> list[str]:
        """The vocabulary in id order (what ``vocab.txt`` holds)."""
        by_id = sorted(self.vocab.items(), key=lambda item: item[1])
        return [token for token, _ in by_id]

    def save(self, path: str | os.PathLike[str]) -> None:
        """``vocab.txt`` and ``tokenizer.json`` (plus ``tokenizer_config.json``) into ``path``."""
        folder = os.fspath(path)
        paths.makedirs(folder)
        with paths.open_file(paths.join(folder, VOCAB_FILE), "w", encoding="utf-8") as handle:
            handle.write("".join(f"{token}\n" for token in self.tokens()))
        paths.write_text(paths.join(folder, TOKENIZER_FILE), self._tokenizer.to_str())
        write_json(paths.join(folder, TOKENIZER_CONFIG),
                   {"do_lower_case": self.lowercase, "model_max_length": self.max_length,
                    "tokenizer_class": "BertTokenizer"})
