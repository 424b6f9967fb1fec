"""Waiting for what another process or thread does: on the condition itself, polled, with a
bounded timeout that names what was awaited; never a fixed sleep that hopes it happened.

The timeouts are generous (minutes): the suite runs on small machines with other work beside
it, and a wait that ends early costs nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

TIMEOUT = 300.0  # seconds; long enough for a loaded 2-core machine


def wait_until(predicate: Callable[[], T], *, what: str, timeout: float = TIMEOUT,
               interval: float = 0.05) -> T:
    """Polls ``predicate`` every ``interval`` seconds until it returns something true, and
    returns that; an AssertionError naming ``what`` after ``timeout`` seconds. The predicate
    may raise (an AssertionError when the awaited process has died, say): that ends the wait."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        time.sleep(interval)
