"""Where a run's model finds its own tokenizer, and keeping it with the run's checkpoints.

A model read from a Hugging Face folder with a ``tokenizer.json`` names that tokenizer in its
config (``tokenizer``: ``llama_3_2_1b``; :class:`tw_jax.models.families.HFDecoderModel`), and
its tasks are ``*_lm_<name>`` (:mod:`tw_jax.tasks.names`). Those tasks exist once the name's
folder is known (:func:`tw_jax.tasks.register_tokenizer`). The folder is, in this order:

1. ``INITIAL_CHECKPOINT_PATH`` when it is the model folder itself (``tokenizer.json`` there);
2. the ``tokenizer/`` folder of a tw_jax run: ``MODEL_DIR/tokenizer/`` of this run (written by
   an earlier start) or of the run a checkpoint path belongs to (``…/checkpoints/<step>``);
3. what the data folder's registration finds by itself: ``DATA_DIR/vocab/<name>/`` or
   ``$TW_JAX_TOKENIZERS`` (:func:`tw_jax.tasks.vocab.tokenizer_folders`).

Training copies the files into ``MODEL_DIR/tokenizer/`` (:data:`TOKENIZER_DIR`), as Hugging
Face saves a tokenizer beside its weights, so ``tw-jax eval``, ``infer`` and the next update of a
lifelong run read the same tokenizer from the run alone.
"""

from __future__ import annotations

import logging
from typing import Any

from tw_jax.data.model_folder import has_tokenizer
from tw_jax.io import paths

log = logging.getLogger(__name__)

TOKENIZER_DIR = "tokenizer"
# What decides a tokenizer's ids and framing (tw_jax.data.hf_tokenizer reads these).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "generation_config.json", "config.json")


def _run_tokenizer(path: str) -> str | None:
    """``<run>/tokenizer`` of a MODEL_DIR, a checkpoints folder or a step folder in one."""
    folder = paths.resolve(path)
    for _ in range(3):  # MODEL_DIR, MODEL_DIR/checkpoints, MODEL_DIR/checkpoints/<step>
        candidate = paths.join(folder, TOKENIZER_DIR)
        if has_tokenizer(candidate):
            return candidate
        parent = paths.parent(folder)
        if parent == folder:
            break
        folder = parent
    return None


def tokenizer_folder(model_dir: str | None = None,
                     initial_checkpoint: str | None = None) -> str | None:
    """The folder of the run's model tokenizer, where this run can see one (module docstring:
    places 1 and 2), else None."""
    if has_tokenizer(initial_checkpoint):
        return initial_checkpoint
    for path in (model_dir, initial_checkpoint):
        found = _run_tokenizer(path) if path else None
        if found:
            return found
    return None


def keep_tokenizer(folder: str, model_dir: str) -> str:
    """Copies the tokenizer files of ``folder`` into ``MODEL_DIR/tokenizer/`` (unless that is
    where they are); returns that folder."""
    target = paths.join(model_dir, TOKENIZER_DIR)
    if paths.resolve(folder) == paths.resolve(target):
        return target
    paths.makedirs(target)
    for name in TOKENIZER_FILES:
        source = paths.join(folder, name)
        if paths.isfile(source):
            # write then rename: a reader never sees half a file
            paths.write_text(paths.join(target, f".{name}.tmp"), paths.read_text(source))
            paths.replace(paths.join(target, f".{name}.tmp"), paths.join(target, name))
    return target


def use_model_tokenizer(model_config: Any, *, model_dir: str | None = None,
                        initial_checkpoint: str | None = None, keep: bool = False) -> str | None:
    """Registers the tasks of ``model_config``'s own tokenizer, if it names one, from the
    folder :func:`tokenizer_folder` finds (else the data folder's registration looks for it
    itself); with ``keep``, the files go into ``MODEL_DIR/tokenizer/`` too. Returns the
    folder used, or None."""
    name = getattr(model_config, "tokenizer", None)
    if name is None:
        return None
    import tw_jax.tasks

    folder = tokenizer_folder(model_dir, initial_checkpoint)
    if folder is None:
        log.info("tokenizer %r: no model folder or run folder holds it here; looking in the data "
                 "folder's vocab/%s/ and $TW_JAX_TOKENIZERS", name, name)
        return None
    if keep and model_dir:
        folder = keep_tokenizer(folder, model_dir)
    tw_jax.tasks.register_tokenizer(name, folder)
    return folder
