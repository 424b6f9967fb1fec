"""A file that grows while a run goes on (metrics lines, TensorBoard events), local or in a bucket.

Locally it is appended to and flushed at every write, so a killed run loses nothing it wrote.
An object in a bucket cannot be appended to: the whole content is kept in memory and uploaded
again (a new object generation, which replaces the old one whole) at most every
``upload_every`` seconds and when the file is closed. Metrics and event files are small (a few
hundred bytes per logged step), so this costs little; what a killed run loses is at most the
last ``upload_every`` seconds of lines, which the resumed run writes again anyway.
"""

from __future__ import annotations

import time
from typing import IO

from tw_jax.io import paths
from tw_jax.io.paths import PathLike


class GrowingFile:
    """Appends bytes to ``path``; keeps what the file already holds."""

    def __init__(self, path: PathLike, *, upload_every: float = 30.0) -> None:
        self.path = str(path)
        self.remote = paths.is_url(path)
        self.upload_every = upload_every
        self._local: IO[bytes] | None = None
        self._content = bytearray()
        self._uploaded_at = float("-inf")
        self._dirty = False
        if self.remote:
            if paths.exists(path):
                self._content += paths.read_bytes(path)
        else:
            self._local = paths.open_file(path, "ab")

    def write(self, data: bytes) -> None:
        if self._local is not None:
            self._local.write(data)
            self._local.flush()
            return
        self._content += data
        self._dirty = True
        if time.monotonic() - self._uploaded_at >= self.upload_every:
            self.flush()

    def flush(self) -> None:
        """Uploads the whole content now (a bucket); flushes the handle (local)."""
        if self._local is not None:
            self._local.flush()
            return
        if self._dirty:
            with paths.open_file(self.path, "wb") as handle:
                handle.write(bytes(self._content))
            self._dirty = False
        self._uploaded_at = time.monotonic()

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None
        else:
            self.flush()
