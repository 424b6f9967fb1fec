"""A Hugging Face model folder's own tokenizer as a seqio vocabulary.

Llama 3, Qwen 2/2.5/3 and Gemma 3 ship their tokenizer as ``tokenizer.json`` (the ``tokenizers``
library's format: Llama 3's tiktoken-converted byte-level BPE, Qwen's byte-level BPE behind an
NFC normaliser, Gemma's SentencePiece-style BPE with byte fallback) and say which special tokens
frame a text in ``tokenizer_config.json``. :class:`ModelTokenizerVocabulary` runs that file
through ``tokenizers`` itself, so its ids are the ones ``AutoTokenizer`` gives for the same
folder, and reads the framing the way ``transformers`` does:

- **BOS**: ``add_bos_token`` in ``tokenizer_config.json`` when the file says (Gemma: ``true``),
  else whatever ``tokenizer.json``'s post-processor puts in front of a text (Llama 3's
  ``TemplateProcessing`` adds ``<|begin_of_text|>``; Qwen's adds nothing). ``bos_id`` is None
  where no BOS is added.
- **EOS**: ``eos_token`` of ``tokenizer_config.json``, else the folder's ``config.json`` /
  ``generation_config.json`` ``eos_token_id`` (the first of a list).

What a causal LM's row starts with (:func:`tw_jax.data.tokens.prefix_id`) is its BOS, or, for a
tokenizer without one (Qwen, GPT-2), its EOS: the convention of GPT-2's papers and of
lm-evaluation-harness (``prefix_token_id``), so the first real token is scored with a context.

Padding: seqio pads with literal zeros and reads 0 as padding, as for GPT-2's vocabulary
(:class:`tw_jax.data.vocabularies.ByteLevelBPEVocabulary`, whose notes on packing hold here
too): ``pad_id`` is 0 even where id 0 is a real token (``!`` in Llama 3 and Qwen, ``<pad>`` in
Gemma); the trainer's masks come from real lengths.

Decoding in a tf.data graph runs ``tokenizers`` through ``tf.numpy_function`` (as GPT-2's
encoding does), so such a graph runs in this Python process only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from tw_jax.data.model_folder import TOKENIZER_JSON
from tw_jax.data.vocabularies import TokenizersVocabulary
from tw_jax.errors import UsageError
from tw_jax.io import paths

TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
ID_FILES = ("generation_config.json", "config.json")  # where an EOS id may be, in this order


class TokenizerFolderError(UsageError):
    """A model folder's tokenizer files cannot be used; the message names the file (a
    :class:`UsageError`: the CLI prints it as one line)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


def _json(path: str, *, required: bool) -> dict[str, Any] | None:
    if not paths.isfile(path):
        if required:
            raise FileNotFoundError(f"{path}: no such file (a model folder's tokenizer is its "
                                    f"{TOKENIZER_JSON})")
        return None
    try:
        value = json.loads(paths.read_bytes(path).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TokenizerFolderError(path, f"not valid JSON ({error})") from error
    if not isinstance(value, dict):
        raise TokenizerFolderError(path, "expected a JSON object")
    return value


def _token_text(value: Any) -> str | None:
    """A special token as ``tokenizer_config.json`` writes it: a string or an AddedToken dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _first_id(value: Any) -> int | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return int(value) if isinstance(value, int) else None


class ModelTokenizerVocabulary(TokenizersVocabulary):
    """``tokenizer.json`` + ``tokenizer_config.json`` of a model folder as a seqio vocabulary
    (see the module docstring for the BOS/EOS rules). ``encode`` adds no special token; the
    framing is the caller's (:func:`prefix_id`), as seqio's vocabularies leave it."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        super().__init__(extra_ids=0)
        from tokenizers import Tokenizer

        self._folder = os.fspath(folder)
        path = paths.join(self._folder, TOKENIZER_JSON)
        spec = _json(path, required=True)
        if "model" not in spec:
            raise TokenizerFolderError(path, "not a tokenizers tokenizer.json (no 'model')")
        try:
            tokenizer = Tokenizer.from_str(json.dumps(spec))
        except Exception as error:  # tokenizers raises plain Exception for bad files
            raise TokenizerFolderError(path, f"tokenizers cannot load it ({error})") from error
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        self._size = tokenizer.get_vocab_size(with_added_tokens=True)
        settings = self._settings()
        self._bos_id = self._read_bos(path, settings)
        self._eos_id = self._read_eos(settings)
        self._fingerprint = hashlib.sha256(
            json.dumps([spec, self._bos_id, self._eos_id], sort_keys=True).encode("utf-8")
        ).hexdigest()

    # --- the folder's rules ----------------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        """``tokenizer_config.json`` over ``special_tokens_map.json`` (either may be absent)."""
        merged: dict[str, Any] = {}
        for name in (SPECIAL_TOKENS_MAP, TOKENIZER_CONFIG):
            merged.update(_json(paths.join(self._folder, name), required=False) or {})
        return merged

    def _id_of(self, token: str, where: str) -> int:
        index = self._tokenizer.token_to_id(token)
        if index is None:
            raise TokenizerFolderError(where, f"names the token {token!r}, which "
                                              f"{TOKENIZER_JSON} does not have")
        return int(index)

    def _read_bos(self, path: str, settings: Mapping[str, Any]) -> int | None:
        config = paths.join(self._folder, TOKENIZER_CONFIG)
        if "add_bos_token" in settings:
            if not settings["add_bos_token"]:
                return None
            token = _token_text(settings.get("bos_token"))
            if token is None:
                raise TokenizerFolderError(config, "add_bos_token is true but no bos_token")
            return self._id_of(token, config)
        probe = "a"
        bare = self._tokenizer.encode(probe, add_special_tokens=False).ids
        framed = self._tokenizer.encode(probe, add_special_tokens=True).ids
        at = next((i for i in range(len(framed)) if framed[i:i + len(bare)] == bare), None)
        if at is None:
            raise TokenizerFolderError(path, "its post-processor changes a text's own tokens")
        if at > 1:
            raise TokenizerFolderError(path, f"its post-processor puts {at} tokens before a "
                                             "text; one BOS at most is supported")
        return int(framed[0]) if at == 1 else None

    def _read_eos(self, settings: Mapping[str, Any]) -> int:
        token = _token_text(settings.get("eos_token"))
        if token is not None:
            return self._id_of(token, paths.join(self._folder, TOKENIZER_CONFIG))
        for name in ID_FILES:
            found = _first_id((_json(paths.join(self._folder, name), required=False) or {})
                              .get("eos_token_id"))
            if found is not None:
                return found
        raise TokenizerFolderError(
            self._folder, f"no end-of-text token: neither {TOKENIZER_CONFIG}'s eos_token nor an "
                          f"eos_token_id in {' or '.join(ID_FILES)}")

    # --- seqio.Vocabulary ------------------------------------------------------------------

    @property
    def bos_id(self) -> int | None:
        return self._bos_id

    def _decode_batch(self, values: np.ndarray, splits: np.ndarray) -> np.ndarray:
        rows = [self._decode(values[splits[i]:splits[i + 1]].tolist())
                for i in range(len(splits) - 1)]
        return np.array([row.encode("utf-8") for row in rows], dtype=object)

    def _decode_tf(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        ids = ids if isinstance(ids, tf.RaggedTensor) else tf.convert_to_tensor(ids)
        if isinstance(ids, tf.RaggedTensor):
            if ids.ragged_rank > 1 or ids.flat_values.shape.rank > 1:
                return ids.with_values(self._decode_tf(ids.values))
            text = tf.numpy_function(self._decode_batch,
                                     [tf.cast(ids.values, tf.int64), ids.row_splits],
                                     tf.string, stateful=False, name="tokenizer_decode")
            text.set_shape([None])
            return text
        if ids.shape.rank == 1:
            return tf.reshape(self._decode_tf(tf.expand_dims(ids, 0)), [])
        return self._decode_tf(tf.RaggedTensor.from_tensor(ids))

    # --- identity and introspection --------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ModelTokenizerVocabulary)
                and self._fingerprint == other._fingerprint)

    def __hash__(self) -> int:
        return hash(self._fingerprint)

    def __str__(self) -> str:
        return (f"ModelTokenizerVocabulary(folder={self._folder}, vocab_size={self._size}, "
                f"bos_id={self._bos_id}, eos_id={self._eos_id})")

    @property
    def folder(self) -> str:
        return self._folder

    @property
    def fingerprint(self) -> str:
        """sha256 of what decides ids and framing (the tokenizer spec, BOS and EOS)."""
        return self._fingerprint



def model_tokenizer(folder: str | os.PathLike[str]) -> ModelTokenizerVocabulary:
    return ModelTokenizerVocabulary(folder)
