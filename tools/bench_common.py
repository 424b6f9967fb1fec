"""What the training and evaluation benchmarks share: the run they measure and how they report it.

The run is read from the same gin files ``tw-jax train`` uses (``base.gin``, ``models/<model>.gin``,
``methods/<method>.gin`` and a run file: ``runs/cpu_smoke.gin`` on CPU, ``runs/gpu.gin`` on GPU,
``runs/tpu.gin`` on TPU), so a benchmark measures the model, variant, freezing, optimizer,
compute dtype and rematerialisation that training would run. Only the batch size and the
feature lengths come from the command line (``--batch``, ``--seq``, ``--targets-len``), and the
data: synthetic random token batches of exactly that shape, every position real, built once and
reused (the input pipeline is not what is measured).

Feature lengths. GPT-2 and Llama: ``--seq L`` is the block length
(``TASK_FEATURE_LENGTHS = {'targets': L}``). T5: ``--seq L`` is the encoder input length and the
targets are ``--targets-len`` long, by default ``L // 4`` (salient-span targets are short; CKL's
gin pads both to 350: pass ``--targets-len 350`` for that). Without ``--seq`` the model gin
file's lengths are used, and without ``--batch`` its ``BATCH_SIZE``.

Reporting. Every script prints one JSON object on its last line of output (and appends it to
``--jsonl FILE`` when given). The training benchmarks share their field names, so rows of our
stack and of the PyTorch reference line up; :func:`train_record` builds them.

This is a helper module of ``tools/``; the scripts import it from their own folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import resource
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

MODELS: tuple[str, ...] = ("gpt2_tiny", "t5_tiny", "gpt2_large", "t5_large", "t5_small",
                           "llama_tiny", "llama3_2_1b")
METHODS: tuple[str, ...] = ("diff", "kadapter", "lora", "modular", "recadam")
RUN_FILES: dict[str, str] = {"cpu": "runs/cpu_smoke.gin", "gpu": "runs/gpu.gin",
                             "cuda": "runs/gpu.gin", "tpu": "runs/tpu.gin"}
# gin needs every macro of base.gin set; nothing is written there.
UNUSED_MODEL_DIR = "/nonexistent/tw_jax_bench"
# runs/gpu.gin and runs/tpu.gin leave TRAIN_STEPS to the experiment file; a benchmark builds its
# step with its own count of steps, so this only lets train()'s bindings be read.
UNUSED_TRAIN_STEPS = 10_000


class BenchError(RuntimeError):
    """A benchmark that cannot run as asked (shown as one line, exit status 2)."""


@dataclasses.dataclass
class BenchSetup:
    """The run a benchmark measures, as gin resolves it."""

    model_name: str
    method: str
    config: Any  # GPT2Config | T5Config | LlamaConfig, with the method's variant and freeze
    lengths: dict[str, int]  # task feature lengths, as TASK_FEATURE_LENGTHS
    batch_size: int
    optimizer: Any  # the run's optimizer config (tw_jax.train.optimizers: AdamWConfig ...)
    schedule_fn: Callable[..., Any] | None
    base_lr: float
    accumulate_steps: int
    mesh_shape: tuple[int, ...]
    seed: int
    gin_files: list[str]
    gin_bindings: list[str]

    @property
    def has_encoder(self) -> bool:
        """An encoder-decoder family (T5): its batches carry inputs and targets."""
        from tw_jax.models import model_for
        from tw_jax.models.base import EncoderDecoderModel

        return isinstance(model_for(self.config), EncoderDecoderModel)

    @property
    def model_lengths(self) -> dict[str, int]:
        """``{"encoder": L_in, "decoder": L_out}`` (T5) or ``{"decoder": L}`` (GPT-2)."""
        from tw_jax.models import model_for

        return model_for(self.config).feature_lengths(self.lengths)

    @property
    def tokens_per_step(self) -> int:
        """All input and target tokens of one step (the trainer's ``real_tokens``)."""
        return self.batch_size * sum(self.model_lengths.values())


def add_run_arguments(parser: argparse.ArgumentParser, *, shapes: bool = True) -> None:
    """The options that pick the run: model, method, run file, extra gin, shapes."""
    parser.add_argument("--model", choices=MODELS, default="gpt2_tiny",
                        help="model gin file (gin/models/MODEL.gin)")
    parser.add_argument("--method", choices=METHODS, default="diff",
                        help="method gin file (gin/methods/METHOD.gin)")
    parser.add_argument("--run", default="auto",
                        help="run gin file; 'auto': runs/cpu_smoke.gin on CPU, runs/gpu.gin on "
                             "GPU, runs/tpu.gin on TPU; 'none': no run file")
    parser.add_argument("--gin_file", action="append", default=[], metavar="FILE",
                        help="extra gin file after the others (repeatable)")
    parser.add_argument("--gin", action="append", default=[], metavar="KEY=VALUE",
                        help="extra gin binding, last (repeatable), e.g. "
                             "--gin tw_jax.models.ModelSettings.remat=False")
    if shapes:
        parser.add_argument("--batch", type=int, default=None,
                            help="global batch size (default: the model gin's BATCH_SIZE)")
        parser.add_argument("--seq", type=int, default=None,
                            help="GPT-2 block length / T5 input length (default: the gin's)")
        parser.add_argument("--targets-len", type=int, default=None,
                            help="T5 target length (default: --seq // 4, or the gin's)")
    parser.add_argument("--threads", type=int, default=None,
                        help="pin the process to this many CPUs and size the compute "
                             "library's threads to them; default: the library's own choice")
    parser.add_argument("--seed", type=int, default=None,
                        help="parameter and data seed (default: the gin's SEED)")
    parser.add_argument("--jsonl", default=None, metavar="FILE",
                        help="also append the JSON line to FILE")


def limit_threads(threads: int | None, *, jax_flags: bool) -> list[int] | None:
    """Confine this process to ``threads`` CPUs; returns the CPUs, or None when not asked.

    The process is pinned to the first ``threads`` CPUs it may use (``sched_setaffinity``): the
    only limit that holds for every thread pool of a library (XLA's CPU runtime keeps pools that
    ``XLA_FLAGS`` does not size). With ``jax_flags`` XLA is also told to use that many intra-op
    threads (one: no Eigen pool); XLA reads both when its backend starts, so this must run
    before jax computes anything (run the script as its own process). PyTorch callers also call
    ``torch.set_num_threads``.
    """
    if not threads:
        return None
    if threads < 1:
        raise BenchError(f"--threads must be >= 1, got {threads}")
    if jax_flags and "jax" in sys.modules:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            raise BenchError("--threads must be set before jax starts: run the script as a "
                             "process of its own")
    cpus: list[int] | None = None
    if hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        if threads > len(allowed):
            raise BenchError(f"--threads {threads}: this process may use {len(allowed)} CPUs")
        cpus = allowed[:threads]
        os.sched_setaffinity(0, cpus)
    if jax_flags:
        extra = f"intra_op_parallelism_threads={threads}"
        if threads == 1:
            extra = f"--xla_cpu_multi_thread_eigen=false {extra}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {extra}".strip()
    return cpus


def run_file_for(choice: str, platform_name: str) -> str | None:
    """The run gin file for ``--run`` on a platform (``cpu``, ``gpu``/``cuda``, ``tpu``)."""
    if choice == "none":
        return None
    if choice != "auto":
        return choice
    return RUN_FILES.get(platform_name, RUN_FILES["cpu"])


def load_setup(args: argparse.Namespace, platform_name: str) -> BenchSetup:
    """Parse the gin files of ``args`` and resolve the run (config, optimizer, lengths, batch)."""
    import gin

    from tw_jax.models import model_for
    from tw_jax.models.base import EncoderDecoderModel
    from tw_jax.runtime import gin_setup
    from tw_jax.train.gin_config import train_config

    files = ["base.gin", f"models/{args.model}.gin", f"methods/{args.method}.gin"]
    run_file = run_file_for(args.run, platform_name)
    if run_file:
        files.append(run_file)
    files += list(args.gin_file)
    bindings = [f"MODEL_DIR={UNUSED_MODEL_DIR}", *args.gin]
    try:
        # The compiled step alone: no input pipeline, so seqio and TensorFlow need not be
        # installed (an accelerator image has JAX, not TensorFlow).
        gin_setup.parse(files, bindings, input_pipeline=False)
        if gin_setup.macro("TRAIN_STEPS") is None:
            bindings.append(f"TRAIN_STEPS={UNUSED_TRAIN_STEPS}")
            gin_setup.parse(files, bindings, input_pipeline=False)
        train_args = gin.get_bindings("tw_jax.train.train")
        optimizer = train_config().optimizer
        schedule = gin.get_bindings("tw_jax.train.make_schedule")
    except (gin_setup.GinConfigError, ValueError, TypeError) as error:
        raise BenchError(f"gin: {error}") from error
    config = train_args["model_config"]
    _check_method(args.method, config)
    lengths = dict(train_args["task_feature_lengths"])
    batch = int(train_args["batch_size"])
    if getattr(args, "batch", None) is not None:
        batch = args.batch
    model = model_for(config)
    has_encoder = isinstance(model, EncoderDecoderModel)
    if getattr(args, "seq", None) is not None:
        if has_encoder:
            lengths = {"inputs": args.seq, "targets": max(args.seq // 4, 1)}
        else:
            lengths = {"targets": args.seq}
    if getattr(args, "targets_len", None) is not None:
        if not has_encoder:
            raise BenchError("--targets-len is for T5; a decoder's block length is --seq")
        lengths["targets"] = args.targets_len
    if batch < 1 or min(lengths.values()) < 1:
        raise BenchError(f"batch and lengths must be positive: batch={batch}, lengths={lengths}")
    if not has_encoder and lengths["targets"] + lengths.get("inputs", 0) > model.max_length:
        raise BenchError(f"--seq {lengths['targets']} exceeds the model's "
                         f"{model.max_length} positions")
    return BenchSetup(
        model_name=args.model, method=args.method, config=config, lengths=lengths,
        batch_size=batch, optimizer=optimizer, schedule_fn=train_args.get("schedule_fn"),
        base_lr=float(schedule.get("base_lr", 1e-3)),
        accumulate_steps=int(train_args.get("accumulate_steps", 1)),
        mesh_shape=tuple(train_args.get("mesh_shape", (-1, 1, 1))),
        seed=int(train_args.get("seed", 0)) if args.seed is None else args.seed,
        gin_files=files, gin_bindings=list(args.gin),
    )


def _check_method(method: str, config: Any) -> None:
    """Refuse a method the model has no form of, rather than measuring plain training."""
    if method == "modular" and not hasattr(config, "modular"):
        raise BenchError("method 'modular' is CKL's T5 method; GPT-2 has no Modular variant "
                         "(gin/methods/modular.gin binds T5Config only)")


def synthetic_batches(setup: BenchSetup, count: int = 2, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """``count`` random batches of the trainer's model features, every position a real token.

    GPT-2: ``decoder_input_tokens`` a random row, ``decoder_target_tokens`` it shifted left
    (the last target random), loss on every position. T5: random encoder inputs and targets,
    decoder inputs the targets shifted right after the decoder start id.
    """
    rng = np.random.default_rng(seed)
    vocab = setup.config.vocab_size
    b = setup.batch_size
    out = []
    for _ in range(count):
        if setup.has_encoder:
            l_in, l_out = setup.lengths["inputs"], setup.lengths["targets"]
            targets = rng.integers(0, vocab, (b, l_out), dtype=np.int32)
            start = np.full((b, 1), setup.config.decoder_start_token_id, np.int32)
            batch = {
                "encoder_input_tokens": rng.integers(0, vocab, (b, l_in), dtype=np.int32),
                "encoder_mask": np.ones((b, l_in), np.int32),
                "decoder_input_tokens": np.concatenate([start, targets[:, :-1]], axis=1),
                "decoder_target_tokens": targets,
                "decoder_loss_weights": np.ones((b, l_out), np.int32),
                "decoder_mask": np.ones((b, l_out), np.int32),
            }
        else:
            length = setup.lengths["targets"] + setup.lengths.get("inputs", 0)
            row = rng.integers(0, vocab, (b, length + 1), dtype=np.int32)
            batch = {
                "decoder_input_tokens": row[:, :-1],
                "decoder_target_tokens": row[:, 1:],
                "decoder_loss_weights": np.ones((b, length), np.int32),
                "decoder_mask": np.ones((b, length), np.int32),
            }
        out.append({k: np.ascontiguousarray(v) for k, v in batch.items()})
    return out


def step_time_stats(times: Sequence[float]) -> dict[str, float]:
    """Median and spread of per-step wall times (seconds)."""
    if not times:
        raise BenchError("no timed steps")
    values = np.asarray(times, np.float64)
    return {
        "step_time_median_s": float(np.median(values)),
        "step_time_mean_s": float(values.mean()),
        "step_time_p10_s": float(np.percentile(values, 10)),
        "step_time_p90_s": float(np.percentile(values, 90)),
        "step_time_min_s": float(values.min()),
        "step_time_max_s": float(values.max()),
        "step_time_stdev_s": float(statistics.pstdev(values.tolist())),
    }


def process_max_rss_bytes() -> int:
    """The process's peak resident set (Linux reports KiB, macOS bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def train_record(
    *,
    stack: str,
    setup: BenchSetup,
    steps: int,
    warmup: int,
    times: Sequence[float],
    cpu_seconds: float | None,
    first_step_s: float,
    final_loss: float,
    params_total: int,
    params_trainable: int,
    device: str,
    device_kind: str,
    num_devices: int,
    peak_flops_per_device: float | None,
    peak_memory_bytes: int | None,
    peak_memory_source: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One training benchmark's JSON fields (the same for every stack).

    ``tokens_per_second`` is timed tokens over the summed wall time of the timed steps (each step
    synchronised, as the trainer synchronises on its loss); MFU is the model FLOP rate
    (:mod:`tw_jax.train.flops`) at that throughput over the devices' peak, null without a peak.
    ``cpu_time_per_step_s`` (the process's user + system seconds over the timed steps, per step)
    and ``load_average_1m`` tell, on a shared CPU, work done from time spent waiting for a core.
    """
    from tw_jax.train.flops import mfu, train_step_flops

    flops = train_step_flops(setup.config, setup.batch_size, setup.lengths)
    stats = step_time_stats(times)
    total = float(sum(times))
    tokens_per_second = setup.tokens_per_step * len(times) / total
    flops_per_second = flops.total * len(times) / total
    record: dict[str, Any] = {
        "stack": stack,
        "model": setup.model_name,
        "method": setup.method,
        "device": device,
        "device_kind": device_kind,
        "num_devices": num_devices,
        "date": datetime.date.today().isoformat(),
        "dtype": setup.config.dtype,
        "param_dtype": setup.config.param_dtype,
        "remat": bool(setup.config.remat),
        "freeze": _freeze_policy(setup.config),
        "optimizer": setup.optimizer.name,
        "clip_norm": setup.optimizer.clip_norm,
        "batch": setup.batch_size,
        "lengths": setup.model_lengths,
        "tokens_per_step": setup.tokens_per_step,
        "steps": len(times),
        "warmup": warmup,
        "first_step_s": first_step_s,
        **stats,
        "tokens_per_second": tokens_per_second,
        "cpu_time_per_step_s": None if cpu_seconds is None else cpu_seconds / len(times),
        "load_average_1m": load_average(),
        "params_total": int(params_total),
        "params_trainable": int(params_trainable),
        "flops_per_token": flops.per_token,
        "flops_per_step": flops.total,
        "flops_forward_per_step": flops.forward,
        "model_flops_per_second": flops_per_second,
        "peak_flops_per_second": (
            peak_flops_per_device * num_devices if peak_flops_per_device else None
        ),
        "mfu": mfu(flops_per_second, peak_flops_per_device, num_devices),
        "peak_memory_bytes": peak_memory_bytes,
        "peak_memory_source": peak_memory_source,
        "final_loss": final_loss if math.isfinite(final_loss) else None,
        "gin_files": setup.gin_files,
        "gin_bindings": setup.gin_bindings,
        "python": platform.python_version(),
    }
    if extra:
        record.update(extra)
    if steps != len(times):
        raise BenchError(f"timed {len(times)} steps, expected {steps}")
    return record


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def load_average() -> float | None:
    """The 1-minute load average: on a shared machine, how contended the run was."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _freeze_policy(config: Any) -> str:
    from tw_jax.models.variants import freeze_policy

    return freeze_policy(config)


def emit(record: Mapping[str, Any], jsonl: str | None = None) -> None:
    """Print the record as the last line of output; append it to ``jsonl`` too when given."""
    line = json.dumps(record, sort_keys=False)
    if jsonl:
        path = Path(jsonl)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    print(line, flush=True)


def run_main(main: Callable[[Sequence[str] | None], Any], argv: Sequence[str] | None = None) -> int:
    """Run a benchmark's ``main``: a :class:`BenchError` is one line on stderr and status 2."""
    try:
        main(argv)
    except BenchError as error:
        print(f"{Path(sys.argv[0]).name}: error: {error}", file=sys.stderr)
        return 2
    return 0
