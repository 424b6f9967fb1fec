"""Multi-host start: one function decides whether and how ``jax.distributed`` starts.

A run is multi-host when, in this order:

1. ``JAX_COORDINATOR_ADDRESS`` is set: an explicit launch. ``JAX_NUM_PROCESSES`` and
   ``JAX_PROCESS_ID`` must be set too (jax itself does not read them); they are passed to
   ``jax.distributed.initialize`` as arguments. One process means a single-host run.
2. A cluster jax recognises by itself: a Cloud TPU VM (libtpu installed and TPU chips present;
   jax asks the TPU metadata for its peers), SLURM (``SLURM_JOB_ID`` with more than one task) or
   Open MPI (``OMPI_COMM_WORLD_SIZE`` above 1). ``jax.distributed.initialize()`` gets no
   arguments and detects the rest.
3. ``TW_JAX_DISTRIBUTED=1``: the user says so; jax detects the rest (e.g. GKE's
   ``TPU_WORKER_HOSTNAMES``).

Anything else is a single-host run, which never contacts a coordinator.

A coordinator that cannot be reached fails within ``TW_JAX_COORDINATOR_TIMEOUT`` seconds
(default 300, jax's own) with one line naming the address, instead of hanging: jax aborts the
whole process (a C++ fatal error, no Python exception) when it cannot register, so with an
explicit launch each process first checks the address itself: process 0 that it can listen on
the port, the others that something answers there (retried until the timeout, since hosts start
at different times). What remains is jax's own abort when process 0 waits in vain for a peer
that never starts; it too ends after the timeout.
"""

from __future__ import annotations

import dataclasses
import glob
import importlib.util
import logging
import os
import socket
import time
from collections.abc import Mapping

import jax

log = logging.getLogger(__name__)

DISTRIBUTED_ENV = "TW_JAX_DISTRIBUTED"
TIMEOUT_ENV = "TW_JAX_COORDINATOR_TIMEOUT"
_TRUE = ("1", "true", "yes")


class DistributedStartError(RuntimeError):
    """The multi-host settings are incomplete, or the coordinator cannot be reached."""


@dataclasses.dataclass(frozen=True)
class Launch:
    """How this process joins a multi-host run (``explicit`` arguments or jax's detection)."""

    how: str  # "explicit", "cloud_tpu", "slurm", "openmpi", "requested"
    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None


def _int(environ: Mapping[str, str], name: str) -> int:
    value = environ.get(name)
    if value is None:
        raise DistributedStartError(
            f"JAX_COORDINATOR_ADDRESS is set but {name} is not: set JAX_NUM_PROCESSES and "
            "JAX_PROCESS_ID on every host"
        )
    try:
        return int(value)
    except ValueError:
        raise DistributedStartError(f"{name}={value!r} is not an integer") from None


def on_cloud_tpu_vm() -> bool:
    """libtpu installed and TPU chips attached (what jax checks before asking the metadata)."""
    if importlib.util.find_spec("libtpu") is None:
        return False
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def detect_launch(environ: Mapping[str, str] = os.environ) -> Launch | None:
    """The multi-host launch this environment describes, or None for a single-host run."""
    address = environ.get("JAX_COORDINATOR_ADDRESS")
    if address:
        count, index = _int(environ, "JAX_NUM_PROCESSES"), _int(environ, "JAX_PROCESS_ID")
        if count < 1 or not 0 <= index < count:
            raise DistributedStartError(
                f"JAX_PROCESS_ID={index} must be in [0, JAX_NUM_PROCESSES={count})"
            )
        return None if count == 1 else Launch("explicit", address, count, index)
    if int(environ.get("SLURM_NTASKS", "1") or 1) > 1 and "SLURM_JOB_ID" in environ:
        return Launch("slurm")
    if int(environ.get("OMPI_COMM_WORLD_SIZE", "1") or 1) > 1:
        return Launch("openmpi")
    if environ.get(DISTRIBUTED_ENV, "").lower() in _TRUE:
        return Launch("requested")
    if on_cloud_tpu_vm() and "TPU_SKIP_MDS_QUERY" not in environ:
        return Launch("cloud_tpu")
    return None


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise DistributedStartError(
            f"JAX_COORDINATOR_ADDRESS={address!r} is not HOST:PORT (e.g. 10.0.0.2:8476)"
        )
    return host.strip("[]"), int(port)


def check_coordinator(launch: Launch, timeout: float) -> None:
    """Process 0: the coordinator's port is free to listen on. Others: the coordinator answers
    (retried until ``timeout`` seconds have passed)."""
    host, port = _host_port(launch.coordinator_address or "")
    if launch.process_id == 0:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("", port))
            except OSError as error:
                raise DistributedStartError(
                    f"process 0 cannot serve as coordinator on port {port} "
                    f"({launch.coordinator_address}): {error.strerror or error}"
                ) from error
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(5.0, timeout)):
                return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise DistributedStartError(
                    f"no coordinator answered at {launch.coordinator_address} within "
                    f"{timeout:g} s (process {launch.process_id} of {launch.num_processes}): "
                    f"{error.strerror or error}"
                ) from error
            time.sleep(0.5)


def initialize(environ: Mapping[str, str] = os.environ) -> bool:
    """Starts ``jax.distributed`` when :func:`detect_launch` says so; returns whether it did.

    Idempotent: a second call (evaluation after training in one process) does nothing.
    """
    launch = detect_launch(environ)
    if launch is None:
        return False
    if jax.distributed.is_initialized():
        return False
    timeout = int(environ.get(TIMEOUT_ENV, "300"))
    if launch.how == "explicit":
        check_coordinator(launch, timeout)
    try:
        jax.distributed.initialize(
            coordinator_address=launch.coordinator_address,
            num_processes=launch.num_processes,
            process_id=launch.process_id,
            initialization_timeout=timeout,
        )
    except Exception as error:  # noqa: BLE001 - jax raises several kinds; one line for all
        where = launch.coordinator_address or f"the coordinator ({launch.how} detection)"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DistributedStartError(
            f"could not join the multi-host run through {where} within {timeout} s "
            f"(process {launch.process_id} of {launch.num_processes}): {first}"
        ) from error
    log.info(
        "jax.distributed (%s): process %d of %d, %d local / %d global devices", launch.how,
        jax.process_index(), jax.process_count(), jax.local_device_count(), jax.device_count(),
    )
    return True
