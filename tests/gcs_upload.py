"""Copies a local folder into a bucket of the test GCS server, so a test can run the same command
on a local folder and on its copy at ``gs://`` and compare the outputs."""

from __future__ import annotations

import os

from tw_jax.io import paths


def upload_tree(local: str | os.PathLike[str], url: str) -> list[str]:
    """Uploads every file below ``local`` to ``url`` (same relative names); returns the names
    uploaded, relative and sorted."""
    local = os.fspath(local)
    names = []
    for folder, _, files in os.walk(local):
        for name in files:
            relative = os.path.relpath(os.path.join(folder, name), local).replace(os.sep, "/")
            paths.copy(os.path.join(folder, name), f"{url.rstrip('/')}/{relative}")
            names.append(relative)
    if not names:
        raise ValueError(f"{local}: nothing to upload")
    return sorted(names)

