"""SeqIO's offline cache of the tasks: where it is looked for, and a one-line error when a run
asks for it and it is missing or older than the files it was built from.

Every task has a ``seqio.CacheDatasetPlaceholder`` (:func:`tw_jax.tasks.preprocessors.cache_point`),
so seqio's own Beam job caches it::

    TW_JAX_DATA_DIR=DATA python -m seqio.scripts.cache_tasks_main --module_import=tw_jax.tasks \\
        --tasks=twiki_diffset_0809_ssm --output_cache_dir=DATA/seqio_cache

The cache of a data folder is ``DATA/seqio_cache`` (or ``$TW_JAX_CACHE_DIR``): registering the
folder's tasks adds it to seqio's cache folders, so ``get_dataset(..., use_cached=True)``,
``tw-jax train --gin.USE_CACHED_TASKS=True`` and T5X's runs find it with no other flag. Only
the folder registered last is searched, so a task never reads the cache of another data
folder's task of the same name (docs/caching.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import seqio
import tensorflow as tf

from tw_jax.errors import UsageError
from tw_jax.tasks.layout import join

CACHE_DIR_ENV = "TW_JAX_CACHE_DIR"
CACHE_FOLDER = "seqio_cache"

_added: list[str] = []  # the cache folder register_all added to seqio's, replaced on each call


class TaskCacheError(UsageError):
    """A run asked for cached tasks that are not cached, or were cached from older files."""


def cache_dir_of(data_dir: str) -> str:
    """The cache folder of a data folder: ``$TW_JAX_CACHE_DIR``, else ``DATA/seqio_cache``."""
    return os.environ.get(CACHE_DIR_ENV) or join(data_dir, CACHE_FOLDER)


def search_cache_dir(cache_dir: str | None) -> None:
    """Makes ``cache_dir`` the one tw_jax folder among seqio's cache folders (folders added by
    others, e.g. T5X's ``--seqio_additional_cache_dirs``, stay)."""
    folders = [d for d in seqio.utils.get_global_cache_dirs() if d not in _added]
    _added.clear()
    if cache_dir and cache_dir not in folders:
        _added.append(cache_dir)
        folders.append(cache_dir)
    seqio.utils.set_global_cache_dirs(folders)


def build_command(names: Iterable[str], cache_dir: str | None = None, *,
                  overwrite: bool = False) -> str:
    """The command that caches ``names`` (seqio's own Beam job)."""
    out = cache_dir or (_added[0] if _added else "DATA/" + CACHE_FOLDER)
    flag = " --overwrite" if overwrite else ""
    return (f"TW_JAX_DATA_DIR=DATA python -m seqio.scripts.cache_tasks_main "
            f"--module_import=tw_jax.tasks --tasks={','.join(names)} "
            f"--output_cache_dir={out}{flag}")


def _tasks(name: str) -> list[seqio.Task]:
    provider = seqio.get_mixture_or_task(name)
    tasks = getattr(provider, "tasks", None)
    if tasks is None:  # a task; a MixReviewMixture names its two
        return [provider] if isinstance(provider, seqio.Task) else []
    return list(tasks)


def _mtime(path: str) -> int:
    return int(tf.io.gfile.stat(path).mtime_nsec)


def _newest_source_file(task: seqio.Task) -> tuple[int, str] | None:
    source = task.source
    if not isinstance(source, seqio.FileDataSource):
        return None  # rows read by a function: no files to date
    files = {f for split in source.splits for f in source.list_shards(split)}  # splits share
    return max(((_mtime(f), f) for f in files), default=None)


def check_cached(name: str) -> None:
    """Every task of ``name`` (a task or mixture) has a complete cache no older than its files;
    else one :class:`TaskCacheError` line with the command that (re)builds it."""
    missing, stale = [], []
    for task in _tasks(name):
        if not task.supports_caching:
            continue
        if task.cache_dir is None:
            missing.append(task.name)
            continue
        newest = _newest_source_file(task)
        if newest and newest[0] > _mtime(os.path.join(task.cache_dir, "COMPLETED")):
            stale.append((task.name, newest[1]))
    searched = ", ".join(seqio.utils.get_global_cache_dirs()) or "no cache folder"
    if missing:
        raise TaskCacheError(
            f"USE_CACHED_TASKS: {', '.join(missing)} not cached (searched {searched}); "
            f"build the cache with `{build_command(missing)}`"
        )
    if stale:
        names = [task for task, _ in stale]
        raise TaskCacheError(
            f"USE_CACHED_TASKS: the cache of {', '.join(names)} is older than {stale[0][1]}; "
            f"rebuild it with `{build_command(names, overwrite=True)}`"
        )
