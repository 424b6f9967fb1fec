"""Process pools for the local stages: forked workers, bounded ordered maps.

Shared by the DiffSet and Probes stages, whose workers open their own read-only SQLite
connections lazily and whose results are merged in input order, so outputs match one process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.pool import Pool
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

WINDOW_PER_WORKER = 4  # tasks in flight per worker: keeps them busy, bounds memory


def fork_pool(
    workers: int, initializer: Callable[..., Any] | None = None, initargs: tuple = ()
) -> Pool:
    """A pool of ``workers`` processes, forked where the platform allows (no re-import, and
    module state set before the fork is inherited)."""
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    return context.Pool(workers, initializer=initializer, initargs=initargs)


def ordered_map(
    function: Callable[[T], R], jobs: Iterable[T], pool: Pool | None, workers: int
) -> Iterator[R]:
    """``map`` in input order, with at most a few jobs in flight per worker (inline when
    ``pool`` is None).

    ``Pool.imap`` would pull every job from ``jobs`` at once, holding a whole dump in memory
    when the workers fall behind the reader.
    """
    if pool is None:
        yield from map(function, jobs)
        return
    pending: deque = deque()
    for job in jobs:
        pending.append(pool.apply_async(function, (job,)))
        if len(pending) >= workers * WINDOW_PER_WORKER:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()
