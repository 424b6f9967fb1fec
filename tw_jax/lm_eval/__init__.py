"""tw_jax and lm-evaluation-harness: the probes as lm-eval tasks, and tw_jax models in lm-eval.

- :mod:`tw_jax.lm_eval.export` writes every period's probes as lm-eval task configs
  (``tw-jax lm-eval-tasks``), so any model lm-eval runs (``hf``, ``vllm``, an API) scores
  the months tw_jax built, and (:mod:`~tw_jax.lm_eval.siblings`) the CKL LAMA sets, ECBD spans
  and EvolvingQA questions the data folder holds;
- :mod:`tw_jax.lm_eval.model` is an lm-eval ``LM`` (``--model tw_jax``) over a tw_jax run or
  a Hugging Face folder loaded by tw_jax, scored the way ``tw-jax eval`` scores probes
  (``tw-jax lm-eval``: lm-eval's own command line with that model registered).

lm-eval (the ``lm-eval`` extra) is imported only by :mod:`~tw_jax.lm_eval.model` and
:mod:`~tw_jax.lm_eval.cli`, when they run: importing tw_jax or exporting tasks needs no lm-eval.
See ``docs/lm_eval.md``.
"""
