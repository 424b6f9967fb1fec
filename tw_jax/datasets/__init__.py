"""TFDS builders of the benchmarks (``tfds build --imports tw_jax.datasets NAME/CONFIG``).

Importing the package registers the builders with TFDS; reading a prepared dataset
(``tfds.load``, ``seqio.TfdsDataSource``) needs only its files. ``temporal_wiki``, ``ckl_lama``,
``ecbd``, ``evolvingqa``: the modules of those names; how to build, load and version them:
docs/tfds.md.
"""

from __future__ import annotations

from tw_jax.datasets.ckl_lama import CklLama, CklLamaConfig
from tw_jax.datasets.ecbd import Ecbd, EcbdConfig
from tw_jax.datasets.evolvingqa import Evolvingqa, EvolvingqaConfig
from tw_jax.datasets.temporal_wiki import TemporalWiki, TemporalWikiConfig

__all__ = ["CklLama", "CklLamaConfig", "Ecbd", "EcbdConfig", "Evolvingqa", "EvolvingqaConfig",
           "TemporalWiki", "TemporalWikiConfig"]
