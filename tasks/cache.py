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

A cache is read only whole. Under its ``COMPLETED`` marker the job writes, per split,
``info.<split>.json`` (``num_shards``) and ``stats.<split>.json`` (``examples``): every shard
``<split>.tfrecord-0000k-of-N`` must be there and hold, together, the examples recorded (counted
from the records' headers, once per process for the same files and sizes), else one line names
the shard and the command that rebuilds the cache, instead of a smaller dataset or TensorFlow's
``DataLossError`` in the middle of a run.

A cache is reused only for what it was made from. Every cache built by seqio's job in a process
that imports ``tw_jax.tasks`` (``--module_import=tw_jax.tasks``, which ``tw-jax cache`` passes)
records ``<task folder>/tw_jax_fingerprint.json``: the size and SHA-256 of every source file
(TFRecord shards, probe CSVs, the files a function source reads), the fingerprint of each output
feature's vocabulary, and the task's settings (its name, the names of the steps before the cache
point, each output feature's ``add_eos``, dtype and rank). :func:`check_cached` compares it with
the files and vocabularies of now, whatever their modification times (``cp -p``, ``tar``,
``rsync -a`` keep old ones), and refuses a difference in one line naming the file, vocabulary or
setting and the command that rebuilds the cache. A cache without one (built before, or by the job
without ``tw_jax.tasks``) keeps the modification-time check, with one warning that its content
is not checked. Files are hashed once per process (:func:`tw_jax.io.manifest.digest_once`).
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import seqio
import tensorflow as tf

from tw_jax.errors import UsageError
from tw_jax.io import atomic, manifest, paths
from tw_jax.io.tfrecord import count_records, shard_name
from tw_jax.tasks.layout import join

CACHE_DIR_ENV = "TW_JAX_CACHE_DIR"
CACHE_FOLDER = "seqio_cache"
FINGERPRINT = "tw_jax_fingerprint.json"
FINGERPRINT_FORMAT = 1
CACHE_JOB = "seqio.scripts.cache_tasks_main"

log = logging.getLogger(__name__)

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


def tasks_of(name: str) -> list[seqio.Task]:
    """The tasks a task or mixture reads (itself, or the mixture's members)."""
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


_counted: dict[tuple[str, ...], int] = {}  # shard set with sizes -> records, once per process


def _cached_splits(cache_dir: str) -> list[str]:
    """The splits the cache job wrote (``info.<split>.json``)."""
    names = (os.path.basename(path) for path in paths.glob(paths.join(cache_dir, "info.*.json")))
    return sorted(name[len("info."):-len(".json")] for name in names)


def _recorded(path: str, field: str, task: str) -> int:
    """The integer ``field`` of the cache job's JSON file ``path``; else one line naming it."""
    cache_dir = os.path.dirname(path)
    try:
        value = json.loads(paths.read_text(path)).get(field)
    except (OSError, ValueError, AttributeError) as error:
        raise TaskCacheError(f"{path}: unreadable ({error}): {rebuild_hint(task, cache_dir)}"
                             ) from None
    if not isinstance(value, int):
        raise TaskCacheError(f"{path}: has no {field!r} count: {rebuild_hint(task, cache_dir)}")
    return value


def rebuild_hint(task: str, cache_dir: str) -> str:
    """What to do about a damaged file in ``cache_dir``, the cache of ``task``: its command,
    into the cache folder above (seqio's task folder: the name, ``:`` as ``/``)."""
    root = cache_dir.rstrip("/")
    for _ in seqio.utils.get_task_dir_from_name(task).split(os.sep):
        root = os.path.dirname(root)
    return (f"the cache of {task} was cut or changed after it was built; rebuild it with "
            f"`{build_command([task], root, overwrite=True)}`")


def check_shards(task: str, cache_dir: str, split: str) -> None:
    """The cached ``split`` of ``task`` is whole: every shard its ``info.<split>.json`` counts,
    holding the examples its ``stats.<split>.json`` records; else a :class:`TaskCacheError`
    naming the first missing or cut shard, or the shards and both counts."""
    count = _recorded(seqio.utils.get_cached_info_path(cache_dir, split), "num_shards", task)
    prefix = seqio.utils.get_cached_tfrecord_prefix(cache_dir, split)
    shards = [str(shard_name(prefix, k, count)) for k in range(count)]
    for shard in shards:
        if not paths.exists(shard):
            raise TaskCacheError(f"{shard}: missing ({count} shards recorded): "
                                 f"{rebuild_hint(task, cache_dir)}")
    key = tuple(f"{shard}:{paths.size(shard)}" for shard in shards)
    if key not in _counted:
        try:
            _counted[key] = sum(count_records(shard) for shard in shards)
        except ValueError as error:  # "<shard>: truncated record" and the like
            shard, _, why = str(error).partition(": ")
            raise TaskCacheError(f"{shard}: {why}: {rebuild_hint(task, cache_dir)}") from None
    stats = seqio.utils.get_cached_stats_path(cache_dir, split)
    expected = _recorded(stats, "examples", task)
    if _counted[key] != expected:
        raise TaskCacheError(
            f"{prefix}-*-of-{count:05d}: {_counted[key]} examples where {stats} records "
            f"{expected}: {rebuild_hint(task, cache_dir)}")


def check_cached(name: str) -> None:
    """Every task of ``name`` (a task or mixture) has a complete cache made from its files,
    vocabularies and settings of now (:func:`changes`; a cache without a fingerprint: no older
    than its files), every shard of it whole (:func:`check_shards`); else one
    :class:`TaskCacheError` line with the command that (re)builds it."""
    missing, stale, changed, cached = [], [], [], []
    for task in tasks_of(name):
        if not task.supports_caching:
            continue
        if task.cache_dir is None:
            missing.append(task.name)
            continue
        recorded = read_fingerprint(task.cache_dir)
        if recorded is None:
            _warn_unchecked(task)
            newest = _newest_source_file(task)
            if newest and newest[0] > _mtime(os.path.join(task.cache_dir, "COMPLETED")):
                stale.append((task.name, newest[1]))
        elif found := changes(task, recorded):
            changed.append((task.name, found))
        cached.append(task)
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
    if changed:
        names = [task for task, _ in changed]
        what = "; ".join(f"{task}: {_first(found)}" for task, found in changed)
        raise TaskCacheError(
            f"USE_CACHED_TASKS: the cache of {', '.join(names)} was made from other data or "
            f"settings ({what}); rebuild it with `{build_command(names, overwrite=True)}`")
    for task in cached:
        for split in _cached_splits(task.cache_dir):
            check_shards(task.name, task.cache_dir, split)


def _first(found: list[str], shown: int = 3) -> str:
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    return ", ".join(found[:shown]) + more


_warned: set[str] = set()  # cache folders without a fingerprint, warned about once per process


def _warn_unchecked(task: seqio.Task) -> None:
    """Says once per cache folder that only modification times vouch for it."""
    if task.cache_dir in _warned:
        return
    _warned.add(task.cache_dir)
    log.warning("%s: no %s (cached before tw_jax recorded what a cache is made from, or by "
                "seqio's job without --module_import=tw_jax.tasks): its sources are checked by "
                "modification time only, not by content; `%s` rebuilds it with one",
                task.cache_dir, FINGERPRINT, build_command([task.name], overwrite=True))


# --- what a cache is made from: its fingerprint ---------------------------------------------


def fingerprint(task: seqio.Task) -> dict[str, Any]:
    """What the cache of ``task`` is made from: its settings, vocabularies and source files
    (sizes and SHA-256, relative to their common folder, so a data folder moved whole still
    matches)."""
    files = source_files(task)
    root = _common_folder(files)
    return {"format": FINGERPRINT_FORMAT, "task": task.name, "settings": settings(task),
            "vocabularies": vocabularies(task),
            "sources": {"root": root, "files": manifest.record_files(files, root)}}


def changes(task: seqio.Task, recorded: Mapping[str, Any]) -> list[str]:
    """What differs between the fingerprint ``recorded`` with the cache and ``task`` now, in
    words (settings, then vocabularies, then files: the cheap checks first); empty: the same."""
    if recorded.get("format") != FINGERPRINT_FORMAT or recorded.get("task") != task.name:
        return [f"its {FINGERPRINT} is of another format or task"]
    found = _setting_changes(recorded.get("settings") or {}, settings(task))
    found += _vocabulary_changes(task, recorded.get("vocabularies") or {})
    return found or _file_changes(task, recorded.get("sources") or {})


def read_fingerprint(cache_dir: str) -> dict[str, Any] | None:
    """The fingerprint recorded with a cache; None when it has none (an unreadable one reads
    as one of another format, so the cache is refused, not trusted by date)."""
    path = paths.join(cache_dir, FINGERPRINT)
    if not paths.exists(path):
        return None
    try:
        recorded = json.loads(paths.read_text(path))
    except (OSError, ValueError):
        return {"format": None}
    return recorded if isinstance(recorded, dict) else {"format": None}


def write_fingerprint(cache_dir: str, record: Mapping[str, Any]) -> None:
    """Records ``record`` with the cache in ``cache_dir`` (atomically)."""
    atomic.write_json(paths.join(cache_dir, FINGERPRINT), dict(record))


def settings(task: seqio.Task) -> dict[str, Any]:
    """The task's settings that decide what its cache holds: the steps before the cache point
    (by name, with their plain keyword arguments) and each output feature's framing."""
    steps = []
    for step in task.preprocessors:
        if isinstance(step, seqio.CacheDatasetPlaceholder):
            break
        steps.append(_step_name(step))
    features = {key: {"add_eos": bool(feature.add_eos), "dtype": tf.as_dtype(feature.dtype).name,
                      "rank": int(feature.rank), "required": bool(feature.required)}
                for key, feature in sorted(task.output_features.items())}
    return {"preprocessors": steps, "output_features": features}


def _step_name(step: Callable[..., Any]) -> str:
    """``module.qualname`` of a preprocessing step; a ``functools.partial`` adds its keyword
    arguments that are plain JSON values (a vocabulary is fingerprinted on its own)."""
    if isinstance(step, functools.partial):
        plain = {k: v for k, v in sorted(step.keywords.items()) if _is_plain(v)}
        return _step_name(step.func) + (json.dumps(plain, sort_keys=True) if plain else "")
    named = step if hasattr(step, "__qualname__") else type(step)
    return f"{getattr(named, '__module__', '?')}.{named.__qualname__}"


def _is_plain(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _setting_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    found = []
    if old.get("preprocessors") != new["preprocessors"]:
        found.append(f"its preprocessors {old.get('preprocessors')} are now "
                     f"{new['preprocessors']}")
    before = old.get("output_features") or {}
    for key in sorted(set(before) | set(new["output_features"])):
        was, now = before.get(key), new["output_features"].get(key)
        if was != now:
            found.append(f"output feature {key!r} {_settings_text(was)} → {_settings_text(now)}")
    return found


def _settings_text(feature: Mapping[str, Any] | None) -> str:
    if feature is None:
        return "absent"
    return " ".join(f"{k}={v}" for k, v in sorted(feature.items()))


def vocabularies(task: seqio.Task) -> dict[str, dict[str, Any]]:
    """Each output feature's vocabulary: its fingerprint, size and EOS id."""
    return {key: vocabulary_fingerprint(feature.vocabulary)
            for key, feature in sorted(task.output_features.items())}


def vocabulary_fingerprint(vocabulary: seqio.Vocabulary) -> dict[str, Any]:
    """What decides a vocabulary's ids: the fingerprint the vocabulary computes
    (``ByteLevelBPEVocabulary``, a model folder's tokenizer), the SHA-256 of a SentencePiece
    model's file (with the extra ids: seqio keeps a model it loaded per path and process, so
    its loaded bytes would not show a file replaced since), else its class and size."""
    real = getattr(vocabulary, "vocabulary", vocabulary)  # a tasks.vocab.LazyVocabulary: load it
    value = None
    for attribute in ("fingerprint", "_fingerprint"):
        found = getattr(real, attribute, None)
        value = value or (found if isinstance(found, str) else None)
    if value is None and isinstance(real, seqio.SentencePieceVocabulary):
        _, sha = manifest.digest_once(real.sentencepiece_model_file)
        value = f"{sha}+{real.extra_ids}"
    return {"sha256": value or type(real).__qualname__, "vocab_size": int(real.vocab_size),
            "eos_id": real.eos_id}


def _vocabulary_changes(task: seqio.Task, recorded: Mapping[str, Any]) -> list[str]:
    """One entry per vocabulary that changed, naming the features it serves (T5's
    ``inputs`` and ``targets`` share one)."""
    changed: dict[tuple[str, str, str], list[str]] = {}
    for key, now in vocabularies(task).items():
        was = recorded.get(key)
        if was != now:
            vocabulary = task.output_features[key].vocabulary
            where = getattr(vocabulary, "path", None) or type(vocabulary).__qualname__
            sha = str((was or {}).get("sha256", "none"))
            changed.setdefault((where, sha[:12], str(now["sha256"])[:12]), []).append(repr(key))
    return [f"the vocabulary of {', '.join(keys)} ({where}) is another one (sha256 {was} → "
            f"{now})" for (where, was, now), keys in changed.items()]


def _file_changes(task: seqio.Task, recorded: Mapping[str, Any]) -> list[str]:
    files = source_files(task)
    root = _common_folder(files)
    before = str(recorded.get("root") or root)
    prefix = root.rstrip("/") + "/"
    present = [f[len(prefix):] if f.startswith(prefix) else f for f in files]
    found = manifest.differences(root, recorded.get("files") or {}, present, since="cached")
    return [f"{paths.join(before if why == 'is missing' else root, relative)} {why}"
            for relative, why in found]


def source_files(task: seqio.Task) -> list[str]:
    """The files a task's source reads: a file source's shards, the folder of a prepared TFDS
    dataset, else the file paths a function source's loader holds (probe CSVs, published
    files: the strings of its closures that name files)."""
    source = task.source
    if isinstance(source, seqio.FileDataSource):
        return sorted({f for split in source.splits for f in source.list_shards(split)})
    if isinstance(source, seqio.TfdsDataSource):
        folder = source.tfds_dataset.builder.data_dir
        return [paths.join(folder, relative) for relative in manifest.files_below(folder)]
    found: set[str] = set()
    _held_files(getattr(source, "_load", None) or getattr(source, "_dataset_fn", None), found)
    return sorted(found)


def _held_files(value: Any, found: set[str], depth: int = 0) -> None:
    """Adds to ``found`` the file paths among ``value``'s strings, looking into functions'
    closures and defaults, partials and containers (a few levels; never into other objects)."""
    if depth > 5:
        return
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        if "/" in value or os.sep in value:
            try:
                if paths.isfile(value):
                    found.add(value)
            except (OSError, ValueError):
                pass
        return
    parts: Iterable[Any] = ()
    if isinstance(value, functools.partial):
        parts = (value.func, *value.args, *value.keywords.values())
    elif isinstance(value, types.FunctionType):
        parts = [*_cells(value), *(value.__defaults__ or ())]
    elif isinstance(value, (list, tuple, set, frozenset)):
        parts = value
    elif isinstance(value, Mapping):
        parts = value.values()
    for part in parts:
        _held_files(part, found, depth + 1)


def _cells(function: types.FunctionType) -> list[Any]:
    values = []
    for cell in function.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # a cell not yet filled
            continue
    return values


def _common_folder(files: Iterable[str]) -> str:
    """The deepest folder holding every file (``/``-separated, so ``gs://`` stays whole)."""
    folders = [f.replace(os.sep, "/").rsplit("/", 1)[0].split("/") for f in files]
    if not folders:
        return ""
    common = folders[0]
    for parts in folders[1:]:
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return "/".join(common)


# --- recording the fingerprint of the caches seqio's job builds ----------------------------


def fingerprint_new_caches(names: Iterable[str], cache_root: str,
                           since_ns: int) -> tuple[list[str], list[str]]:
    """After a cache job into ``cache_root``: records the fingerprint of each of ``names`` whose
    cache was completed since ``since_ns`` (``time.time_ns()``) and has none yet; returns
    ``(fingerprinted, unchecked)``, the latter cached earlier without one (not content-checked
    until rebuilt with ``--overwrite``)."""
    fingerprinted, unchecked = [], []
    for name in names:
        folder = paths.join(cache_root, seqio.get_task_dir_from_name(name))
        completed = paths.join(folder, "COMPLETED")
        if not paths.exists(completed):
            continue
        if paths.exists(paths.join(folder, FINGERPRINT)):
            fingerprinted.append(name)
        elif _mtime(completed) >= since_ns:
            write_fingerprint(folder, fingerprint(seqio.get_mixture_or_task(name)))
            fingerprinted.append(name)
        else:
            unchecked.append(name)
    return fingerprinted, unchecked


def _recording(run_pipeline: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """seqio's ``run_pipeline`` that also fingerprints each task it is about to cache (before
    the pipeline reads the sources) and records the fingerprint once the job has written the
    task's ``COMPLETED``, at the job's exit (the pipeline runs when ``main`` leaves its
    ``with beam.Pipeline`` block, after ``run_pipeline`` returns)."""

    @functools.wraps(run_pipeline)
    def recording(pipeline: Any, task_names: Any, cache_dir: str, *args: Any,
                  **kwargs: Any) -> list[str]:
        output_dirs = run_pipeline(pipeline, task_names, cache_dir, *args, **kwargs)
        pending = {}
        for name in seqio.TaskRegistry.names():
            folder = os.path.join(cache_dir, seqio.get_task_dir_from_name(name))
            if folder not in output_dirs:
                continue
            paths.remove(paths.join(folder, FINGERPRINT), missing_ok=True)
            try:
                pending[folder] = fingerprint(seqio.TaskRegistry.get(name))
            except Exception as error:  # noqa: BLE001 -- never fail seqio's job over it
                log.warning("%s: not fingerprinted (%s): read by modification time only",
                            folder, error)
        atexit.register(_record_completed, pending)
        return output_dirs

    recording._tw_jax_recording = True  # type: ignore[attr-defined]
    return recording


def _record_completed(pending: Mapping[str, Mapping[str, Any]]) -> None:
    for folder, record in pending.items():
        if paths.exists(paths.join(folder, "COMPLETED")):
            write_fingerprint(folder, record)


def hook_cache_job() -> None:
    """In seqio's cache job (``python -m seqio.scripts.cache_tasks_main`` or its console
    script), which imports ``tw_jax.tasks`` before it builds its pipeline: wraps its
    ``run_pipeline`` so that every cache it completes records its fingerprint. Elsewhere
    nothing happens."""
    main = sys.modules.get("__main__")
    candidates = [sys.modules.get(CACHE_JOB)]
    if getattr(getattr(main, "__spec__", None), "name", None) == CACHE_JOB:
        candidates.append(main)
    for module in candidates:
        run = getattr(module, "run_pipeline", None)
        if run is not None and not getattr(run, "_tw_jax_recording", False):
            module.run_pipeline = _recording(run)


hook_cache_job()
