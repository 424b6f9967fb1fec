"""What every tw_jax TFDS builder shares: file order, its code's path, and a fingerprint of what
each prepared dataset is made from (:mod:`tw_jax.tasks.tfds_fingerprint`)."""

from __future__ import annotations

import inspect
import os
from typing import Any

import tensorflow_datasets as tfds
from etils import epath

from tw_jax.io import manifest, paths
from tw_jax.tasks import tfds_fingerprint as fingerprint


class Builder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """A builder whose examples keep their files' order (integer keys in file order), whose code
    is found without TFDS's own lookup, and whose prepared datasets record what they were made
    from: reused (``tfds build``) and read (``tfds.load``) only while it is still so."""

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

    def source_files(self, manual_dir: str) -> list[str]:
        """The files the config's examples are read from (a zip for its members), below
        ``manual_dir``: what its fingerprint hashes. Every file below ``manual_dir`` unless the
        builder names fewer."""
        return [paths.join(manual_dir, name) for name in manifest.files_below(manual_dir)]

    def download_and_prepare(self, *, download_dir: Any = None,
                             download_config: tfds.download.DownloadConfig | None = None,
                             **kwargs: Any) -> None:
        """TFDS's, but a prepared dataset is reused only when it was made from the files and
        settings of now (:func:`fingerprint.check_reuse`); ``--overwrite`` rebuilds it."""
        config = download_config or tfds.download.DownloadConfig()
        mode = config.download_mode
        if (not mode.overwrite_dataset and mode != tfds.download.GenerateMode.UPDATE_DATASET_INFO
                and self.data_path.exists()):
            fingerprint.check_reuse(self, config)
        super().download_and_prepare(download_dir=download_dir, download_config=download_config,
                                     **kwargs)

    def _download_and_prepare(self, dl_manager: tfds.download.DownloadManager,
                              download_config: tfds.download.DownloadConfig) -> Any:
        """Records the fingerprint of the sources, taken before they are read, in TFDS's
        temporary folder once the dataset is written (renamed with it)."""
        limit = download_config.max_examples_per_split
        try:
            made = fingerprint.record(self, os.fspath(dl_manager.manual_dir), limit)
        except Exception:  # noqa: BLE001 -- a missing or broken folder: the builder names it
            made = None
        self._tw_jax_preparing = True  # nothing to check while the dataset is written
        try:
            result = super()._download_and_prepare(dl_manager=dl_manager,
                                                   download_config=download_config)
        finally:
            self._tw_jax_preparing = False
        if made is None:
            made = fingerprint.record(self, os.fspath(dl_manager.manual_dir), limit)
        fingerprint.write(os.fspath(self.data_dir), made)
        return result

    def as_dataset(self, *args: Any, **kwargs: Any) -> Any:
        """TFDS's, after checking that the sources the dataset was made from, where they still
        are, have not changed since (:func:`fingerprint.check_folder`)."""
        if not getattr(self, "_tw_jax_preparing", False):
            fingerprint.check_folder(os.fspath(self.data_dir))
        return super().as_dataset(*args, **kwargs)
