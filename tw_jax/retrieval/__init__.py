"""Passage retrieval for EvolvingQA's open-book baseline (DPR in the paper), and its metric.

- :mod:`~tw_jax.retrieval.base` — :class:`Passage`, the :class:`Retriever` interface
  and the registry (:func:`register_retriever`, :func:`retriever_class`).
- :mod:`~tw_jax.retrieval.bm25` — BM25 with ``bm25s`` (``bm25``).
- :mod:`~tw_jax.retrieval.dense` — DPR (``dpr``) on the BERT encoders of
  :mod:`~tw_jax.retrieval.bert`, read from and written to Hugging Face folders by
  :mod:`~tw_jax.retrieval.bert_io` (only retrieval uses BERT, so it lives here, not in
  :mod:`tw_jax.models`).
- :mod:`~tw_jax.retrieval.index` — one index per month pair, stored under the data
  folder and rebuilt only when its passages or settings change.
- :mod:`~tw_jax.retrieval.recall` — answer recall@k (DPR's top-k retrieval accuracy).
- :mod:`~tw_jax.retrieval.snapshot`, :mod:`~tw_jax.retrieval.run`,
  :mod:`~tw_jax.retrieval.options` — a snapshot's passages, a month's sets searched, the
  retriever's command-line options.

``tw-jax evolvingqa retrieve`` puts them together. Retrievers are imported on use, so importing
this package needs neither ``bm25s`` nor a neural encoder.
"""

from tw_jax.retrieval.base import (
    Passage,
    Retriever,
    known_retrievers,
    register_retriever,
    retriever_class,
)

__all__ = ["Passage", "Retriever", "known_retrievers", "register_retriever", "retriever_class"]
