"""One model, two trainers: ``tw-jax train`` and the real ``python -m t5x.train`` from the same
checkpoint on the same batches, step by step (docs/t5x.md, "The same numbers").

    TW_JAX_DATA_DIR=demo_out/data .venv/bin/python tools/t5x_parity.py --model t5-kadapter
    ... --model gpt2-lora --steps 8 --t5x-optimizer adafactor     # T5X's own Adafactor

The start: the model's initial parameters with its method's new ones (adapters, LoRA) drawn
away from their initialisation (LoRA's B is zero there, which would hide LoRA from the first
steps), written as a tw_jax checkpoint and converted with ``tw-jax t5x-checkpoint to-t5x``.
Both trainers then run
``--steps`` steps from it with dropout off (the two draw dropout masks from different RNG
streams), tw_jax's loss normalisation (T5X: ``NUM_REAL_TARGET_TOKENS``, gin/t5x/train_wiring.gin), no
z-loss, unpacked batches (T5X's run files pack by default) in the same order (seqio, shuffled with seed 0) and, by default, the
same optax chain and schedule (T5X through ``OptaxWrapper``). Prints one row per step and, last,
one JSON line: ``{"tw_jax": [...], "t5x": [...], "first_step_rel": ..., "max_rel": ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# model -> (tw-jax experiment file, T5X method file, model file, task, the binding that turns
# dropout off: the losses of two trainers agree only without it)
MODELS = {
    "t5-kadapter": ("kadapter.gin", "t5x/kadapter.gin", "models/t5_tiny.gin",
                    "twiki_diffset_0809_ssm", "tw_jax.models.T5Config.dropout_rate=0.0"),
    "gpt2-lora": ("lora.gin", "t5x/lora.gin", "models/gpt2_tiny.gin",
                  "twiki_diffset_0809_lm", "tw_jax.models.GPT2Config.dropout_rate=0.0"),
    # the open-LLM families behind T5X's DecoderOnlyModel: a tiny Llama (grouped-query heads)
    "llama-lora": ("lora.gin", "t5x/lora.gin", "models/llama_tiny.gin",
                   "twiki_diffset_0809_lm", "tw_jax.models.LlamaConfig.attention_dropout=0.0"),
}


def _run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed:\n{done.stderr[-4000:]}")


def _common(model: str) -> list[str]:
    _, _, model_file, task, no_dropout = MODELS[model]
    return [f"--gin_file={model_file}", "--gin_file=runs/cpu_smoke.gin",
            f"--gin.MIXTURE_OR_TASK_NAME='{task}'", f"--gin.{no_dropout}"]


def model_config(model: str):
    """The model the gin files of ``model`` build (both trainers read the same files)."""
    from tw_jax.runtime import gin_setup

    experiment, _, model_file, _, no_dropout = MODELS[model]
    gin_setup.parse([experiment, model_file, "runs/cpu_smoke.gin"], [no_dropout])
    return gin_setup.model_config()


def write_start(model: str, model_dir: Path, seed: int = 0) -> str:
    """A tw_jax checkpoint (step 0) of ``model``'s initial parameters, its method's new
    parameters moved off their initialisation."""
    import flax.linen as nn
    import jax

    from tw_jax.models import model_for
    from tw_jax.models.variants import is_new_parameter, path_names
    from tw_jax.runtime.checkpoints import save_params

    tw_model = model_for(model_config(model))
    boxed = tw_model.module.init(jax.random.key(seed), *tw_model.dummy_inputs(2, 8))
    params = nn.unbox(boxed["params"])
    key = jax.random.key(seed + 1)

    def moved(path, value):
        if not is_new_parameter(path_names(path)):
            return value
        noise = jax.random.normal(jax.random.fold_in(key, zlib.crc32('/'.join(path_names(path)).encode())),
                                  value.shape, value.dtype)
        return value + 0.02 * noise

    params = jax.device_get(jax.tree_util.tree_map_with_path(moved, params))
    return save_params(model_dir, 0, params, {"step": 0, "source": "tools/t5x_parity.py"})


def tw_jax_train(model: str, model_dir: Path, steps: int, env: dict[str, str],
                 start: Path | None = None) -> list[float]:
    """Per-step losses of ``tw-jax train`` (``start``: INITIAL_CHECKPOINT_PATH)."""
    experiment = MODELS[model][0]
    command = [sys.executable, "-m", "tw_jax.cli", "train", f"--gin_file={experiment}",
               *_common(model), f"--gin.MODEL_DIR='{model_dir}'", f"--gin.TRAIN_STEPS={steps}",
               "--gin.LOG_PERIOD=1", "--gin.tw_jax.train.train.progress=False"]
    if start is not None:
        command.append(f"--gin.INITIAL_CHECKPOINT_PATH='{start}'")
    _run(command, env)
    rows = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
    return [float(row["loss"]) for row in rows if "loss" in row]


def t5x_train(model: str, model_dir: Path, steps: int, start: Path, env: dict[str, str],
              optimizer: str = "optax") -> list[float]:
    """Per-step losses of ``python -m t5x.train`` from the T5X checkpoint ``start``."""
    command = [sys.executable, "-m", "t5x.train", "--gin_search_paths=gin",
               f"--gin_file={MODELS[model][1]}", *_common(model),
               f"--gin.MODEL_DIR='{model_dir}'", f"--gin.TRAIN_STEPS={steps}",
               f"--gin.INITIAL_CHECKPOINT_PATH='{start}'",
               "--gin.train/utils.DatasetConfig.seed=0",
               "--gin.train/utils.DatasetConfig.pack=False"]
    if optimizer == "adafactor":
        command.append("--gin.tw_jax.t5x.model.optimizer_def=@tw_jax.t5x.adafactor()")
    _run(command, env)
    return t5x_losses(model_dir)


def t5x_losses(model_dir: Path) -> list[float]:
    """The ``loss`` scalar of every step in T5X's TensorBoard files (MODEL_DIR/train)."""
    import tensorflow as tf

    by_step: dict[int, float] = {}
    for events in sorted((model_dir / "train").glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                if value.tag == "loss":
                    number = (float(tf.make_ndarray(value.tensor)) if value.HasField("tensor")
                              else float(value.simple_value))
                    by_step[int(event.step)] = number
    return [by_step[step] for step in sorted(by_step)]


def parity(model: str, work: Path, steps: int = 8, optimizer: str = "optax",
           env: dict[str, str] | None = None) -> dict:
    """Both trainers' per-step losses from one converted start, and their relative gaps."""
    from tw_jax.t5x.checkpoints import to_t5x

    env = dict(os.environ if env is None else env)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TPU_SKIP_MDS_QUERY", "1")
    start = work / "start"
    write_start(model, start)
    t5x_start = to_t5x(start, work / "start_t5x")
    ours = tw_jax_train(model, work / "tw_jax", steps, env, start=start)
    theirs = t5x_train(model, work / "t5x", steps, Path(t5x_start), env, optimizer)
    gaps = [abs(a - b) / abs(a) for a, b in zip(ours, theirs, strict=True)]
    return {"model": model, "optimizer": optimizer, "tw_jax": ours, "t5x": theirs,
            "first_step_rel": gaps[0], "max_rel": max(gaps)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="t5-kadapter")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--t5x-optimizer", choices=("optax", "adafactor"), default="optax",
                        help="T5X's optimizer: tw_jax's optax chain (default) or T5X's "
                             "Adafactor (tw_jax.t5x.adafactor)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the runs")
    args = parser.parse_args(argv)
    import tempfile

    work = args.work or Path(tempfile.mkdtemp(prefix="t5x_parity_"))
    result = parity(args.model, work, args.steps, args.t5x_optimizer)
    print(f"{'step':>4}  {'tw-jax train':>14}  {'t5x.train':>14}  {'rel. gap':>9}")
    for step, (a, b) in enumerate(zip(result["tw_jax"], result["t5x"], strict=True), 1):
        print(f"{step:>4}  {a:>14.7f}  {b:>14.7f}  {abs(a - b) / abs(a):>9.2e}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
