"""The one interface every retriever implements, and the registry that finds one by name.

EvolvingQA compares its continual-learning methods with DPR: passages are retrieved for each
question and handed to the reader (open-book QA). Retrieval here is two steps that any method
shares: :meth:`Retriever.build` indexes a list of :class:`Passage` (one month's snapshot, see
:mod:`tw_jax.retrieval.index`) and :meth:`Retriever.search` answers questions with
*positions* in that list, so the caller, not the retriever, owns the passages and their ids.
A retriever stores its index with :meth:`Retriever.save` in a folder that may be local or
``gs://`` (through :mod:`tw_jax.io.paths`), and :meth:`Retriever.fingerprint` names the settings
that change the index, so a stored index is rebuilt exactly when those (or the passages) change.

Retrievers register under their ``name``; :func:`retriever_class` finds them, importing the
module of a known name on first use (``bm25`` → :mod:`.bm25`, ``dpr`` → :mod:`.dense`), so asking
for BM25 never imports a neural encoder, and a missing dense module is one line, not a
traceback. Constructors take keyword settings only; ``tw-jax evolvingqa retrieve`` builds
``bm25`` as ``cls()`` and ``dpr`` as ``cls(question_encoder=DIR, ctx_encoder=DIR)``.
"""

from __future__ import annotations

import abc
import hashlib
import importlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from tw_jax.errors import DumpError, UsageError
from tw_jax.io import paths

# Modules that define the retrievers known by name, imported on first use (see the docstring).
_MODULES = {
    "bm25": "tw_jax.retrieval.bm25",
    "dpr": "tw_jax.retrieval.dense",
}
_UNAVAILABLE = {"dpr": "dense retrieval is not available yet"}
_REGISTRY: dict[str, type[Retriever]] = {}


@dataclass(frozen=True)
class Passage:
    id: str  # stable id (e.g. "<title>#<n>" or the passages file's id)
    title: str
    text: str


class Retriever(abc.ABC):
    """Indexes passages and returns, per question, the best ``k`` as (position, score)."""

    name: ClassVar[str]  # "bm25", "dpr"

    @abc.abstractmethod
    def build(self, passages: Sequence[Passage]) -> None:
        """Index these passages (replacing any index held)."""

    @abc.abstractmethod
    def search(self, questions: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """Per question: (passage position in the indexed list, score), best first, len <= k."""

    @abc.abstractmethod
    def save(self, folder: str) -> None:
        """Writes the index (and the settings :meth:`load` needs) into ``folder``: local or
        ``gs://`` (:mod:`tw_jax.io.paths`)."""

    @classmethod
    @abc.abstractmethod
    def load(cls, folder: str) -> Retriever:
        """The retriever :meth:`save` wrote into ``folder``, ready to :meth:`search`."""

    @property
    def num_passages(self) -> int | None:
        """How many passages the index holds (checked against ``passages.jsonl`` when a stored
        index is reused; None: this retriever does not say)."""
        return None

    def settings(self) -> dict[str, Any]:
        """The settings that change the index, as JSON values (what :meth:`fingerprint` hashes).
        A retriever whose index depends on files (an encoder's weights) overrides
        :meth:`fingerprint` or names those files' hashes here."""
        return {}

    def fingerprint(self) -> str:
        """Settings that change the index (for rebuild checks): a hash of the name and
        :meth:`settings`."""
        text = json.dumps({"retriever": self.name, "settings": self.settings()},
                          sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


R = TypeVar("R", bound=type[Retriever])


def register_retriever(cls: R) -> R:
    """Class decorator: makes ``cls`` findable as ``retriever_class(cls.name)``."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} needs a class attribute `name` (e.g. 'bm25')")
    known = _REGISTRY.get(name)
    if known is not None and known is not cls:
        raise ValueError(f"retriever name {name!r} is taken by {known.__module__}."
                         f"{known.__qualname__}")
    _REGISTRY[name] = cls
    return cls


def known_retrievers() -> list[str]:
    """Every name :func:`retriever_class` may answer, registered or importable on use."""
    return sorted({*_REGISTRY, *_MODULES})


def retriever_class(name: str) -> type[Retriever]:
    """The class registered as ``name``; a :class:`UsageError` lists the known names, or says
    that the module of a known name is not there."""
    if name not in _REGISTRY and name in _MODULES:
        module = _MODULES[name]
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:  # the module is there; something it imports is not
                raise
            reason = _UNAVAILABLE.get(name, "its module is missing")
            raise UsageError(f"retriever {name!r}: {reason} ({module} is not installed)") from None
    if name not in _REGISTRY:
        raise UsageError(f"unknown retriever {name!r}; known: {', '.join(known_retrievers())}")
    return _REGISTRY[name]


def read_index_settings(folder: str, settings_file: str, index_format: int, kind: str
                        ) -> dict[str, Any]:
    """The settings JSON a retriever's ``save`` wrote in ``folder``, checked for its format: a
    missing, unreadable or foreign file is a :class:`DumpError` naming it."""
    path = paths.join(folder, settings_file)
    if not paths.exists(path):
        raise DumpError(path, None, f"no {kind} index here (its settings file is missing)")
    try:
        meta = json.loads(paths.read_text(path))
    except json.JSONDecodeError as error:
        raise DumpError(path, f"line {error.lineno}", f"not JSON ({error.msg})") from None
    if not isinstance(meta, dict) or meta.get("format") != index_format:
        raise DumpError(path, None, f"not a {kind} index of format {index_format}")
    return meta
