"""Local paths and object-store URLs (``gs://``, ``s3://``, ``hdfs://``) behind one small API.

Beam runners read dumps from and write outputs to object stores; everything else in tw_jax works
on local files. URLs go through Apache Beam's FileSystems (imported only when a URL is used), so
the local path never needs Beam.
"""

from __future__ import annotations

import os
from typing import BinaryIO


def is_url(path: str | os.PathLike[str]) -> bool:
    return "://" in os.fspath(path)


def join(base: str | os.PathLike[str], *parts: str) -> str:
    if is_url(base):
        from apache_beam.io.filesystems import FileSystems

        return FileSystems.join(os.fspath(base), *parts)
    return os.path.join(os.fspath(base), *parts)


def open_read(path: str | os.PathLike[str]) -> BinaryIO:
    """The raw (still compressed) bytes of a file, seekable."""
    if is_url(path):
        from apache_beam.io.filesystem import CompressionTypes
        from apache_beam.io.filesystems import FileSystems

        return FileSystems.open(os.fspath(path), compression_type=CompressionTypes.UNCOMPRESSED)
    return open(path, "rb")  # noqa: SIM115 - the caller owns the handle


def open_write(path: str | os.PathLike[str]) -> BinaryIO:
    """A new file; object stores make it visible only when it is closed."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.create(os.fspath(path), compression_type=CompressionTypes.UNCOMPRESSED)


def exists(path: str | os.PathLike[str]) -> bool:
    if is_url(path):
        from apache_beam.io.filesystems import FileSystems

        return FileSystems.exists(os.fspath(path))
    return os.path.exists(path)


def size(path: str | os.PathLike[str]) -> int:
    if is_url(path):
        from apache_beam.io.filesystems import FileSystems

        return FileSystems.match([os.fspath(path)])[0].metadata_list[0].size_in_bytes
    return os.path.getsize(path)


def delete_matching(pattern: str) -> None:
    """Deletes the files matching a glob (nothing if none match)."""
    if is_url(pattern):
        from apache_beam.io.filesystems import FileSystems

        found = [m.path for match in FileSystems.match([pattern]) for m in match.metadata_list]
        if found:
            FileSystems.delete(found)
        return
    import glob

    for found in glob.glob(pattern):
        os.unlink(found)
