"""The tasks' vocabularies, loaded on first use.

Tasks are registered when ``tw_jax.tasks`` is imported, often before any vocabulary exists (a
fresh data folder, a machine that only evaluates T5). So the output features hold a
:class:`LazyVocabulary` that knows where its files should be and builds the real vocabulary
(``tw_jax.data.vocabularies``) the first time it is used; a missing file is then a
:class:`VocabularyNotFoundError` naming the path and the environment variable that sets it.

Paths: ``TW_JAX_T5_VOCAB`` (a SentencePiece ``.model`` file or a folder with ``spiece.model``)
and ``TW_JAX_GPT2_VOCAB`` (a folder with ``tokenizer.json`` or ``vocab.json`` + ``merges.txt``),
defaulting to ``DATA_DIR/vocab/t5/spiece.model`` and ``DATA_DIR/vocab/gpt2/`` (where
``tw-jax demo`` writes tiny ones).

Named tokenizers (kind ``model``): a Hugging Face model folder's own ``tokenizer.json``
(:mod:`tw_jax.data.hf_tokenizer`), under a name its tasks carry (objective ``lm_<name>``,
:mod:`tw_jax.tasks.names`). They are found in ``DATA_DIR/vocab/<name>/`` (any folder there with
a ``tokenizer.json``), in ``$TW_JAX_TOKENIZERS`` (``name=folder[,name=folder…]``), in
``register_all(tokenizers={name: folder})`` and through :func:`tw_jax.tasks.register_tokenizer`
(what a run from a model folder calls).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import seqio
import tensorflow as tf

from tw_jax.data.hf_tokenizer import model_tokenizer
from tw_jax.data.model_folder import TOKENIZER_JSON, has_tokenizer
from tw_jax.data.vocabularies import gpt2_vocabulary, t5_vocabulary
from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.tasks import names
from tw_jax.tasks.layout import GPT2_VOCAB_ENV, T5_VOCAB_ENV, join

TOKENIZERS_ENV = "TW_JAX_TOKENIZERS"

T5_EXTRA_IDS = 100


class VocabularyNotFoundError(FileNotFoundError, UsageError):
    """A task needed a vocabulary whose files are not where the configuration says (a
    :class:`UsageError`: the CLI prints it as one line)."""


def _load_t5(path: str) -> seqio.Vocabulary:
    return t5_vocabulary(path, extra_ids=T5_EXTRA_IDS)


def _load_gpt2(path: str) -> seqio.Vocabulary:
    return gpt2_vocabulary(path)


# kind -> (how to set the path, loader, what the path should be)
_KINDS: dict[str, tuple[str, Callable[[str], seqio.Vocabulary], str]] = {
    "t5": (f"set {T5_VOCAB_ENV} or pass t5_vocab to tw_jax.tasks.register_all", _load_t5,
           "a SentencePiece .model file or a folder with spiece.model"),
    "gpt2": (
        f"set {GPT2_VOCAB_ENV} or pass gpt2_vocab to tw_jax.tasks.register_all",
        _load_gpt2,
        "a folder with tokenizer.json or vocab.json + merges.txt",
    ),
    "model": (f"name its folder in {TOKENIZERS_ENV}=name=FOLDER or tw_jax.tasks."
              "register_all(tokenizers=...)", model_tokenizer,
              f"a model folder with {TOKENIZER_JSON}"),
}


class LazyVocabulary(seqio.Vocabulary):
    """A ``seqio.Vocabulary`` that loads the real one (T5, GPT-2 or a model folder's) when first
    used.

    Two lazy vocabularies are equal when they are of the same kind and path, so mixtures of
    tasks registered from one data folder pass seqio's vocabulary check without loading.
    """

    def __init__(self, kind: str, path: str) -> None:
        if kind not in _KINDS:
            raise ValueError(f"unknown vocabulary kind {kind!r}; expected one of {sorted(_KINDS)}")
        self.kind = kind
        self.path = os.fspath(path)
        self._loaded: seqio.Vocabulary | None = None
        super().__init__(extra_ids=0)

    # --- loading --------------------------------------------------------------------------

    @property
    def vocabulary(self) -> seqio.Vocabulary:
        """The real vocabulary (loaded now if needed)."""
        if self._loaded is None:
            how, load, what = _KINDS[self.kind]
            try:
                self._loaded = load(self.path)
            except FileNotFoundError as error:
                raise VocabularyNotFoundError(
                    f"{self.kind} vocabulary: {error} (expected {what}); {how}"
                ) from error
        return self._loaded

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_loaded"] = None  # gin deep-copies configurables' arguments
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __getattr__(self, name: str) -> Any:
        # Model-specific attributes (``tokenizer``, ``sp_model`` …) of the real vocabulary.
        if name.startswith("_") or name in ("kind", "path"):
            raise AttributeError(name)
        return getattr(self.vocabulary, name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyVocabulary):
            return (self.kind, self.path) == (other.kind, other.path)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.kind, self.path))

    def __repr__(self) -> str:
        return f"LazyVocabulary(kind={self.kind!r}, path={self.path!r})"

    # --- seqio.Vocabulary, delegated ------------------------------------------------------

    @property
    def eos_id(self) -> int | None:
        return self.vocabulary.eos_id

    @property
    def unk_id(self) -> int | None:
        return self.vocabulary.unk_id

    @property
    def pad_id(self) -> int:
        return self.vocabulary.pad_id

    @property
    def bos_id(self) -> int | None:
        return self.vocabulary.bos_id

    @property
    def extra_ids(self) -> int:
        return self.vocabulary.extra_ids

    @property
    def vocab_size(self) -> int:
        return self.vocabulary.vocab_size

    @property
    def _base_vocab_size(self) -> int:
        return self.vocabulary._base_vocab_size

    def encode(self, s: Any) -> Any:
        return self.vocabulary.encode(s)

    def decode(self, ids: Any) -> Any:
        return self.vocabulary.decode(ids)

    def encode_tf(self, s: tf.Tensor) -> tf.Tensor:
        return self.vocabulary.encode_tf(s)

    def decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
        return self.vocabulary.decode_tf(ids)

    def _encode(self, s: str) -> Any:
        return self.vocabulary._encode(s)

    def _decode(self, ids: Any) -> Any:
        return self.vocabulary._decode(ids)

    def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
        return self.vocabulary._encode_tf(s)

    def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
        return self.vocabulary._decode_tf(ids)


def t5_path(data_dir: str | None, override: str | None = None) -> str:
    """Argument, else ``$TW_JAX_T5_VOCAB``, else ``DATA_DIR/vocab/t5/spiece.model``."""
    path = override or os.environ.get(T5_VOCAB_ENV)
    if path:
        return os.fspath(path)
    return join(data_dir or ".", "vocab", "t5", "spiece.model")


def gpt2_path(data_dir: str | None, override: str | None = None) -> str:
    """Argument, else ``$TW_JAX_GPT2_VOCAB``, else ``DATA_DIR/vocab/gpt2``."""
    path = override or os.environ.get(GPT2_VOCAB_ENV)
    if path:
        return os.fspath(path)
    return join(data_dir or ".", "vocab", "gpt2")


def tokenizer_folders(data_dir: str | None,
                      given: Mapping[str, str] | None = None) -> dict[str, str]:
    """Named tokenizers (name -> folder), later sources winning: ``DATA_DIR/vocab/<name>/``
    folders with a ``tokenizer.json``, ``$TW_JAX_TOKENIZERS``, ``given``."""
    found: dict[str, str] = {}
    vocab = join(data_dir, "vocab") if data_dir else None
    if vocab and paths.isdir(vocab):
        for entry in sorted(paths.listdir(vocab)):
            folder = join(vocab, entry)
            if entry not in ("t5", "gpt2") and has_tokenizer(folder):
                found[names.tokenizer_name(entry)] = folder
    listed = os.environ.get(TOKENIZERS_ENV, "")
    for item in filter(None, (part.strip() for part in listed.split(","))):
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            raise UsageError(f"${TOKENIZERS_ENV}: {item!r} is not name=FOLDER")
        found[name.strip()] = folder.strip()
    found.update(given or {})
    for name in found:
        names.lm_objective(name)  # a name task names can carry, else a ValueError naming it
    return found


def causal_vocabularies(gpt2: seqio.Vocabulary,
                        tokenizers: Mapping[str, str]) -> dict[str, seqio.Vocabulary]:
    """objective -> vocabulary of every causal-LM task set: ``lm`` (GPT-2's) and
    ``lm_<name>`` per named tokenizer."""
    found = {names.LM: gpt2}
    for name, folder in tokenizers.items():
        found[names.lm_objective(name)] = LazyVocabulary("model", folder)
    return found


def load_vocabularies(
    dataset: tf.data.Dataset, output_features: Mapping[str, seqio.Feature]
) -> tf.data.Dataset:
    """A task's first preprocessor: loads its lazy vocabularies while the pipeline is built, so a
    missing file raises :class:`VocabularyNotFoundError` itself, not wrapped in a tf.data
    tracing error."""
    for feature in output_features.values():
        if isinstance(feature.vocabulary, LazyVocabulary):
            _ = feature.vocabulary.vocabulary
    return dataset
