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

Anything else is a single-host run, which never contacts a coordinator. A coordinator that
cannot be reached fails within ``TW_JAX_COORDINATOR_TIMEOUT`` seconds (default 300, jax's own)
with one line naming the address, instead of hanging.
"""

from __future__ import annotations

import dataclasses
import glob
import importlib.util
import logging
import os
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
