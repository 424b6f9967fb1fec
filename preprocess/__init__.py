"""Dump readers and corpus builders (installed as ``tw_jax.preprocess``).

Every reader streams; every record is emitted or skipped with a reason that the stage counts.
What the benchmarks share is grouped by job -- ``dumps`` (readers of dumps and released files),
``plaintext`` (wikitext to paragraphs and sentences), ``facts`` (Wikidata facts in words),
``runners`` (options, process pools, accounting) -- and each benchmark's stages have a package
of their own (``diffset``, ``probes``, ``ssm``, ``ckl``, ``ecbd``, ``evolvingqa``).
"""
