"""TFDS builders of the benchmarks (``tfds build --imports tw_jax.datasets NAME/CONFIG``).

Importing the package registers the builders with TFDS; reading a prepared dataset
(``tfds.load``, ``seqio.TfdsDataSource``) needs only its files. ``temporal_wiki``:
:mod:`tw_jax.datasets.temporal_wiki`; ``ckl_lama``: :mod:`tw_jax.datasets.ckl_lama`; how to build, load and version them: docs/tfds.md.
"""

from __future__ import annotations

from tw_jax.datasets.ckl_lama import CklLama, CklLamaConfig
from tw_jax.datasets.temporal_wiki import TemporalWiki, TemporalWikiConfig

__all__ = ["CklLama", "CklLamaConfig", "TemporalWiki", "TemporalWikiConfig"]
