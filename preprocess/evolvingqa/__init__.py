"""EvolvingQA (Kim et al., 2023): Changed sets, QA-generation inputs and QA generation.

- :mod:`.layout` — the folder layout of ``tw-jax evolvingqa`` (a TemporalWiki data folder plus
  ``evolvingqa/`` and ``qa/``).
- :mod:`.extract` — ``build``: the DiffSet stage with ``--min-changed-chars 500`` (the Changed
  set), the SSM stage on it, and the extraction of Unchanged passages, New passages and Edited
  pairs (:mod:`.passages`, :mod:`.unchanged`) with their entities (:mod:`.entities`).
- :mod:`.prompts`, :mod:`.client`, :mod:`.filters`, :mod:`.generate` — ``generate`` with an
  OpenAI-compatible chat endpoint: the paper's prompts (Appendix A.2) and filters.
- :mod:`.offline` — ``generate`` without an LLM: questions from the Wikidata probes' UNCHANGED,
  NEW and UPDATED facts through relation question templates.
- :mod:`.qa_csv` — writing the QA sets in the released CSV format.
"""
