"""What every tw_jax TFDS builder shares."""

from __future__ import annotations

import inspect
from typing import Any

import tensorflow_datasets as tfds
from etils import epath


class Builder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """A builder whose examples keep their files' order (integer keys in file order), and
    whose code is found without TFDS's own lookup."""

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> Any:
        """The builder's module file. TFDS 4.9.10's own lookup imports ``importlib_resources``,
        which it declares a dependency only below Python 3.9, so on 3.11 it fails with
        ``No module named 'importlib_resources'`` for any builder outside TFDS."""
        return epath.Path(inspect.getfile(cls))

    def ordered_info(self, features: tfds.features.FeaturesDict, homepage: str,
                     citation: str) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=features, homepage=homepage, citation=citation,
            disable_shuffling=True,  # file order: what the file-based seqio sources read
        )
