"""``tw-jax lifelong --trainer t5x``: the real ``python -m t5x.train`` trains every month, each
month starts from the previous month's T5X checkpoint, and tw_jax's evaluators score what T5X
trained (converted bit for bit); a rerun does nothing and another trainer on the same OUT is
refused. The months are periods named with years that cross one (``2021-12_2022-01``), so T5X
trains the tasks those names register (``twiki_diffset_202112_202201_lm``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from dated_data import dated_copy

from tw_jax import lifelong_cli
from tw_jax.cli_parser import OneLineErrorParser
from tw_jax.evaluate.groups import TRAINS_ON
from tw_jax.lifelong.updates import TwJaxTrainer
from tw_jax.methods import T5X_METHODS
from tw_jax.runtime import gin_setup
from tw_jax.t5x.lifelong import T5XTrainer, T5XTrainingError, t5x_gin_files
from tw_jax.tasks import names
from tw_jax.time import Period
from tw_jax.train.gin_config import train_config

ROOT = Path(__file__).resolve().parents[2]
STEPS = 2
MONTHS = ("2021-11_2021-12", "2021-12_2022-01")  # the session's 0809 and 0910, dated


def test_the_t5x_files_of_a_method_are_its_t5x_file_and_the_model_and_run_files_it_includes(
        tmp_path):
    assert t5x_gin_files(["kadapter.gin", "models/t5_tiny.gin", "runs/cpu_smoke.gin"]) == [
        "t5x/kadapter.gin", "models/t5_large.gin", "runs/tpu.gin", "models/t5_tiny.gin",
        "runs/cpu_smoke.gin"]
    # initial.gin includes diff.gin, whose model and run files it carries
    assert t5x_gin_files(["initial.gin"]) == ["t5x/initial.gin", "models/t5_large.gin",
                                              "runs/tpu.gin"]
    for method in {*T5X_METHODS, "initial"}:  # every method T5X runs has its T5X file
        assert t5x_gin_files([f"{method}.gin"])[0] == f"t5x/{method}.gin"
    for method in set(TRAINS_ON) - set(T5X_METHODS):  # the others: one line naming tw-jax train
        with pytest.raises(gin_setup.GinConfigError, match="only tw-jax's trainer runs"):
            t5x_gin_files([f"{method}.gin"])
    with pytest.raises(gin_setup.GinConfigError, match="no T5X gin file t5x/mine.gin"):
        t5x_gin_files([str(_write(tmp_path / "mine.gin", "include 'diff.gin'\n"))])


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_runner_decides_task_steps_start_and_data_after_the_users_bindings(tmp_path):
    gin_setup.parse(["lora.gin", "models/gpt2_tiny.gin"], ["TRAIN_STEPS=7"])
    run = train_config()
    trainer = T5XTrainer(gin_bindings=["BATCH_SIZE=3", "TRAIN_EPOCHS=1", "MODEL_DIR=/x"])
    command = trainer.command(run, ["lora.gin", "models/gpt2_tiny.gin"], "/out/t5x",
                              "twiki_diffset_0910_{objective}", "/start/checkpoint_2", "/data")
    assert command[:3] == [sys.executable, "-m", "t5x.train"]
    files = [arg.split("=", 1)[1] for arg in command if arg.startswith("--gin_file=")]
    assert files == ["t5x/lora.gin", "models/t5_large.gin", "runs/tpu.gin",
                     "models/gpt2_tiny.gin"]
    bindings = [arg.split("=", 1)[1] for arg in command if arg.startswith("--gin_bindings=")]
    assert bindings == [  # the user's, less what the runner sets; then the runner's
        "BATCH_SIZE = 3", "MODEL_DIR = '/out/t5x'",
        "MIXTURE_OR_TASK_NAME = 'twiki_diffset_0910_lm'", "TRAIN_STEPS = 7",
        "INITIAL_CHECKPOINT_PATH = '/start/checkpoint_2'", "DATA_DIR = '/data'"]


def test_a_failed_t5x_run_is_an_error_with_its_log(tmp_path):
    fake = _write(tmp_path / "python", "#!/bin/sh\necho 'step 0' ; echo 'boom: bad gin' >&2\n"
                                       "exit 3\n")
    fake.chmod(0o755)
    gin_setup.parse(["lora.gin", "models/gpt2_tiny.gin"], ["TRAIN_STEPS=2"])
    run = train_config()
    with pytest.raises(T5XTrainingError, match=r"(?s)exited with 3 .*boom: bad gin"):
        T5XTrainer(python=str(fake)).train(run, ["lora.gin"], str(tmp_path / "run"),
                                           "twiki_diffset_0809_lm", None, "/data")
    assert "boom: bad gin" in (tmp_path / "run" / "t5x_train.log").read_text()


def _cli(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="tw-jax")
    lifelong_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def _flat(tree) -> dict[str, np.ndarray]:
    from flax import traverse_util

    return traverse_util.flatten_dict(tree, sep="/")


def _t5x(checkpoint: Path) -> dict[str, np.ndarray]:
    from tw_jax.t5x.checkpoints import read_t5x_params

    return _flat(read_t5x_params(checkpoint))


def _same(a: dict, b: dict) -> bool:
    return sorted(a) == sorted(b) and all(np.array_equal(a[n], b[n]) for n in a)


@pytest.fixture()
def t5x_env(train_data, compile_cache, monkeypatch):
    pytest.importorskip("t5x")
    for name, value in {"TW_JAX_T5_VOCAB": train_data["t5"],
                        "TW_JAX_GPT2_VOCAB": train_data["gpt2"],
                        "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1",
                        "TF_CPP_MIN_LOG_LEVEL": "2",
                        "JAX_COMPILATION_CACHE_DIR": compile_cache}.items():
        monkeypatch.setenv(name, str(value))
    return train_data


def _initial(folder: Path) -> Path:
    """INITIAL: a plain GPT-2 tiny (no LoRA), as tw_jax writes a checkpoint."""
    import flax.linen as nn
    import jax

    from tw_jax.models import model_for
    from tw_jax.runtime.checkpoints import save_params

    gin_setup.parse(["initial.gin", "models/gpt2_tiny.gin"])
    model = model_for(gin_setup.model_config())
    params = nn.unbox(model.module.init(jax.random.key(0), *model.dummy_inputs(2, 8))["params"])
    save_params(folder, 0, jax.device_get(params), {"step": 0})
    return folder


def test_lifelong_with_t5x_chains_the_months_on_t5xs_checkpoints(tmp_path, t5x_env):
    from tw_jax.runtime.checkpoints import read_params

    initial = _initial(tmp_path / "initial")
    out = tmp_path / "out"
    data = dated_copy(t5x_env["data_dir"], tmp_path / "data")
    argv = ["lifelong", "--trainer", "t5x", "--gin_file=lora.gin",
            "--gin_file=models/gpt2_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
            f"--gin.TRAIN_STEPS={STEPS}", "--gin.BATCH_SIZE=2", "--gin.SCHEDULE=constant",
            "--months", ",".join(MONTHS), "--data", str(data),
            "--out", str(out), "--initial-checkpoint", str(initial),
            "--max-probes", "8", "--eval-batch-size", "8"]
    assert _cli(argv) == 0

    runs = {m: out / "checkpoints" / "lora" / m for m in MONTHS}
    states = {m: json.loads((out / "state" / "lora" / f"{m}.json").read_text()) for m in MONTHS}
    last = {m: runs[m] / "t5x" / f"checkpoint_{STEPS}" for m in MONTHS}
    for month in MONTHS:  # each update counts its own steps from 0, as tw-jax train's do
        assert states[month]["trainer"] == "t5x"
        assert states[month]["task"] == names.diffset(Period.parse(month))
        assert states[month]["t5x_checkpoint"] == str(last[month])
        # what tw_jax scored is what T5X trained, bit for bit
        assert _same(_flat(read_params(runs[month])), _t5x(last[month]))

    first, second = MONTHS
    # the first starts from INITIAL converted for T5X; its LoRA parameters start from scratch
    start = _t5x(runs[first] / "t5x" / "checkpoint_0")
    given = _flat(read_params(initial))
    lora = {n for n in start if n.endswith(("lora_a", "lora_b"))}
    assert lora and set(start) - lora == set(given)
    assert all(np.array_equal(start[n], given[n]) for n in given)
    # the second continues from the first's last T5X checkpoint (its trained LoRA included),
    # and only LoRA moves
    start = _t5x(runs[second] / "t5x" / "checkpoint_0")
    assert states[second]["t5x_start"] == str(last[first])
    assert _same(start, _t5x(last[first]))
    end = _t5x(last[second])
    assert {n for n in start if not np.array_equal(start[n], end[n])} == lora

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    scored = {(r["method"], r["trained_through"], r["eval_month"]) for r in rows
              if r["metric"] == "ppl"}
    assert scored == {("initial", "base", first), ("initial", "base", second),
                      ("lora", first, first), ("lora", second, second)}
    assert all(np.isfinite(r["value"]) and r["value"] > 1 for r in rows if r["metric"] == "ppl")
    seconds = {r["trained_through"] for r in rows if r["metric"] == "train_seconds"}
    assert seconds == set(MONTHS)

    before = (out / "results.jsonl").read_text()
    assert _cli(argv) == 0  # finished: nothing trained or scored again
    assert (out / "results.jsonl").read_text() == before
    assert _cli([a if a != "t5x" else "tw_jax" for a in argv]) == 2  # one chain, one trainer


def test_another_trainer_does_not_continue_a_t5x_chain(tmp_path):
    from tw_jax.lifelong.runner import LifelongError, check_trainer
    from tw_jax.lifelong.state import UpdateState

    check_trainer("s.json", UpdateState("m", trainer="t5x"), T5XTrainer())
    with pytest.raises(LifelongError, match="trained by t5x, and this run trains with tw_jax"):
        check_trainer("s.json", UpdateState("m", trainer="t5x"), TwJaxTrainer())
    with pytest.raises(LifelongError, match="trained by tw_jax"):  # states before trainers
        check_trainer("s.json", UpdateState("m"), T5XTrainer())
