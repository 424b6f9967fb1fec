"""Passage retrieval for EvolvingQA's open-book baseline (DPR in the paper), and its metric.

- :mod:`~tw_jax.evaluate.retrieval.base` — :class:`Passage`, the :class:`Retriever` interface
  and the registry (:func:`register_retriever`, :func:`retriever_class`).
- :mod:`~tw_jax.evaluate.retrieval.bm25` — BM25 with ``bm25s`` (``bm25``).
- :mod:`~tw_jax.evaluate.retrieval.index` — one index per month pair, stored under the data
  folder and rebuilt only when its passages or settings change.
- :mod:`~tw_jax.evaluate.retrieval.recall` — answer recall@k (DPR's top-k retrieval accuracy).

``tw-jax evolvingqa retrieve`` puts them together. Retrievers are imported on use, so importing
this package needs neither ``bm25s`` nor a neural encoder.
"""

from tw_jax.evaluate.retrieval.base import (
    Passage,
    Retriever,
    known_retrievers,
    register_retriever,
    retriever_class,
)

__all__ = ["Passage", "Retriever", "known_retrievers", "register_retriever", "retriever_class"]
