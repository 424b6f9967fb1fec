"""Paths as the command line takes them: resolved once, checked before any work starts.

``type=input_path`` / ``type=output_path`` on an argparse argument turn what the user typed into
the form every layer below keeps (:func:`tw_jax.io.paths.resolve`: an absolute local path, or
the URL unchanged) and refuse, in argparse's one-line error, an input that is not there or a
bucket that cannot be reached, before a dump is opened or a model compiled.
"""

from __future__ import annotations

import argparse
import os

from tw_jax.io import paths
from tw_jax.io.gcs import check_access


def input_path(text: str) -> str:
    """An existing file or folder, local or in a bucket."""
    resolved = paths.resolve(text)
    if paths.is_url(resolved):
        try:
            check_access(resolved, must_exist=True)
        except paths.StorageError as error:
            raise argparse.ArgumentTypeError(str(error)) from error
    elif not os.path.exists(resolved):
        raise argparse.ArgumentTypeError(f"{text}: no such file or folder")
    return resolved


def output_path(text: str) -> str:
    """A folder to write into, local or in a bucket (the bucket must exist)."""
    resolved = paths.resolve(text)
    if paths.is_url(resolved):
        try:
            check_access(resolved, must_exist=False)
        except paths.StorageError as error:
            raise argparse.ArgumentTypeError(str(error)) from error
    elif os.path.isfile(resolved):
        raise argparse.ArgumentTypeError(f"{text}: is a file, not a folder")
    else:
        existing = paths.nearest_existing(resolved)
        if not os.access(existing, os.W_OK | os.X_OK):
            where = "" if existing == resolved else f" ({existing} is not writable)"
            raise argparse.ArgumentTypeError(f"{text}: cannot write into it{where}")
    return resolved

