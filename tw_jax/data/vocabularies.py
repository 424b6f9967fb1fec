"""seqio vocabularies for the model families, loaded from local files only.

- T5: :func:`t5_vocabulary`, seqio's own ``SentencePieceVocabulary`` with 100 sentinels.
- GPT-2: :class:`ByteLevelBPEVocabulary`, byte-level BPE from ``tokenizer.json`` or
  ``vocab.json`` + ``merges.txt``, usable wherever seqio takes a vocabulary (``seqio.Feature``,
  ``seqio.preprocessors.tokenize``, ``decode_tf`` in metrics).
- BART: :class:`BartVocabulary`, the same byte-level BPE with BART's special tokens
  (``<s>``, ``<pad>``, ``</s>``, ``<unk>``, ``<mask>``).

Paths go through :mod:`tw_jax.io.paths`, so a vocabulary in a bucket (``gs://``, on any GCS
endpoint, an emulator included) loads as a local one. seqio reads a SentencePiece model itself
with ``tf.io.gfile``, so a model in a bucket is first copied into a local cache file named by
its contents (:func:`local_t5_model`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import seqio
import tensorflow as tf

from tw_jax.data.vocab_training import (
    EOS_TOKEN,
    MERGES_FILE,
    MERGES_HEADER,
    TOKENIZER_FILE,
    VOCAB_FILE,
    build_byte_level_bpe_tokenizer,
    gpt2_byte_to_unicode,
)
from tw_jax.io import paths

T5_EXTRA_IDS = 100
T5_MODEL_NAMES = ("spiece.model", "spm.model")


class VocabularyFileError(ValueError):
    """A vocabulary file exists but cannot be used; the message names the file and the problem."""

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = os.fspath(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")


def _join(folder: str, name: str) -> str:
    return paths.join(folder, name)


def _read_text(path: str) -> str:
    try:
        data = paths.read_bytes(path)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"{path}: no such file") from error
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise VocabularyFileError(path, f"not UTF-8 text ({error})") from error


# --------------------------------------------------------------------------------------------
# T5


def resolve_t5_model(path: str | os.PathLike[str]) -> str:
    """The SentencePiece model file: ``path`` itself, or ``spiece.model``/``spm.model`` in it."""
    path = os.fspath(path)
    if paths.isdir(path):
        for name in T5_MODEL_NAMES:
            candidate = _join(path, name)
            if paths.isfile(candidate):
                return candidate
        raise FileNotFoundError(f"{path}: no SentencePiece model ({' or '.join(T5_MODEL_NAMES)})")
    if not paths.exists(path):
        raise FileNotFoundError(f"{path}: no such SentencePiece model file")
    return path


def local_t5_model(model_file: str) -> str:
    """A local file with the model's bytes: ``model_file`` itself when local; for a URL a copy
    in the OS temp folder named by its SHA-256 (written atomically, reused while it lasts), so
    seqio's loader and its cache keyed by file name never see two models under one name."""
    if not paths.is_url(model_file):
        return model_file
    data = paths.read_bytes(model_file)
    folder = os.path.join(tempfile.gettempdir(), "tw_jax_vocab")
    local = os.path.join(folder, hashlib.sha256(data).hexdigest()[:32] + ".model")
    if not os.path.isfile(local):
        from tw_jax.io.atomic import atomic_open

        with atomic_open(local, "wb") as handle:
            handle.write(data)
    return local


def t5_vocabulary(
    path: str | os.PathLike[str], extra_ids: int = T5_EXTRA_IDS
) -> seqio.SentencePieceVocabulary:
    """T5's vocabulary from a local SentencePiece model, with ``extra_ids`` sentinels.

    seqio appends the sentinels as user-defined pieces ``▁<extra_id_N>`` in reverse order, so
    the text ``<extra_id_N>`` (at a word start) encodes to ``vocab_size - 1 - N``, the id T5's
    span corruption uses. The model is loaded here, not lazily, so a missing or corrupt file
    fails at once with its path, and T5's id layout (pad=0, eos=1) is checked: seqio's feature
    converters pad with 0.
    """
    model_file = resolve_t5_model(path)
    vocabulary = seqio.SentencePieceVocabulary(local_t5_model(model_file), extra_ids=extra_ids)
    try:
        vocabulary.load_model()
    except Exception as error:  # protobuf DecodeError or sentencepiece's RuntimeError
        raise VocabularyFileError(model_file, f"not a SentencePiece model ({error})") from error
    tokenizer = vocabulary.tokenizer
    if tokenizer.pad_id() != seqio.vocabularies.PAD_ID or tokenizer.eos_id() < 0:
        raise VocabularyFileError(
            model_file,
            f"T5 needs pad_id=0 and an EOS piece; this model has pad_id={tokenizer.pad_id()}, "
            f"eos_id={tokenizer.eos_id()}",
        )
    return vocabulary


# --------------------------------------------------------------------------------------------
# GPT-2: files


@dataclass(frozen=True)
class _Sources:
    """Where a byte-level BPE vocabulary came from: tokenizer.json, or vocab.json + merges.txt."""

    tokenizer_json: str | None = None
    vocab_json: str | None = None
    merges_txt: str | None = None

    def __str__(self) -> str:
        return self.tokenizer_json or f"{self.vocab_json} + {self.merges_txt}"


def _resolve_gpt2_files(path: str) -> _Sources:
    if paths.isdir(path):
        if paths.isfile(_join(path, TOKENIZER_FILE)):
            return _Sources(tokenizer_json=_join(path, TOKENIZER_FILE))
        vocab, merges = _join(path, VOCAB_FILE), _join(path, MERGES_FILE)
        if paths.isfile(vocab) and paths.isfile(merges):
            return _Sources(vocab_json=vocab, merges_txt=merges)
        raise FileNotFoundError(
            f"{path}: no {TOKENIZER_FILE}, nor {VOCAB_FILE} + {MERGES_FILE}, in this folder"
        )
    if not paths.exists(path):
        raise FileNotFoundError(f"{path}: no such byte-level BPE vocabulary file or folder")
    folder = os.path.dirname(path)  # posixpath: URLs too
    if path.endswith(".txt"):
        return _Sources(vocab_json=_join(folder, VOCAB_FILE), merges_txt=path)
    if os.path.basename(path) == VOCAB_FILE:
        return _Sources(vocab_json=path, merges_txt=_join(folder, MERGES_FILE))
    return _Sources(tokenizer_json=path)


def _parse_json(path: str) -> tuple[object, str]:
    """The parsed JSON and its text."""
    text = _read_text(path)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as error:
        raise VocabularyFileError(path, f"not valid JSON ({error})") from error


def _parse_merges(path: str) -> list[tuple[str, str]]:
    merges: list[tuple[str, str]] = []
    for number, line in enumerate(_read_text(path).split("\n"), start=1):
        line = line.rstrip("\r")
        if not line or (number == 1 and line.startswith(MERGES_HEADER.split(" ")[0])):
            continue
        pair = line.split(" ")
        if len(pair) != 2 or not all(pair):
            raise VocabularyFileError(path, f"line {number}: expected two tokens, got {line!r}")
        merges.append((pair[0], pair[1]))
    return merges


def _check_byte_level(path: str, spec: dict) -> None:
    """Refuses tokenizer.json files whose output would not round-trip like GPT-2's."""
    model = spec.get("model") or {}
    if model.get("type") != "BPE":
        raise VocabularyFileError(path, f"model type {model.get('type')!r}, expected 'BPE'")
    if spec.get("normalizer") is not None:
        raise VocabularyFileError(path, "has a normalizer; byte-level BPE must see the raw text")
    pre = spec.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    byte_level = [s for s in steps if s.get("type") == "ByteLevel"]
    if not byte_level:
        raise VocabularyFileError(path, "pre-tokenizer is not ByteLevel")
    if any(s.get("add_prefix_space") for s in byte_level):
        raise VocabularyFileError(
            path, "ByteLevel add_prefix_space=true would not give back the input text exactly"
        )
    if (spec.get("decoder") or {}).get("type") != "ByteLevel":
        raise VocabularyFileError(path, "decoder is not ByteLevel")


def _load_tokenizer(sources: _Sources, eos_token: str):
    from tokenizers import AddedToken, Tokenizer

    if sources.tokenizer_json:
        path = sources.tokenizer_json
        spec, text = _parse_json(path)
        if not isinstance(spec, dict) or "model" not in spec:
            raise VocabularyFileError(path, "not a tokenizers tokenizer.json (no 'model')")
        _check_byte_level(path, spec)
        try:
            tokenizer = Tokenizer.from_str(text)
        except Exception as error:  # tokenizers raises plain Exception for bad files
            raise VocabularyFileError(path, f"tokenizers cannot load it ({error})") from error
        if tokenizer.token_to_id(eos_token) is None:
            raise VocabularyFileError(path, f"no {eos_token!r} token")
        # Whole-text encodes (no padding or truncation), and EOS special as in GPT-2's files.
        tokenizer.no_padding()
        tokenizer.no_truncation()
        tokenizer.add_special_tokens([AddedToken(eos_token, special=True, normalized=False)])
        return tokenizer
    vocab, _ = _parse_json(sources.vocab_json)
    if not isinstance(vocab, dict) or not all(
        isinstance(k, str) and isinstance(v, int) for k, v in vocab.items()
    ):
        raise VocabularyFileError(sources.vocab_json, "expected a JSON object of token -> id")
    merges = _parse_merges(sources.merges_txt)
    if eos_token not in vocab:
        raise VocabularyFileError(sources.vocab_json, f"no {eos_token!r} token")
    try:
        return build_byte_level_bpe_tokenizer(vocab, merges, eos_token)
    except Exception as error:  # e.g. a merge of tokens that are not in the vocabulary
        raise VocabularyFileError(
            sources.merges_txt, f"does not fit {sources.vocab_json} ({error})"
        ) from error


def _fingerprint(tokenizer) -> str:
    """What decides ids and text: equal for the same vocabulary loaded through either path."""
    spec = json.loads(tokenizer.to_str())
    merges = [m.split(" ", 1) if isinstance(m, str) else list(m) for m in spec["model"]["merges"]]
    special = sorted(
        (index, token.content)
        for index, token in tokenizer.get_added_tokens_decoder().items()
        if token.special
    )
    canonical = {
        "vocab": sorted(tokenizer.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1]),
        "merges": merges,
        "special": special,
        "normalizer": spec.get("normalizer"),
        "pre_tokenizer": spec.get("pre_tokenizer"),
    }
    blob = json.dumps(canonical, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def _piece_bytes(tokenizer, size: int) -> np.ndarray:
    """The bytes each id stands for (empty for special tokens): decoding is a table lookup."""
    byte_of = {char: byte for byte, char in gpt2_byte_to_unicode().items()}
    special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    table = np.empty(size, dtype=object)
    for index in range(size):
        token = tokenizer.id_to_token(index)
        if index in special or token is None:
            table[index] = b""
            continue
        # Characters outside the byte alphabet stand for themselves, as in tokenizers' decoder.
        table[index] = b"".join(
            bytes([byte_of[c]]) if c in byte_of else c.encode("utf-8") for c in token
        )
    return table


def _as_tensor(value: object) -> tf.Tensor | tf.RaggedTensor:
    return value if isinstance(value, tf.RaggedTensor) else tf.convert_to_tensor(value)


# --------------------------------------------------------------------------------------------
# GPT-2: the vocabulary


class TokenizersVocabulary(seqio.Vocabulary):
    """What a seqio vocabulary run by a ``tokenizers.Tokenizer`` (``self._tokenizer``, with
    ``self._size`` ids and ``self._eos_id``) does the same way whatever its files: GPT-2's
    byte-level BPE (:class:`ByteLevelBPEVocabulary`) and a model folder's ``tokenizer.json``
    (:class:`tw_jax.data.hf_tokenizer.ModelTokenizerVocabulary`). Encoding adds no special
    token; decoding stops at the first EOS and drops ids outside ``[0, size)``; ``encode_tf``
    calls the Rust tokenizer through ``tf.numpy_function`` (see :class:`ByteLevelBPEVocabulary`
    for what that costs); no unknown token; ``pad_id`` 0, as seqio pads."""

    _tokenizer: Any
    _size: int
    _eos_id: int

    @property
    def eos_id(self) -> int:
        return self._eos_id

    @property
    def unk_id(self) -> None:
        return None

    @property
    def pad_id(self) -> int:
        return seqio.vocabularies.PAD_ID

    @property
    def _base_vocab_size(self) -> int:
        return self._size

    def _encode(self, s: str | bytes) -> list[int]:
        if isinstance(s, bytes):
            s = s.decode("utf-8")
        return self._tokenizer.encode(s, add_special_tokens=False).ids

    def _decode(self, ids: Iterable[int]) -> str:
        kept: list[int] = []
        for index in ids:
            index = int(index)
            if index == self._eos_id:
                break
            if 0 <= index < self._size:
                kept.append(index)
        return self._tokenizer.decode(kept, skip_special_tokens=True)

    def _encode_tf(self, s: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        s = _as_tensor(s)
        if s.shape.rank is None:
            raise ValueError(f"{type(self).__name__}.encode_tf needs a statically known rank")
        if isinstance(s, tf.RaggedTensor):
            return s.with_flat_values(self._encode_tf(s.flat_values))
        if s.shape.rank == 0:
            return self._encode_tf(tf.reshape(s, [1])).values
        if s.shape.rank > 1:
            return self._encode_tf(tf.RaggedTensor.from_tensor(s))
        values, row_splits = tf.numpy_function(
            self._encode_batch, [s], [tf.int32, tf.int64], stateful=False, name="bpe_encode"
        )
        values.set_shape([None])
        row_splits.set_shape([None if s.shape[0] is None else s.shape[0] + 1])
        return tf.RaggedTensor.from_row_splits(values, row_splits, validate=False)

    def _encode_batch(self, strings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """numpy_function body: UTF-8 byte strings -> (concatenated ids, row splits)."""
        texts = []
        for raw in strings.tolist():
            try:
                texts.append(raw.decode("utf-8"))
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{type(self).__name__}: input is not valid UTF-8 ({error}): {raw[:80]!r}"
                ) from error
        encodings = self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        lengths = [len(e.ids) for e in encodings]
        values = np.fromiter(
            (i for e in encodings for i in e.ids), dtype=np.int32, count=sum(lengths)
        )
        row_splits = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=row_splits[1:])
        return values, row_splits

    @property
    def tokenizer(self):
        """The underlying ``tokenizers.Tokenizer`` (for inspection; encode through this class)."""
        return self._tokenizer

    def tokens(self, ids: Sequence[int]) -> list[str | None]:
        """The token strings of ``ids`` (GPT-2's ``Ġ`` stands for a space), for debugging."""
        return [self._tokenizer.id_to_token(int(i)) for i in ids]


class ByteLevelBPEVocabulary(TokenizersVocabulary):
    """GPT-2's byte-level BPE as a seqio vocabulary, exact in both directions.

    Encoding is id-for-id what Hugging Face ``tokenizers`` gives for the same files (it runs
    that library), and ``decode(encode(s)) == s`` for any Unicode text: every byte has a token,
    so there is no unknown token (``unk_id`` is None) and no normalisation.

    In tf.data graphs, ``encode_tf`` calls the Rust tokenizer through ``tf.numpy_function``:
    TensorFlow has no byte-level BPE op (tf_text offers SentencePiece and WordPiece, and GPT-2's
    pre-tokenizer needs the regex look-ahead ``\\s+(?!\\S)``, which TF's RE2 lacks), so a pure-TF
    encoder would have to re-implement BPE merging in graph ops. The price: such a graph runs
    only in this Python process (no SavedModel export, no tf.data service workers). It keeps
    static shape information (int32, one ragged token axis added to the input's shape, as
    seqio's SentencePiece vocabulary gives) and accepts scalars, batches of any rank and ragged
    batches. ``decode_tf`` is pure TF: a gather from a table of each id's bytes, joined per
    row, with invalid UTF-8 replaced by U+FFFD exactly as ``tokenizers`` does.

    Special ids. ``eos_id`` is ``<|endoftext|>`` (50256 in GPT-2's vocabulary; in a tiny trained
    one, whatever id it got). A literal ``<|endoftext|>`` in the text encodes to ``eos_id`` (as
    with Hugging Face's tokenizer), and decoding stops at the first ``eos_id``: the only text
    that does not round-trip. ``bos_id`` is None: GPT-2 text tasks add no BOS.

    Padding. GPT-2 has no pad token, and id 0 is the ordinary token ``!``. ``pad_id`` is still 0
    because seqio pads with literal zeros (``trim_and_pad_dataset``, packing) and reads 0 as
    padding everywhere (``feature_converters.non_padding_position``): reporting another id would
    describe arrays seqio never makes. What that means for GPT-2 ids in seqio:

    - ``decoder_loss_weights`` from seqio's converters are 0 on every ``!`` token, not only on
      the padded tail: take the loss mask from real lengths (the trainer uses explicit masks).
    - seqio's TF packer (``trim_and_pack_dataset``, i.e. feature converters with ``pack=True``)
      measures each example by counting its non-zero ids, so every ``!`` in an example cuts one
      token off its end and gets segment id 0. Do not use ``pack=True`` with these ids; build
      full-length examples by concatenating and splitting token streams, then ``pack=False``
      (padding then touches only the last chunk).
    - Decoding a row padded with zeros *without* an EOS reads the zeros as ``!``. Rows that end
      in EOS decode exactly, since everything from the first EOS on is dropped (seqio's
      ``decode_tf`` fills the positions after an EOS with ``pad_id``).

    Ids outside ``[0, vocab_size)`` (a model whose embedding is padded, e.g. to 50304) are
    dropped when decoding.
    """

    def __init__(self, path: str | os.PathLike[str], eos_token: str = EOS_TOKEN) -> None:
        super().__init__(extra_ids=0)
        self._path = os.fspath(path)
        self._eos_token = eos_token
        self._sources = _resolve_gpt2_files(self._path)
        self._tokenizer = _load_tokenizer(self._sources, eos_token)
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        self._size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        if sorted(vocab.values()) != list(range(self._size)):
            raise VocabularyFileError(str(self._sources), "token ids are not 0..size-1")
        missing = [c for c in gpt2_byte_to_unicode().values() if c not in vocab]
        if missing:
            # Without a token for every byte some text would silently lose bytes (no UNK).
            raise VocabularyFileError(
                str(self._sources),
                f"lacks {len(missing)} of the 256 byte tokens (e.g. {missing[0]!r}): "
                "not a byte-level BPE vocabulary",
            )
        self._eos_id = int(vocab[eos_token])
        self._table = _piece_bytes(self._tokenizer, self._size)
        self._fingerprint = _fingerprint(self._tokenizer)

    # seqio.Vocabulary's interface (the rest: TokenizersVocabulary) ---------------------------

    @property
    def bos_id(self) -> None:
        return None

    def _decode_tf(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        ids = _as_tensor(ids)
        if ids.shape.rank is None or ids.shape.rank == 0:
            raise ValueError("ByteLevelBPEVocabulary.decode_tf needs ids of known rank >= 1")
        if isinstance(ids, tf.RaggedTensor):
            if ids.flat_values.shape.rank > 1:
                return ids.with_flat_values(self._decode_tf(ids.flat_values))
            if ids.ragged_rank > 1:
                return ids.with_values(self._decode_tf(ids.values))
            return self._decode_rows(ids.values, ids.row_splits)
        if ids.shape.rank > 1:
            return self._decode_tf(tf.RaggedTensor.from_tensor(ids))
        return tf.reshape(self._decode_tf(tf.expand_dims(ids, 0)), [])

    def _decode_rows(self, values: tf.Tensor, row_splits: tf.Tensor) -> tf.Tensor:
        """One string per row: bytes of the ids before the row's first EOS, lossy UTF-8."""
        values = tf.cast(values, tf.int64)
        row_splits = tf.cast(row_splits, tf.int64)
        rows = tf.shape(row_splits, out_type=tf.int64)[0] - 1
        row_ids = tf.ragged.row_splits_to_segment_ids(row_splits)
        position = tf.range(tf.size(values, out_type=tf.int64)) - tf.gather(row_splits, row_ids)
        first_eos = tf.math.unsorted_segment_min(
            tf.where(tf.equal(values, self._eos_id), position, tf.int64.max), row_ids, rows
        )
        keep = (position < tf.gather(first_eos, row_ids)) & (values >= 0) & (values < self._size)
        table = tf.constant(self._table.tolist(), tf.string)
        pieces = tf.gather(table, tf.boolean_mask(values, keep))
        joined = tf.strings.unsorted_segment_join(pieces, tf.boolean_mask(row_ids, keep), rows)
        return tf.strings.unicode_transcode(
            joined,
            input_encoding="UTF-8",
            output_encoding="UTF-8",
            errors="replace",
            replacement_char=0xFFFD,
            replace_control_characters=False,
        )

    # Identity and introspection -------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ByteLevelBPEVocabulary):
            return False
        return (self._fingerprint, self._eos_token) == (other._fingerprint, other._eos_token)

    def __hash__(self) -> int:
        return hash((self._fingerprint, self._eos_token))

    def __str__(self) -> str:
        return (
            f"ByteLevelBPEVocabulary(files={self._sources}, vocab_size={self._size}, "
            f"eos_id={self._eos_id}, sha256={self._fingerprint[:12]})"
        )

    @property
    def path(self) -> str:
        return self._path

    @property
    def eos_token(self) -> str:
        return self._eos_token

    def id_to_token(self, index: int) -> str | None:
        return self._tokenizer.id_to_token(int(index))


def gpt2_vocabulary(path: str | os.PathLike[str]) -> ByteLevelBPEVocabulary:
    """GPT-2's vocabulary from a folder or file: tokenizer.json, or vocab.json + merges.txt."""
    return ByteLevelBPEVocabulary(path)


# --------------------------------------------------------------------------------------------
# BART


BART_SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>")
BART_MASK_TOKEN = "<mask>"


class BartVocabulary(ByteLevelBPEVocabulary):
    """BART's byte-level BPE (GPT-2's merges, RoBERTa's ids): ``</s>`` is EOS, ``<s>`` BOS.

    Encoding is id-for-id Hugging Face's ``BartTokenizer`` without the ``<s> … </s>`` frame (the
    model family adds it): ``<s>``, ``<pad>``, ``</s>``, ``<unk>`` and ``<mask>`` are special
    tokens of the text, and ``<mask>`` takes the space before it (``lstrip``, as BART's tokenizer
    declares it), because BART masks whole words with their leading space. Decoding drops the
    special tokens and stops at EOS. ``pad_id`` stays 0 (``<s>``) for the reason given in
    :class:`ByteLevelBPEVocabulary`: seqio pads with literal zeros; models read explicit masks.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from tokenizers import AddedToken

        super().__init__(path, eos_token="</s>")
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        if BART_MASK_TOKEN not in vocab or "<s>" not in vocab:
            raise VocabularyFileError(str(self._sources), f"no {BART_MASK_TOKEN!r} or '<s>' "
                                      "token: not a BART vocabulary")
        self._tokenizer.add_special_tokens(
            [AddedToken(t, special=True, normalized=False) for t in BART_SPECIAL_TOKENS
             if t in vocab]
            + [AddedToken(BART_MASK_TOKEN, special=True, normalized=False, lstrip=True)])
        if self._tokenizer.get_vocab_size(with_added_tokens=True) != self._size:
            raise VocabularyFileError(str(self._sources), "special tokens changed the size")
        self._bos_id = int(vocab["<s>"])
        self._mask_id = int(vocab[BART_MASK_TOKEN])
        self._table = _piece_bytes(self._tokenizer, self._size)
        self._fingerprint = _fingerprint(self._tokenizer)

    @property
    def bos_id(self) -> int:  # type: ignore[override]
        return self._bos_id

    @property
    def mask_id(self) -> int:
        return self._mask_id


def bart_vocabulary(path: str | os.PathLike[str]) -> BartVocabulary:
    """BART's vocabulary from a folder or file: tokenizer.json, or vocab.json + merges.txt."""
    return BartVocabulary(path)
