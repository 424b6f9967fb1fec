"""Evaluation of monthly updates: probe perplexity, proper-noun perplexity, EM/F1, rank
classification, FUAR, reports.

- :mod:`~tw_jax.evaluate.results` — the ``results.jsonl`` schema (metric names, writer, reader).
- :mod:`~tw_jax.evaluate.mixture_eval` — per-instance probe perplexity (probe text, object,
  cloze) and EM/F1, by ``seqio.Evaluator`` on the month's probe mixtures.
- :mod:`~tw_jax.evaluate.propn` — proper-noun-token perplexity of fixed-length corpus blocks.
- :mod:`~tw_jax.evaluate.qa` — EM/F1, new and previous answers; QA protocols, free decoding.
- :mod:`~tw_jax.evaluate.rank` — rank classification by teacher-forced log-likelihood.
- :mod:`~tw_jax.evaluate.fuar` — FUAR (CKL eq. 1) and TemporalWiki's stability-plasticity averages.
- :mod:`~tw_jax.evaluate.report`, :mod:`~tw_jax.evaluate.plots`,
  :mod:`~tw_jax.evaluate.report_cli` — ``tw-jax report``: tables and figures of the papers.

Submodules are imported on use: the report needs neither JAX nor TensorFlow.
"""
