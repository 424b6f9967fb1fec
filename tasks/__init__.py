"""SeqIO tasks and mixtures of TemporalWiki (installed as ``tw_jax.tasks``).

Importing this package registers every task of ``$TW_JAX_DATA_DIR`` (when it is set); call
:func:`register_all` for another folder (gin: ``tw_jax.tasks.register_all.data_dir``) and
:func:`register_published` for the released TemporalWiki files. Calling either again replaces
what it registered before.

- Data layout and discovery: :mod:`tw_jax.tasks.layout`; every name below is built by
  :mod:`tw_jax.tasks.names` (``<P>`` a period's token such as ``0809`` or ``202412_202501``,
  ``<S>`` a snapshot's such as ``08`` or ``202412``).
- Corpus tasks (``twiki_diffset_<P>_{ssm,lm}``, ``twiki_full_<S>_{ssm,lm}``,
  ``twiki_nondiff_<P>_lm``): :mod:`tw_jax.tasks.twiki`.
- Mix-Review mixtures (``twiki_mixreview_<P>_{ssm,lm}``): :mod:`tw_jax.tasks.mixreview`.
- Replay mixtures (``twiki_replay_<P>_{ssm,lm}``: the DiffSet, every earlier DiffSet of P's chain
  and the initial snapshot at a fixed ratio, :class:`ReplaySettings`): :mod:`tw_jax.tasks.replay`.
- Probes and light-tuning (``twiki_probes_<P>_{category}``, ``twiki_lighttuning_<P>_…``):
  :mod:`tw_jax.tasks.probes`; metrics: :mod:`tw_jax.tasks.metrics`.
- The released files: :mod:`tw_jax.tasks.published`.
- The offline cache (``use_cached=True``; ``DATA/seqio_cache``): :mod:`tw_jax.tasks.cache`.
- Vocabularies (``TW_JAX_T5_VOCAB``, ``TW_JAX_GPT2_VOCAB``, loaded lazily) and the named model
  tokenizers whose causal-LM tasks are registered too (``lm_<name>``: ``DATA_DIR/vocab/<name>/``,
  ``TW_JAX_TOKENIZERS``, :func:`register_tokenizer`): :mod:`tw_jax.tasks.vocab`.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping, Sequence

import gin

from tw_jax.errors import UsageError
from tw_jax.tasks.cache import cache_dir_of, search_cache_dir
from tw_jax.tasks.layout import DATA_DIR_ENV, discover, resolve_data_dir
from tw_jax.tasks.mixreview import TEMPORALWIKI, MixReviewMixture, MixReviewSchedule
from tw_jax.tasks.published import register_release
from tw_jax.tasks.registration import Registrar, registered
from tw_jax.tasks.replay import ReplayMixture, ReplaySettings
from tw_jax.tasks.twiki import register_layout
from tw_jax.tasks.vocab import (
    LazyVocabulary,
    VocabularyNotFoundError,
    causal_vocabularies,
    gpt2_path,
    t5_path,
    tokenizer_folders,
)

__all__ = [
    "TEMPORALWIKI",
    "LazyVocabulary",
    "MixReviewMixture",
    "MixReviewSchedule",
    "ReplayMixture",
    "ReplaySettings",
    "VocabularyNotFoundError",
    "ensure_registered",
    "register_all",
    "register_published",
    "register_tokenizer",
    "registered",
    "require",
]


def _vocabularies(
    data_dir: str | None, t5_vocab: str | None, gpt2_vocab: str | None
) -> dict[str, LazyVocabulary]:
    return {
        "t5": LazyVocabulary("t5", t5_path(data_dir, t5_vocab)),
        "gpt2": LazyVocabulary("gpt2", gpt2_path(data_dir, gpt2_vocab)),
    }


_last_data_dir: list[str | None] = [None]  # what register_all read last, for require's errors
# Tokenizers named by register_tokenizer (a run from a model folder), kept across register_all.
_named_tokenizers: dict[str, str] = {}


@gin.configurable(module="tw_jax.tasks")
def register_all(
    data_dir: str | os.PathLike[str] | None = None,
    t5_vocab: str | None = None,
    gpt2_vocab: str | None = None,
    tokenizers: Mapping[str, str] | None = None,
) -> list[str]:
    """Registers the tasks and mixtures of ``data_dir`` (default ``$TW_JAX_DATA_DIR``).

    Replaces whatever an earlier call registered; with no data folder configured it only
    removes those. The folder's cache (:func:`tw_jax.tasks.cache.cache_dir_of`) becomes the
    one tw_jax folder seqio searches for cached tasks. ``tokenizers`` (name -> model folder)
    add causal-LM task sets ``*_lm_<name>`` to GPT-2's, as do ``DATA_DIR/vocab/<name>/``,
    ``$TW_JAX_TOKENIZERS`` and :func:`register_tokenizer`. Returns the registered names.
    """

    registrar = Registrar("data_dir")
    resolved = resolve_data_dir(data_dir)
    _last_data_dir[0] = resolved
    search_cache_dir(cache_dir_of(resolved) if resolved else None)
    if resolved is None:
        return []
    vocabularies = _vocabularies(resolved, t5_vocab, gpt2_vocab)
    folders = tokenizer_folders(resolved, {**_named_tokenizers, **(tokenizers or {})})
    return register_layout(registrar, discover(resolved), vocabularies,
                           causal_vocabularies(vocabularies["gpt2"], folders))


def register_tokenizer(name: str, folder: str | os.PathLike[str]) -> None:
    """Adds the causal-LM tasks of the tokenizer in model folder ``folder`` under ``name``
    (objective ``lm_<name>``: ``twiki_diffset_<P>_lm_<name>`` …) to the data folder's, now and
    at every later :func:`register_all`. A name already given to another folder whose tokenizer
    differs is a :class:`UsageError` naming both."""
    from tw_jax.tasks import names

    names.lm_objective(name)  # a valid name, else a ValueError saying how to spell one
    folder = os.fspath(folder)
    known = _named_tokenizers.get(name)
    if known is not None and known != folder and (
            LazyVocabulary("model", known).vocabulary != LazyVocabulary("model", folder).vocabulary):
        raise UsageError(f"the tokenizer name {name!r} is {known}'s, whose tokenizer differs "
                         f"from {folder}'s: give this one another name")
    _named_tokenizers[name] = folder
    register_all(_last_data_dir[0])


@gin.configurable(module="tw_jax.tasks")
def register_published(
    folder_or_zip: str | os.PathLike[str],
    t5_vocab: str | None = None,
    gpt2_vocab: str | None = None,
) -> list[str]:
    """Registers the released TemporalWiki files (:mod:`tw_jax.tasks.published`)."""

    registrar = Registrar("published")
    vocabularies = _vocabularies(resolve_data_dir(None), t5_vocab, gpt2_vocab)
    return register_release(registrar, folder_or_zip, vocabularies)


def ensure_registered(data_dir: str | os.PathLike[str], names: Sequence[str] = ()) -> None:
    """Registers ``data_dir``'s tasks unless they are the ones registered last and ``names``
    are among them: an evaluator of a month's probes must read that folder's, and a folder
    written since (``tw-jax probe-contexts``) is found."""
    import seqio

    known = {*seqio.TaskRegistry.names(), *seqio.MixtureRegistry.names()}
    if resolve_data_dir(data_dir) != _last_data_dir[0] or not set(names) <= known:
        register_all(data_dir)


class UnknownTaskError(UsageError):
    """A task or mixture name that nothing registered: says where tasks were looked for."""


def require(name: str) -> None:
    """Registers the data folder's tasks unless ``name`` is registered already (tests and tools
    may register their own); a name still missing is an :class:`UnknownTaskError` naming the
    closest registered names and the data folder (or its absence)."""
    import seqio

    def known() -> list[str]:
        return [*seqio.TaskRegistry.names(), *seqio.MixtureRegistry.names()]

    if name in known():
        return
    found = register_all()
    if name in known():
        return
    folder = _last_data_dir[0]
    where = (f"{len(found)} registered from {folder}" if folder
             else f"no data folder is set: --gin.DATA_DIR=DIR or ${DATA_DIR_ENV}")
    close = difflib.get_close_matches(name, known(), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ";"
    raise UnknownTaskError(
        f"no seqio task or mixture named {name!r} ({where}){hint} `tw-jax tasks --data DIR` "
        "lists a folder's tasks"
    )


if os.environ.get(DATA_DIR_ENV):
    register_all()
else:
    logging.getLogger(__name__).debug(
        "tw_jax.tasks: $%s is not set, so no data folder's tasks were registered at import; "
        "`tw-jax tasks --data DIR` lists a folder's", DATA_DIR_ENV,
    )
