"""Progress of a long stage: a tqdm bar on a terminal, plain periodic lines in a log file.

A bar redrawn with carriage returns is one unreadable line in ``nohup.out`` or a CI log, and
no bar at all leaves a day-long dump read silent. :func:`progress` gives the bar when stderr
is a terminal and, when it is not, a line every ``TW_JAX_PROGRESS_SECONDS`` (default 60):
``comparing: 1,200,000 articles (4,310 articles/s)``. A stage shorter than that prints
nothing. ``disable=True`` / ``False`` force no progress / the bar, as tqdm's ``disable``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

INTERVAL_ENV = "TW_JAX_PROGRESS_SECONDS"


class PlainProgress:
    """The part of tqdm's interface the stages use, printing a line per interval."""

    def __init__(self, iterable: Iterable[Any] | None = None, *, desc: str = "",
                 unit: str = "it", interval: float | None = None, **_: Any) -> None:
        self.iterable, self.desc, self.unit, self.n = iterable, desc, unit.strip(), 0
        self.interval = float(os.environ.get(INTERVAL_ENV, 60)) if interval is None else interval
        self.started = self.last = time.monotonic()
        self.printed = False

    def __iter__(self) -> Iterator[Any]:
        for item in self.iterable or ():
            yield item
            self.update(1)
        self.close()

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if kind is None:
            self.close()

    def update(self, count: int = 1) -> None:
        self.n += count
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._line()

    def set_postfix(self, *_: Any, **__: Any) -> None:
        pass

    def close(self) -> None:
        if self.printed:  # a long stage says when it ended; a short one stays silent
            self._line(" done")
            self.printed = False

    def _line(self, end: str = "") -> None:
        seconds = max(time.monotonic() - self.started, 1e-9)
        print(f"{self.desc}: {self.n:,} {self.unit} ({self.n / seconds:,.0f} {self.unit}/s)"
              f"{end}", file=sys.stderr, flush=True)
        self.printed = True


def progress(iterable: Iterable[Any] | None = None, *, disable: bool | None = None,
             **kwargs: Any) -> Any:
    """tqdm's bar, :class:`PlainProgress` or nothing (see the module docstring)."""
    from tqdm import tqdm

    if disable is None and not sys.stderr.isatty():
        return PlainProgress(iterable, **kwargs)
    return tqdm(iterable, disable=bool(disable), **kwargs)
