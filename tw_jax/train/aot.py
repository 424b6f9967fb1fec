"""Ahead-of-time compilation for TPU topologies: does a run fit, and about how fast is it?

``tw-jax compile --topology v5e:4x4 --gin_file=kadapter.gin`` compiles the trainer's own train
step (:func:`tw_jax.train.trainer.build_train_step`: the same mesh from ``MESH_SHAPE``, logical
rules, shardings, donation, remat, dtype, freezing partition and optimizer state), or the
scoring step of ``tw-jax eval`` or the greedy decoding of ``tw-jax infer``, for the chips of a
TPU slice that is not here. libtpu describes the slice's devices
(``jax.experimental.topologies``); the inputs are abstract (``jax.ShapeDtypeStruct`` with their
shardings), so no weights, data or dataset folder are needed and nothing runs. MaxText's
``train_compile.py`` does the same for its models.

What comes back is XLA's: the memory one chip needs (arguments + outputs + temporaries + code -
what outputs reuse of the arguments, i.e. the donated parameters and optimizer state), its count
of FLOPs and bytes accessed, and its estimate of the step time. XLA's cost model gives that
estimate for programs compiled with low effort (``effort="fast"``, the default: a GPT-2 Large step
compiles in about half the time, and its memory comes out within a few percent above the fully
optimised program's); where it gives none, the step time is the roofline of XLA's own counts,
``max(FLOPs / peak FLOP/s, bytes / HBM bandwidth)`` per chip. Either is an estimate from a cost
model, not a measurement: collectives between chips are costed roughly or not at all, and the
decoding loop's body is costed once.

Off a TPU VM, libtpu must not look for a metadata server nor take its one-process lock file:
``TPU_SKIP_MDS_QUERY=1`` and ``ALLOW_MULTIPLE_LIBTPU_LOAD=1`` are set before it loads (and
ordinary runs keep to the CPU, see :mod:`tw_jax.platforms`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import gin
import jax
import jax.numpy as jnp
import optax

from tw_jax.models.decoding import greedy_decode
from tw_jax.models.sharding import activate, batch_sharding, padded_rows, replicated
from tw_jax.platforms import has_tpu_chips, module_installed
from tw_jax.runtime.run_model import RunModel, build_run_model, with_shardings
from tw_jax.runtime.score_step import make_score_step
from tw_jax.train.flops import train_step_flops
from tw_jax.train.optimizers import from_legacy, resolve
from tw_jax.train.trainer import build_train_step

GIB = 1024**3
STEPS = ("train", "score", "decode")
EFFORTS = {"fast": {"exec_time_optimization_effort": -1.0}, "full": {}}


class CompileError(ValueError):
    """A topology, mesh or installation that cannot be compiled for (one line for the user)."""


@dataclasses.dataclass(frozen=True)
class Chip:
    """One TPU generation: HBM per chip, its bandwidth and peak dense bf16 FLOP/s.

    ``megacore``: the chip's two TensorCores act as one device, as jax shows them on a TPU VM
    (v4, v5p); libtpu's topologies then need the "megacore" chip configuration.
    """

    hbm_bytes: int
    hbm_bytes_per_second: float
    peak_flops: float
    megacore: bool = False


# Google's published per-chip figures (Cloud TPU system architecture pages).
CHIPS: dict[str, Chip] = {
    "v4": Chip(32 * GIB, 1228e9, 275e12, megacore=True),
    "v5e": Chip(16 * GIB, 819e9, 197e12),
    "v5p": Chip(95 * GIB, 2765e9, 459e12, megacore=True),
    "v6e": Chip(32 * GIB, 1640e9, 918e12),
}

_TOPOLOGY = re.compile(r"^(v[0-9]+[a-z]*):([0-9]+(?:x[0-9]+){1,2})$")


def parse_topology(name: str) -> tuple[str, Chip]:
    """``"v5e:4x4"`` → ``("v5e", CHIPS["v5e"])``; anything else is a :class:`CompileError`."""
    match = _TOPOLOGY.match(name.strip())
    if not match:
        raise CompileError(
            f"topology {name!r} is not GENERATION:AxB[xC] (e.g. v5e:4x4, v4:2x2x1, v5p:2x2x1)"
        )
    generation = match.group(1)
    if generation not in CHIPS:
        raise CompileError(
            f"unknown TPU generation {generation!r} in {name!r}; known: {', '.join(CHIPS)}"
        )
    return generation, CHIPS[generation]


@contextlib.contextmanager
def _native_stderr_dropped() -> Iterator[None]:
    """libtpu prints, from C++, warnings about the TPU VM it is not on; keep them off the
    user's terminal (errors still arrive as exceptions)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def topology_devices(topology: str, num_slices: int = 1) -> list[jax.Device]:
    """The compile-only devices of ``num_slices`` slices of ``topology`` (one per chip)."""
    generation, chip = parse_topology(topology)
    if num_slices < 1:
        raise CompileError(f"--num-slices must be at least 1, got {num_slices}")
    library = os.environ.get("TPU_LIBRARY_PATH", "")
    if not (library and os.path.exists(library)) and not module_installed("libtpu"):
        raise CompileError(
            "libtpu is not installed: install the tpu extra (pip install 'tw-jax[tpu]', or "
            "bash tools/setup.sh tpu)"
        )
    if not has_tpu_chips():
        # Off a TPU VM: never ask a metadata server, and no chips to guard, so no lock file
        # (libtpu otherwise lets one process at a time load it: two compiles would collide).
        os.environ["TPU_SKIP_MDS_QUERY"] = "1"
        os.environ["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
    from jax.experimental import topologies

    options: dict[str, Any] = {"num_slices": num_slices} if num_slices > 1 else {}
    if chip.megacore:
        options["chip_config_name"] = "megacore"
    try:
        with _native_stderr_dropped():
            return list(
                topologies.get_topology_desc(
                    platform="tpu", topology_name=topology, **options
                ).devices
            )
    except Exception as error:  # libtpu's own errors: invalid names, missing library
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CompileError(f"libtpu cannot describe topology {topology!r}: {first}") from error


@dataclasses.dataclass(frozen=True)
class Lengths:
    """Feature lengths of the compiled step's inputs."""

    encoder: int | None
    decoder: int


def _abstract_batch(run: RunModel, rows: int, lengths: Mapping[str, int]) -> dict[str, Any]:
    """The model features of ``rows`` rows, abstract, sharded over the batch axes."""
    sizes = run.model.feature_lengths(lengths)
    sharding = batch_sharding(run.mesh, 2)
    return {
        name: jax.ShapeDtypeStruct(
            (rows, sizes["encoder" if name.startswith("encoder") else "decoder"]), jnp.int32,
            sharding=sharding,
        )
        for name in run.model.feature_names
    }


def _lower_train(run: RunModel, rows: int, lengths: Mapping[str, int], **step_args: Any) -> Any:
    # Built outside the mesh: building computes small constants (the dropout key) eagerly, on
    # this machine's device; a compile-only TPU device can run nothing.
    step = build_train_step(run, run.config, **step_args)
    opt_state = with_shardings(step.abstract_opt_state, step.opt_shardings)
    index = jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated(run.mesh))
    rate = jax.ShapeDtypeStruct((), jnp.float32, sharding=replicated(run.mesh))
    with activate(run.mesh):
        return step.jitted.lower(
            run.abstract_params, opt_state, index, rate, _abstract_batch(run, rows, lengths)
        )


def _lower_score(run: RunModel, rows: int, lengths: Mapping[str, int]) -> Any:
    score = jax.jit(make_score_step(run.model), out_shardings=replicated(run.mesh))
    with activate(run.mesh):
        return score.lower(run.abstract_params, _abstract_batch(run, rows, lengths))


def decode_lengths(config: Any, lengths: Mapping[str, int], prompt_length: int | None,
                   max_new_tokens: int | None) -> tuple[int, int]:
    """``(prompt, new tokens)`` of the decode step, as ``tw-jax infer`` sizes them: T5 reads
    ``inputs`` and writes up to ``targets`` tokens; GPT-2 continues an ``inputs``-long prompt
    (else a ``targets``-long one) by ``targets`` tokens."""
    new = int(max_new_tokens or lengths["targets"])
    prompt = int(prompt_length or lengths.get("inputs") or lengths["targets"])
    return prompt, new


def _lower_decode(run: RunModel, rows: int, prompt: int, new: int) -> Any:
    ids = jax.ShapeDtypeStruct((rows, prompt), jnp.int32, sharding=batch_sharding(run.mesh, 2))
    with activate(run.mesh):
        return greedy_decode.lower(
            run.module, run.abstract_params, ids, ids, max_new_tokens=new, eos_id=1, pad_id=0
        )


# A few compiled programs by their HLO: methods that differ only in their data (DIFF, FULL,
# Mix-Review) compile to the same step, which tools/tpu_compile_table.py then compiles once.
_COMPILED: dict[tuple[str, ...], Any] = {}


def _compile(lowered: Any, effort: str, target: str) -> Any:
    """``lowered`` compiled for ``target`` (the slices' name: the HLO does not say which chip)."""
    key = (hashlib.sha256(lowered.as_text().encode()).hexdigest(), effort, target)
    if key not in _COMPILED:
        with _native_stderr_dropped():
            _COMPILED[key] = lowered.compile(compiler_options=EFFORTS[effort] or None)
        while len(_COMPILED) > 4:
            _COMPILED.pop(next(iter(_COMPILED)))
    return _COMPILED[key]


_SIZE = r"([0-9.]+)\s*([KMGTP]?)i?B?"
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def _required_bytes(message: str) -> int | None:
    """What XLA's out-of-memory message says one chip needs (None where it says no figure)."""
    for pattern in (rf"required[^(]*\({_SIZE}\)", rf"Used {_SIZE} of"):
        found = re.search(pattern, message)
        if found:
            return int(float(found.group(1)) * _UNITS[found.group(2)])
    return None


def _memory(compiled: Any) -> dict[str, int]:
    stats = compiled.memory_analysis()
    parts = {
        "arguments": int(stats.argument_size_in_bytes),
        "outputs": int(stats.output_size_in_bytes),
        "temp": int(stats.temp_size_in_bytes),
        "code": int(stats.generated_code_size_in_bytes),
        "aliased": int(stats.alias_size_in_bytes),
    }
    parts["total"] = (
        parts["arguments"] + parts["outputs"] + parts["temp"] + parts["code"] - parts["aliased"]
    )
    return parts


def _cost(compiled: Any) -> dict[str, float]:
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):  # older jax: one dict per program
        cost = cost[0] if cost else {}
    return {
        "flops": float(cost.get("flops", 0.0)),
        "bytes": float(cost.get("bytes accessed", 0.0)),
        "optimal_seconds": float(cost.get("optimal_seconds", -1.0)),
    }


def _advice(needed: int | None, hbm: int, mesh: Mapping[str, int], batch_size: int,
            accumulate_steps: int, remat: bool) -> str:
    ways = [f"shard over more chips (MESH_SHAPE's fsdp axis is {mesh['fsdp']})"]
    if not remat:
        ways.append("turn on rematerialisation (runs/tpu.gin sets remat = True)")
    ways.append(f"lower BATCH_SIZE (now {batch_size}) and raise ACCUMULATE_STEPS "
                f"(now {accumulate_steps}) to keep BATCH_SIZE x ACCUMULATE_STEPS")
    if needed is None:
        need = f"needs more than the chip's {hbm / GIB:.1f} GiB"
    else:
        need = (f"needs {needed / GIB:.2f} GiB per chip, {(needed - hbm) / GIB:.2f} GiB more "
                f"than the chip's {hbm / GIB:.1f} GiB")
    return f"does not fit: {need}; " + ", or ".join(ways)


@gin.configurable("compile", module="tw_jax.train")
def compile_for_topology(
    *,
    topology: str,
    model_config: Any,
    task_feature_lengths: Mapping[str, int],
    batch_size: int,
    num_slices: int = 1,
    step: str = "train",
    optimizer: Callable[..., optax.GradientTransformation] | None = None,
    schedule_fn: Callable[..., optax.Schedule] | None = None,
    accumulate_steps: int = 1,
    mesh_shape: Sequence[int] = (-1, 1, 1),
    optimizer_fn: Callable[..., optax.GradientTransformation] | None = None,  # deprecated
    seed: int = 0,
    train_steps: int = 10_000,
    hbm_bytes: int | None = None,
    effort: str = "fast",
    prompt_length: int | None = None,
    max_new_tokens: int | None = None,
    loss_terms: Sequence[Any] = (),
) -> dict[str, Any]:
    """Compile ``step`` of the gin-configured run for ``num_slices`` slices of ``topology``.

    The arguments after ``batch_size`` are those of :func:`tw_jax.train.train` (bound to the
    same gin macros in ``base.gin``); ``train_steps`` only sets the schedule's constants, which
    change nothing compiled. ``hbm_bytes`` overrides the chip's HBM. Returns the report (see
    ``docs/tpu.md``): ``fits`` is False when one chip's memory is over its HBM, and ``advice``
    then says what to change.
    """
    if step not in STEPS:
        raise CompileError(f"--step must be one of {', '.join(STEPS)}, got {step!r}")
    if effort not in EFFORTS:
        raise CompileError(f"--effort must be one of {', '.join(EFFORTS)}, got {effort!r}")
    if batch_size < 1 or accumulate_steps < 1:
        raise CompileError(
            f"BATCH_SIZE={batch_size} and ACCUMULATE_STEPS={accumulate_steps} must be positive"
        )
    generation, chip = parse_topology(topology)
    devices = topology_devices(topology, num_slices)
    try:
        run = build_run_model(model_config, mesh_shape, devices=devices)
    except ValueError as error:
        raise CompileError(f"MESH_SHAPE={tuple(mesh_shape)} on {topology}: {error}") from error
    mesh = {name: int(size) for name, size in run.mesh.shape.items()}
    # A train step computes BATCH_SIZE rows; with ACCUMULATE_STEPS = k the optimizer applies
    # the mean of k steps' gradients (optax.MultiSteps), as tw-jax train does.
    rows = padded_rows(batch_size, run.mesh)

    started = time.perf_counter()
    if step == "train":
        lowered = _lower_train(
            run, rows, task_feature_lengths,
            optimizer=resolve(optimizer) if optimizer_fn is None else from_legacy(optimizer_fn),
            schedule_fn=schedule_fn, train_steps=train_steps,
            accumulate_steps=accumulate_steps, seed=seed, loss_terms=loss_terms,
        )
        flops = train_step_flops(model_config, batch_size, task_feature_lengths)
        model_flops, tokens = flops.total, flops.tokens
    elif step == "score":
        lowered = _lower_score(run, rows, task_feature_lengths)
        flops = train_step_flops(model_config, batch_size, task_feature_lengths)
        model_flops, tokens = flops.forward, flops.tokens
    else:
        prompt, new = decode_lengths(model_config, task_feature_lengths, prompt_length,
                                     max_new_tokens)
        lowered = _lower_decode(run, rows, prompt, new)
        # The forward pass over the prompt and the new tokens, as training would run it.
        model_flops = train_step_flops(
            model_config, batch_size, {"inputs": prompt, "targets": new}
        ).forward
        tokens = batch_size * new  # tokens generated
    try:
        compiled = _compile(lowered, effort, f"{topology} x {num_slices}")
        memory, cost = _memory(compiled), _cost(compiled)
    except jax.errors.JaxRuntimeError as error:
        if "RESOURCE_EXHAUSTED" not in str(error):
            raise
        # XLA refuses a program over the chip's HBM; its message says by how much.
        memory, cost = {"total": _required_bytes(str(error))}, None
    seconds = time.perf_counter() - started

    chips = len(devices)
    hbm = int(hbm_bytes or chip.hbm_bytes)
    est: float | None = None
    source = None
    if cost is None:
        pass
    elif cost["optimal_seconds"] > 0:
        est, source = cost["optimal_seconds"], "xla"
    else:
        est = max(cost["flops"] / chip.peak_flops, cost["bytes"] / chip.hbm_bytes_per_second)
        source = "roofline"
    fits = cost is not None and memory["total"] is not None and memory["total"] <= hbm
    report: dict[str, Any] = {
        "topology": topology,
        "num_slices": num_slices,
        "generation": generation,
        "chips": chips,
        "mesh": mesh,
        "step": step,
        "model": run.model.model_type,
        "batch_size": batch_size,
        "padded_batch_size": rows,
        "task_feature_lengths": dict(task_feature_lengths),
        "fits": fits,
        "memory_per_chip_bytes": memory["total"],
        "memory_breakdown_bytes": {k: v for k, v in memory.items() if k != "total"},
        "hbm_per_chip_bytes": hbm,
        "flops_per_step": cost["flops"] * chips if cost else None,
        "bytes_accessed_per_step": cost["bytes"] * chips if cost else None,
        "model_flops_per_step": model_flops,
        "tokens_per_step": tokens,
        "est_step_seconds": est,
        "est_source": source,
        "est_tokens_per_second": tokens / est if est else None,
        "est_mfu": model_flops / est / (chip.peak_flops * chips) if est else None,
        "compile_seconds": round(seconds, 2),
        "effort": effort,
    }
    if not fits:
        remat = bool(getattr(model_config, "remat", False))
        report["advice"] = _advice(
            memory["total"], hbm, mesh, batch_size, accumulate_steps, remat
        )
    return report


def summary_lines(report: Mapping[str, Any]) -> list[str]:
    """A short human table of a report (the JSON line follows it on stdout)."""
    mesh = " x ".join(f"{k} {v}" for k, v in report["mesh"].items())
    needed, hbm = report["memory_per_chip_bytes"], report["hbm_per_chip_bytes"] / GIB
    lines = [
        f"{report['step']} step of {report['model']} on {report['topology']}"
        + (f" x {report['num_slices']} slices" if report["num_slices"] > 1 else "")
        + f" ({report['chips']} chips; mesh {mesh}; batch {report['batch_size']}"
        + (f", padded to {report['padded_batch_size']}"
           if report["padded_batch_size"] != report["batch_size"] else "")
        + f"), compiled in {report['compile_seconds']:.0f} s ({report['effort']} effort)",
        "  memory per chip   "
        + (f"{needed / GIB:8.2f} GiB" if needed is not None else "unknown")
        + f" of {hbm:.1f} GiB HBM: " + ("fits" if report["fits"] else "DOES NOT FIT"),
    ]
    memory = report["memory_breakdown_bytes"]
    if memory:
        lines.append(
            f"    arguments {memory['arguments'] / GIB:.2f}, outputs {memory['outputs'] / GIB:.2f},"
            f" temporaries {memory['temp'] / GIB:.2f}, code {memory['code'] / GIB:.2f}, "
            f"reused {memory['aliased'] / GIB:.2f} GiB"
        )
    if report["flops_per_step"] is not None:
        lines.append(f"  FLOPs per step    {report['flops_per_step']:.3e} (XLA), "
                     f"{report['model_flops_per_step']:.3e} (model)")
    if report["est_step_seconds"]:
        lines += [
            f"  est. step time    {report['est_step_seconds']:.4f} s ({report['est_source']} "
            "estimate, not a measurement)",
            f"  est. tokens/s     {report['est_tokens_per_second']:,.0f}; "
            f"est. MFU {report['est_mfu']:.1%}",
        ]
    if not report["fits"]:
        lines.append(f"  {report['advice']}")
    return lines
