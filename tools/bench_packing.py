"""Real tokens per second of ``tw-jax train``'s step with packed and unpacked rows, on a task.

    TW_JAX_DATA_DIR=demo_out/data python tools/bench_packing.py \\
        --gin_file=kadapter.gin --gin_file=models/t5_tiny.gin --gin_file=runs/cpu_smoke.gin \\
        --task twiki_diffset_0809_ssm --steps 20

The same train step the trainer runs (:func:`tw_jax.train.trainer.build_train_step`) on the
task's batches (:func:`tw_jax.runtime.task_data.batches`) with ``pack`` off, then on: a packed row
holds as many examples as fit (seqio's packing, segment ids and positions), so a step of the same
shape carries more real tokens. Real tokens are the unmasked encoder and decoder positions
(``encoder_mask`` + ``decoder_mask``); examples are rows unpacked, segments packed. After
``--warmup`` steps (compilation included), ``--steps`` steps are timed, each synchronised on its
loss as the trainer is. One JSON line per mode, then one with the ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gin_file", action="append", required=True)
    parser.add_argument("--gin", action="append", default=[], metavar="BINDING",
                        help="a gin binding, KEY=VALUE (repeatable)")
    parser.add_argument("--task", default=None, help="task or mixture (default: the gin's)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    return parser.parse_args(argv)


def measure(config: Any, task: str, pack: bool, steps: int, warmup: int) -> dict[str, Any]:
    import jax

    from tw_jax.models.sharding import activate, global_batch
    from tw_jax.runtime import task_data
    from tw_jax.runtime.run_model import build_run_model
    from tw_jax.train.trainer import build_train_step

    run = build_run_model(config.model_config, config.mesh_shape)
    step_fn = build_train_step(
        run, config.model_config, optimizer=config.optimizer,
        schedule_fn=config.schedule_fn, train_steps=max(steps + warmup, 4),
        accumulate_steps=1, seed=config.seed, pack=pack)
    stream = task_data.batches(task, config.task_feature_lengths, config.batch_size, run.model,
                          seed=config.seed, pack=pack)
    real = examples = 0
    with activate(run.mesh):
        params = run.init_params(config.seed)
        opt_state = jax.jit(step_fn.tx.init, out_shardings=step_fn.opt_shardings)(params)
        started = None
        for step in range(warmup + steps):
            if step == warmup:
                started = time.perf_counter()
            host = next(stream)
            batch = global_batch(host, run.mesh)
            params, opt_state, out = step_fn(params, opt_state, step, batch)
            jax.device_get(out["loss"])
            if step >= warmup:
                real += int(np.sum(host["decoder_mask"])) + int(np.sum(host.get("encoder_mask", 0)))
                segments = host.get("decoder_segment_ids")
                examples += (int(sum(int(row.max()) for row in segments)) if segments is not None
                             else len(host["decoder_mask"]))
        seconds = time.perf_counter() - started
    return {"pack": pack, "task": task, "steps": steps, "batch_size": config.batch_size,
            "task_feature_lengths": dict(config.task_feature_lengths),
            "real_tokens_per_second": real / seconds, "examples_per_second": examples / seconds,
            "steps_per_second": steps / seconds, "real_tokens_per_step": real / steps,
            "examples_per_step": examples / steps, "device": jax.devices()[0].device_kind}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from tw_jax.runtime import gin_setup
    from tw_jax.runtime.task_data import ensure_tasks, task_name
    from tw_jax.train.gin_config import train_config

    gin_setup.parse(args.gin_file, [*args.gin, "MODEL_DIR='unused'", "TRAIN_STEPS=1"])
    config = train_config()
    task = task_name(args.task or config.mixture_or_task_name, config.model_config)
    ensure_tasks(task)
    rows = [measure(config, task, pack, args.steps, args.warmup) for pack in (False, True)]
    for row in rows:
        print(json.dumps(row))
    print(json.dumps({"packed_over_unpacked_real_tokens_per_second":
                      rows[1]["real_tokens_per_second"] / rows[0]["real_tokens_per_second"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
