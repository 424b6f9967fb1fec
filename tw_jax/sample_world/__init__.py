"""A seeded synthetic world that changes month by month, rendered as real dump formats.

It is both the embedded sample that ``tw-jax demo`` runs on and the oracle the tests check the
pipelines against: the generator knows which sentences changed and which facts moved.
"""
