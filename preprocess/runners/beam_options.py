"""The Beam pipeline options of the preprocessing stages: the user's flags, plus what a cluster
runner needs to run our code.

The workers of Dataflow, Flink or Spark (portable runners in a Docker or process environment)
start from Beam's SDK container, which has Apache Beam but not tw_jax. The stages' functions
reach them pickled by reference to ``tw_jax`` modules, so a worker without the package fails at
its first element (``ModuleNotFoundError: tw_jax``). Unless the user ships the code themselves
(``--setup_file``, ``--extra_package``, ``--sdk_container_image``), :func:`pipeline_options` adds
``--setup_file`` naming the checkout's ``setup.py``: Beam builds an sdist of it at launch and every
worker pip-installs it, with tw_jax's dependencies, before its first element (docs/beam.md).

The DirectRunner and PrismRunner (and any runner with ``--environment_type=LOOPBACK``) run the
pipeline on this machine, where tw_jax is importable already: nothing is added for them.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tw_jax.io import paths

# Runners (lower case, without a "Runner" suffix) whose workers are this machine's processes.
LOCAL_RUNNERS = frozenset({"direct", "prism", "bundlebaseddirect", "switchingdirect", "interactive"})
DEFAULT_RUNNER = "DirectRunner"


class BeamOptionsError(ValueError):
    """Beam flags that cannot work; the message is one line that names the flag."""


def split_flags(beam_options: str | Sequence[str]) -> list[str]:
    """The flags of ``--beam-options``: a shell-quoted string split as a shell would, or a list
    kept as it is."""
    if not isinstance(beam_options, str):
        return list(beam_options)
    try:
        return shlex.split(beam_options)
    except ValueError as error:
        raise BeamOptionsError(f"{error}: {beam_options}") from None


def _parse(flags: Sequence[str]) -> Any:
    from apache_beam.options.pipeline_options import PipelineOptions

    return PipelineOptions(list(flags))


def runner_of(options: Any) -> str:
    """The runner's short name in lower case (``DataflowRunner``, ``dataflow`` and
    ``apache_beam.runners.DataflowRunner`` are all ``dataflow``); ``direct`` when none is set."""
    from apache_beam.options.pipeline_options import StandardOptions

    name = str(options.view_as(StandardOptions).runner or DEFAULT_RUNNER)
    name = name.rsplit(".", 1)[-1].lower()
    return name.removesuffix("runner") or name


def environment_type(options: Any) -> str:
    """The SDK workers' environment a portable runner will use, as Beam decides it: the one
    given, else LOOPBACK (this process) for an embedded Flink (``--flink_master`` ``[auto]``, the
    default, or ``[local]``) or a local Spark master (``local[4]``, the default), else DOCKER."""
    import re

    from apache_beam.options.pipeline_options import (
        FlinkRunnerOptions,
        PortableOptions,
        SparkRunnerOptions,
    )
    from apache_beam.runners.portability.flink_runner import MAGIC_HOST_NAMES
    from apache_beam.runners.portability.spark_runner import LOCAL_MASTER_PATTERN

    given = options.view_as(PortableOptions).environment_type
    if given:
        return given.upper()
    runner = runner_of(options)
    if runner == "flink" and options.view_as(FlinkRunnerOptions).flink_master in MAGIC_HOST_NAMES:
        return "LOOPBACK"
    spark_master = options.view_as(SparkRunnerOptions).spark_master_url
    if runner == "spark" and re.match(LOCAL_MASTER_PATTERN, spark_master):
        return "LOOPBACK"
    return "DOCKER"


def runs_elsewhere(options: Any) -> bool:
    """True when the pipeline's code runs in processes that do not have this machine's Python
    environment: any runner but the local ones, unless its workers are LOOPBACK."""
    if runner_of(options) in LOCAL_RUNNERS:
        return False
    return environment_type(options) != "LOOPBACK"


def ships_code(options: Any) -> bool:
    """True when the user's flags already give the workers tw_jax: a package to install or an
    image that has it."""
    from apache_beam.options.pipeline_options import SetupOptions, WorkerOptions

    setup = options.view_as(SetupOptions)
    return bool(
        setup.setup_file or setup.extra_packages or options.view_as(WorkerOptions).sdk_container_image
    )


def repository_setup_file() -> str | None:
    """The checkout's ``setup.py`` when tw_jax is used from a checkout (an editable install or
    the repository on ``PYTHONPATH``); None for an installed wheel, which has no sources to
    build."""
    import tw_jax

    root = Path(tw_jax.__file__).resolve().parent.parent
    setup, pyproject = root / "setup.py", root / "pyproject.toml"
    return str(setup) if setup.is_file() and pyproject.is_file() else None


def check_flags(beam_options: str | Sequence[str]) -> list[str]:
    """The flags, with ``--setup_file`` added when a cluster runner needs it (see the module);
    :class:`BeamOptionsError` when it cannot be added or Dataflow lacks a required flag."""
    flags = split_flags(beam_options)
    options = _parse(flags)
    if not any(flag == "--runner" or flag.startswith("--runner=") for flag in flags):
        flags.insert(0, f"--runner={DEFAULT_RUNNER}")
    if runner_of(options) == "dataflow":
        _check_dataflow(options)
    if runs_elsewhere(options) and not ships_code(options):
        setup_file = repository_setup_file()
        if setup_file is None:
            raise BeamOptionsError(
                f"the {runner_of(options)} runner's workers need tw_jax, and this installation "
                "has no setup.py to build it from: add --setup_file=CHECKOUT/setup.py, "
                "--extra_package=tw_jax-VERSION.tar.gz or --sdk_container_image=IMAGE "
                "(docs/beam.md)"
            )
        flags.append(f"--setup_file={setup_file}")
    return flags


def _check_dataflow(options: Any) -> None:
    """What Dataflow refuses or would guess (a default bucket, a region from gcloud), asked for
    before any dump is opened."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    cloud = options.view_as(GoogleCloudOptions)
    for flag, value in (("project", "PROJECT"), ("region", "REGION"), ("temp_location", "gs://BUCKET/PATH")):
        if not getattr(cloud, flag):
            raise BeamOptionsError(f"DataflowRunner needs --{flag}={value} (docs/beam.md)")
    if not cloud.temp_location.startswith("gs://"):
        raise BeamOptionsError(
            f"--temp_location={cloud.temp_location}: DataflowRunner needs a gs:// URL"
        )


def check_paths_reachable(options: Any, io_paths: Iterable[str | os.PathLike[str] | None]) -> None:
    """Refuses local paths when the workers are machines of their own (Dataflow): they would
    read or write their own disks. :class:`~tw_jax.io.paths.StorageError` names the path.

    Flink and Spark clusters may share a file system, so their paths are the user's call."""
    if runner_of(options) != "dataflow":
        return
    for path in io_paths:
        if path is not None and not paths.is_url(path):
            raise paths.StorageError(
                f"{os.fspath(path)}: a local path; Dataflow workers read and write only "
                "gs:// URLs"
            )


def worker_requirements_flags(
    beam_options: str | Sequence[str], requirements: Sequence[str], folder: str
) -> list[str]:
    """``--requirements_file`` listing ``requirements`` (written into the local ``folder``, which
    must outlive the pipeline's launch) when the workers run elsewhere and the user's flags give
    neither a requirements file nor an image; else nothing.

    For what the package's dependencies do not bring, e.g. the SSM stage's spaCy model, which is
    an extra. The workers install it from PyPI themselves (``--requirements_cache=skip``): the
    launching machine downloads nothing.
    """
    from apache_beam.options.pipeline_options import SetupOptions, WorkerOptions

    options = _parse(split_flags(beam_options))
    setup = options.view_as(SetupOptions)
    if (
        not requirements
        or not runs_elsewhere(options)
        or setup.requirements_file
        or options.view_as(WorkerOptions).sdk_container_image
    ):
        return []
    path = os.path.join(folder, "worker-requirements.txt")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("".join(f"{line}\n" for line in requirements))
    flags = [f"--requirements_file={path}"]
    if setup.requirements_cache is None:
        flags.append("--requirements_cache=skip")
    return flags


def pipeline_options(
    beam_options: str | Sequence[str],
    io_paths: Iterable[str | os.PathLike[str] | None] = (),
    extra_flags: Sequence[str] = (),
) -> Any:
    """The ``PipelineOptions`` a stage runs with: the user's flags checked, ``--setup_file`` added
    for cluster runners, ``extra_flags`` (the stage's own needs) appended, and ``io_paths`` (the
    stage's inputs and outputs) checked against the runner."""
    flags = check_flags(beam_options) + list(extra_flags)
    options = _parse(flags)
    check_paths_reachable(options, io_paths)
    return options
