"""Training throughput of tw_jax: tokens/s, step time, model FLOPs per token, MFU, peak memory.

    python tools/bench_train.py --model gpt2_large --method diff --batch 16 --seq 512 --steps 20

Times the train step ``tw-jax train`` runs, built by the trainer's own
:func:`tw_jax.train.trainer.build_train_step`: the model, variant, freezing, optimizer and
compute settings from the gin files (see ``bench_common``), the mesh and shardings from
``MESH_SHAPE`` and the logical rules, ``param_labels`` → optax partition, the step jitted with
the trainer's in/out shardings and donated parameters and optimizer state. Then:

1. compiles it (ahead of time: ``lower(...).compile()``; ``compile_s``), reads XLA's own FLOP
   count of the compiled step (``xla_flops_per_step``: the executed program, rematerialisation
   and elementwise work included, unlike the model FLOPs);
2. runs ``--warmup`` steps, then times ``--steps`` steps, each synchronised
   (``block_until_ready`` on the new parameters, optimizer state and metrics) as the trainer
   synchronises on each step's loss;
3. prints one JSON line: tokens/s, step time median and spread, model FLOPs per token
   (:mod:`tw_jax.train.flops`: freezing-aware, with attention), MFU against the device's peak
   bf16 FLOP/s (null on CPU unless ``--peak-flops``), peak device memory
   (``memory_stats()["peak_bytes_in_use"]``, or the process's max RSS where the device has no
   statistics, e.g. CPU; ``peak_memory_source`` says which).

Batches are synthetic random tokens of the requested shape, placed on the devices before timing.
``tools/bench_train_reference.py`` measures the same run with PyTorch.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common  # noqa: E402
from bench_common import BenchError  # noqa: E402


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench_common.add_run_arguments(parser)
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps after compiling")
    parser.add_argument("--peak-flops", type=float, default=None,
                        help="peak FLOP/s per device for MFU (default: the device table)")
    parser.add_argument("--prng", default=None, choices=("threefry2x32", "rbg", "unsafe_rbg"),
                        help="jax_default_prng_impl for this run (dropout's random bits; "
                             "default: jax's, threefry2x32, as the trainer runs)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    return args


def _xla_flops(compiled: Any) -> float | None:
    """XLA's FLOP count of the compiled step (per device), where the backend provides one."""
    try:
        analysis = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements it
        return None
    if isinstance(analysis, list | tuple):
        analysis = analysis[0] if analysis else None
    if not analysis or "flops" not in analysis:
        return None
    return float(analysis["flops"])


def _peak_memory(device: Any) -> tuple[int | None, str]:
    stats = None
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - CPU devices may not implement it
        stats = None
    if stats and "peak_bytes_in_use" in stats:
        return int(stats["peak_bytes_in_use"]), "device_peak_bytes_in_use"
    return bench_common.process_max_rss_bytes(), "process_max_rss"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; prints and returns the JSON record."""
    args = parse_args(argv)
    cpus = bench_common.limit_threads(args.threads, jax_flags=True)
    import jax

    setup = bench_common.load_setup(args, jax.default_backend())
    previous_prng = jax.config.jax_default_prng_impl
    if args.prng:
        jax.config.update("jax_default_prng_impl", args.prng)
    try:
        return _run(args, setup, cpus)
    finally:
        jax.config.update("jax_default_prng_impl", previous_prng)


def _run(
    args: argparse.Namespace, setup: bench_common.BenchSetup, cpus: list[int] | None
) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    from tw_jax.models import count_params
    from tw_jax.models.sharding import activate
    from tw_jax.runtime.run_model import build_run_model
    from tw_jax.train.flops import peak_flops_per_device
    from tw_jax.train.trainer import build_train_step

    config = setup.config
    # The trainer's construction (trainer.train), minus data, checkpoints and logging.
    run = build_run_model(config, setup.mesh_shape)
    ways = int(run.mesh.shape["data"] * run.mesh.shape["fsdp"])
    if setup.batch_size % ways:
        raise BenchError(f"batch {setup.batch_size} must divide over the mesh's {ways} "
                         "data x fsdp shards")
    step = build_train_step(
        run, config, optimizer=setup.optimizer, schedule_fn=setup.schedule_fn,
        train_steps=args.warmup + args.steps + 1, accumulate_steps=setup.accumulate_steps,
        seed=setup.seed,
    )
    batch_spec = step.batch_shardings

    with activate(run.mesh):
        params = run.init_params(setup.seed)
        opt_state = jax.jit(step.tx.init, out_shardings=step.opt_shardings)(params)
        batches = [
            {k: jax.make_array_from_process_local_data(batch_spec[k], v) for k, v in b.items()}
            for b in bench_common.synthetic_batches(setup, seed=setup.seed)
        ]
        started = time.perf_counter()
        compiled = step.lower(params, opt_state, batches[0]).compile()
        compile_s = time.perf_counter() - started
        xla_flops = _xla_flops(compiled)

        first_step_s = 0.0
        times: list[float] = []
        cpu_seconds = 0.0
        loss = float("nan")
        for index in range(args.warmup + args.steps):
            batch = batches[index % len(batches)]
            cpu_started = bench_common.process_cpu_seconds()
            started = time.perf_counter()
            params, opt_state, out = compiled(params, opt_state, jnp.int32(index),
                                              step.learning_rate(index), batch)
            jax.block_until_ready((params, opt_state, out))
            elapsed = time.perf_counter() - started
            cpu_used = bench_common.process_cpu_seconds() - cpu_started
            loss = float(out["loss"])
            if index == 0:
                first_step_s = elapsed
            if index >= args.warmup:
                times.append(elapsed)
                cpu_seconds += cpu_used

    counts = count_params(config)
    device = jax.devices()[0]
    peak = args.peak_flops or peak_flops_per_device(getattr(device, "device_kind", ""))
    peak_bytes, source = _peak_memory(device)
    record = bench_common.train_record(
        stack="jax", setup=setup, steps=args.steps, warmup=args.warmup, times=times,
        cpu_seconds=cpu_seconds, first_step_s=first_step_s, final_loss=loss,
        params_total=counts.total, params_trainable=counts.trainable, device=jax.default_backend(),
        device_kind=getattr(device, "device_kind", "unknown"), num_devices=jax.device_count(),
        peak_flops_per_device=peak, peak_memory_bytes=peak_bytes, peak_memory_source=source,
        extra={
            "compile_s": compile_s,
            "xla_flops_per_step": xla_flops,
            "mesh_shape": dict(run.mesh.shape),
            "prng_impl": str(jax.config.jax_default_prng_impl),
            "threads": args.threads,
            "cpu_affinity": cpus,
            "jax": jax.__version__,
        },
    )
    bench_common.emit(record, args.jsonl)
    return record


if __name__ == "__main__":
    sys.exit(bench_common.run_main(main))
