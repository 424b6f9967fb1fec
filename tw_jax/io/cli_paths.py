"""Paths as the command line takes them: resolved once, checked before any work starts.

``type=input_path`` / ``type=output_path`` on an argparse argument turn what the user typed into
the form every layer below keeps (:func:`tw_jax.io.paths.resolve`: an absolute local path, or
the URL unchanged) and refuse, in argparse's one-line error, an input that is not there or a
bucket that cannot be reached, before a dump is opened or a model compiled.

The values keep what they are (:class:`InputPath`, :class:`InputFolder`, :class:`OutputPath`,
all ``str``), so :func:`overlap` can refuse, before anything is written, an output that is one
of the command's inputs, a stage's own folder (``type=output_folder``) that contains one, or an
output inside an input folder the command reads whole (``type=input_folder``: a DiffSet folder,
a dump that may be a folder of files).
"""

from __future__ import annotations

import argparse
import contextlib
import os

from tw_jax.io import paths
from tw_jax.io.gcs import check_access


class InputPath(str):
    """A path the command reads (``type=input_path``)."""


class InputFolder(InputPath):
    """A folder the command reads whole (``type=input_folder``): an output inside it would be
    read as input."""


class OutputPath(str):
    """A folder the command writes files into (``type=output_path``)."""


class OutputFolder(OutputPath):
    """A folder a stage owns whole (``type=output_folder``: a DiffSet, SSM or probes folder,
    which later stages read whole): no input may lie inside it."""


def input_path(text: str) -> str:
    """An existing file or folder, local or in a bucket."""
    return InputPath(_existing(text))


def input_folder(text: str) -> str:
    """An existing folder (or file) the command reads whole, local or in a bucket."""
    return InputFolder(_existing(text))


def _existing(text: str) -> str:
    resolved = paths.resolve(text)
    if paths.is_url(resolved):
        try:
            check_access(resolved, must_exist=True)
        except paths.StorageError as error:
            raise argparse.ArgumentTypeError(str(error)) from error
    elif not os.path.exists(resolved):
        raise argparse.ArgumentTypeError(f"{text}: no such file or folder")
    return resolved


def output_folder(text: str) -> str:
    """A folder a stage owns whole, local or in a bucket (as :func:`output_path`)."""
    return OutputFolder(output_path(text))


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
    return OutputPath(resolved)


def _key(path: str) -> str:
    """The place a path names, for comparing: symbolic links and ``..`` resolved locally."""
    place = path.rstrip("/") if paths.is_url(path) else os.path.realpath(path).rstrip(os.sep)
    return place + "/"


def overlap(named: dict[str, object]) -> str | None:
    """Why the outputs among ``named`` (``{"--out": value, ...}``, lists allowed) cannot be
    written, or None: an output that is an input, a stage's folder that contains an input, or
    an output inside an input folder read whole. A folder the command only adds files to may
    hold its inputs (``evolvingqa generate --data D --probes D/twiki``)."""
    outputs, inputs = [], []
    for flag, value in named.items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, OutputPath):
                outputs.append((flag, item))
            elif isinstance(item, InputPath):
                inputs.append((flag, item))
    for out_flag, out in outputs:
        for in_flag, source in inputs:
            o, i = _key(out), _key(source)
            if o == i:
                how = "is the input"
            elif i.startswith(o) and isinstance(out, OutputFolder):
                how = "contains the input"
            elif o.startswith(i) and isinstance(source, InputFolder):
                how = "lies inside the input folder, read whole,"
            else:
                continue
            return (f"{out_flag} {out} {how} {in_flag} {source}: a command never writes where "
                    f"it reads; choose another {out_flag}")
    return None



def claimed_output(out: str, command: str,
                   inputs: dict[str, object]) -> contextlib.AbstractContextManager[str]:
    """The claim of a stage folder the command named itself (``--data DATA`` and the dumps'
    dates; ``tw-jax`` claims a given ``--out`` before the command runs): refused, as ``--out``
    would be, when it is one of ``inputs`` or holds one."""
    from tw_jax.errors import UsageError
    from tw_jax.io.output_claim import claimed

    problem = overlap({"--data": OutputFolder(out), **inputs})
    if problem:
        raise UsageError(problem)
    return claimed(out, command)
