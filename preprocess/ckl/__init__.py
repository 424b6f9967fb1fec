"""CKL (Jang et al., 2022): its released files and InvariantLAMA-style probes of our own.

- :mod:`~tw_jax.preprocess.ckl.release` — readers of the released formats: ``invariantLAMA.csv``
  (``id,input,output``), ``updatedLAMA.csv`` (``unique_id,statement,new_answer``),
  ``newLAMA*.csv`` (``unique_id,statement,answer``), the answer JSON files and the
  CC-RecentNews SSM CSVs (``input,output,original``). Bad input is a
  :class:`~tw_jax.errors.DumpError` naming the file and the line (or id).
- :mod:`~tw_jax.preprocess.ckl.lama` — ``tw-jax ckl build-lama``: facts of the 28
  time-invariant relations of CKL Table 4 from one Wikidata dump, through the probes stage's
  rendering and quality rules, written in the released InvariantLAMA format.
- :mod:`~tw_jax.preprocess.ckl.phases` — ``tw-jax ckl phases``: a CKL release laid out as a
  data folder of pseudo month pairs, which the lifelong runner trains and evaluates phase by
  phase (CKL §5.2, Small-P1 → Small-P2).

The readers and the builder import neither TensorFlow nor JAX (the phases layout reads files
through :mod:`tw_jax.tasks.ckl`, which does).
"""
