"""What a Hugging Face model folder is, by its files: the one place that says so, light enough
for every layer (no TensorFlow, no JAX) to ask before it loads anything.

A model folder has a ``config.json`` (``save_pretrained``'s, read by
:func:`tw_jax.models.hf_io.read_config`); one that brings its own tokenizer has a
``tokenizer.json`` too (:mod:`tw_jax.data.hf_tokenizer`)."""

from __future__ import annotations

from tw_jax.io import paths
from tw_jax.io.paths import PathLike

CONFIG_JSON = "config.json"
TOKENIZER_JSON = "tokenizer.json"


def is_model_folder(path: PathLike | None) -> bool:
    """Whether ``path`` is a Hugging Face model folder (it has a ``config.json``)."""
    return bool(path) and paths.isfile(paths.join(path, CONFIG_JSON))


def has_tokenizer(path: PathLike | None) -> bool:
    """Whether ``path`` holds a ``tokenizer.json``: a model folder that brings its tokenizer."""
    return bool(path) and paths.isfile(paths.join(path, TOKENIZER_JSON))
