"""The SSM stage on one machine: the main process reads, forked workers run spaCy.

spaCy is too slow to run inside tf.data, so salient span masking is a preprocessing stage. The
pruned pipeline (:func:`~.pipeline.load_ner_pipeline`) is loaded once in the main process before
the workers are forked, so they share its weights. The main process parses the JSON lines and
cuts them into jobs (:mod:`.reader`); each worker turns a job into encoded examples
(:func:`~.examples.process_job`); results come back in input order, so the files are the same
for any number of workers.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.progress import progress as progress_bar
from tw_jax.preprocess.runners.accounting import require_complete
from tw_jax.preprocess.runners.process_pools import fork_pool, ordered_map
from tw_jax.preprocess.ssm.examples import SsmOptions, process_job
from tw_jax.preprocess.ssm.outputs import MAX_SHARD_BYTES, SsmWriter, build_report
from tw_jax.preprocess.ssm.reader import (
    INPUTS,
    JOB_CHARS,
    Job,
    SsmOptionsError,
    input_path,
    iter_jobs,
)
from tw_jax.preprocess.ssm.stats import SsmTally
from tw_jax.text.spacy_pipeline import DEFAULT_MODEL, load_ner_pipeline

# What a worker needs, set before the pool forks (so it is inherited, never pickled).
_state: tuple[Any, frozenset[str], SsmOptions] | None = None


def _run_job(job: Job) -> tuple[int, list[bytes], SsmTally]:
    nlp, labels, options = _state
    encoded, tally = process_job(nlp, labels, job, options)
    return len(job.articles), encoded, tally


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def keep_freed_memory(trim_bytes: int = 128 << 20, mmap_bytes: int = 32 << 20) -> bool:
    """Lets glibc's malloc keep freed memory for reuse instead of handing it back to the OS.

    Each spaCy batch allocates and frees the same arrays of a few MB (the NER's token vectors and
    precomputed features). By default glibc serves them with ``mmap`` or trims them off the heap
    when freed, and the next batch faults every page in again: about a tenth of a worker's CPU
    time. With these thresholds up to ``trim_bytes`` of freed heap is kept and arrays up to
    ``mmap_bytes`` come from the heap. Worker processes forked afterwards inherit the setting.
    Returns whether it was applied (only on Linux with glibc).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_TRIM_THRESHOLD, trim_bytes)) and bool(
        mallopt(_M_MMAP_THRESHOLD, mmap_bytes)
    )


def check_inputs(diffset_dir: str | os.PathLike[str], inputs: Sequence[str]) -> list[str]:
    """The input files, each checked to exist, of a DiffSet folder checked to be complete (its
    ``stats.json``: an interrupted DiffSet run leaves shorter files); else a :class:`DumpError`."""
    if not inputs:
        raise SsmOptionsError("choose at least one input")
    require_complete(diffset_dir, "tw-jax diffset")
    found = []
    for name in inputs:
        path = input_path(diffset_dir, name)
        if not paths.exists(path):
            raise DumpError(
                path, None, "no such file; --in must be a folder written by `tw-jax diffset`"
            )
        found.append(path)
    return found


def build_ssm(
    diffset_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    inputs: Sequence[str] = INPUTS,
    options: SsmOptions | None = None,
    spacy_model: str = DEFAULT_MODEL,
    workers: int = 1,
    progress: bool | None = None,
    max_shard_bytes: int = MAX_SHARD_BYTES,
    job_chars: int = JOB_CHARS,
) -> dict[str, Any]:
    """Writes ``out_dir/{input}.tfrecord-*`` and ``stats.json``; returns the stats.

    ``job_chars`` sets how much text goes to a worker at a time, and so which chunks share a
    spaCy batch: for a given value the files are the same whatever ``workers`` is, and the same
    as :func:`~.beam.build_ssm_beam` writes.
    """
    global _state
    started = time.perf_counter()
    options = options or SsmOptions()
    options.check()
    names = list(dict.fromkeys(inputs))
    input_files = check_inputs(diffset_dir, names)
    nlp, info = load_ner_pipeline(spacy_model)
    labels = options.resolve_labels(info.ner_labels)
    tallies = {name: SsmTally() for name in names}
    writer = SsmWriter(out_dir, names, max_shard_bytes)
    _state = (nlp, frozenset(labels), options)
    keep_freed_memory()  # before forking: the workers inherit it
    pool = fork_pool(workers) if workers > 1 else None
    try:
        with progress_bar(
            desc="ssm", unit=" articles", disable=None if progress is None else not progress
        ) as bar:
            for name, path in zip(names, input_files, strict=True):
                for count, encoded, tally in ordered_map(
                    _run_job, iter_jobs(name, path, job_chars), pool, workers
                ):
                    writer.write(name, encoded)
                    tallies[name].merge(tally)
                    bar.update(count)
        report = build_report(
            tallies,
            diffset_dir=diffset_dir,
            options=options,
            labels=labels,
            pipeline=info,
            seconds=time.perf_counter() - started,
        )
        writer.commit(report)
    except BaseException:
        writer.abort()
        raise
    finally:
        if pool is not None:
            pool.terminate()
        _state = None
    return report
