"""The optimizer configs give the very updates of the flat ``make_optimizer`` they replace, gin
builds them, and an old binding is either still understood or an error naming the new one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tw_jax.runtime import gin_setup
from tw_jax.train.config import gin_lines
from tw_jax.train.gin_config import train_config
from tw_jax.train.optimizers import (
    AdafactorConfig,
    AdamWConfig,
    RecAdamConfig,
    SGDConfig,
    make_optimizer,
    resolve,
)
from tw_jax.train.schedules import make_schedule

SMOKE = ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"]

# Each config with its make_optimizer call of commit 6115122 (main, before the configs).
CASES = {
    # make_optimizer("adafactor", ..., adafactor_min_dim_size_to_factor=2, weight_decay=0.01)
    "adafactor": AdafactorConfig(min_dim_size_to_factor=2, weight_decay=0.01),
    # ("adafactor", ..., adafactor_min_dim_size_to_factor=2, adafactor_as_matrices=False,
    #  adafactor_momentum=0.9, adafactor_decay_rate=0.7, adafactor_clipping_threshold=None)
    "adafactor_per_axis": AdafactorConfig(min_dim_size_to_factor=2, as_matrices=False,
                                          momentum=0.9, decay_rate=0.7, clipping_threshold=None),
    # ("adamw", ..., weight_decay=0.1, b1=0.8, b2=0.99, eps=1e-6, clip_norm=0.5)
    "adamw": AdamWConfig(weight_decay=0.1, b1=0.8, b2=0.99, eps=1e-6, clip_norm=0.5),
    # ("recadam", ..., recadam_gamma=50.0, recadam_k=1.0, recadam_t0=1.0, weight_decay=0.01,
    #  accumulate_steps=2)
    "recadam": RecAdamConfig(gamma=50.0, k=1.0, t0=1.0, weight_decay=0.01),
    # ("recadam", ..., recadam_anneal="linear", recadam_total_steps=4, recadam_t0=0.5,
    #  recadam_k=0.5)
    "recadam_fraction": RecAdamConfig(anneal="linear", total_steps=4, t0=0.5, k=0.5),
    # ("sgd", ..., clip_norm=1.0, labels={"b": "frozen", "w": "trainable"})
    "sgd": SGDConfig(clip_norm=1.0),
}
ACCUMULATE = {"recadam": 2}
LABELS = {"sgd": {"b": "frozen", "w": "trainable"}}

# The parameters after 4 updates, as make_optimizer gave them (float32, shortest repr; the
# schedule and gradients of the test below).
EXPECTED = json.loads((Path(__file__).parent / "optimizer_updates.json").read_text())


def tiny_tree() -> dict[str, jax.Array]:
    """A 3-D kernel (Adafactor's 2-D view) and a vector."""
    w = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5) / 10
    return {"b": jnp.asarray([0.5, -0.25, 1.0], jnp.float32), "w": jnp.asarray(w)}


# Two of those calls as the deprecated flat function (what recorded config.gin files call).
FLAT_CALLS = {
    "adafactor_per_axis": ("adafactor", {
        "adafactor_min_dim_size_to_factor": 2, "adafactor_as_matrices": False,
        "adafactor_momentum": 0.9, "adafactor_decay_rate": 0.7,
        "adafactor_clipping_threshold": None, "recadam_gamma": 1.0}),
    "recadam": ("recadam", {"recadam_gamma": 50.0, "recadam_k": 1.0, "recadam_t0": 1.0,
                            "weight_decay": 0.01, "accumulate_steps": 2}),
}


def _schedule() -> optax.Schedule:
    return make_schedule("warmup_linear", 1e-2, 4, warmup_fraction=0.25, final_fraction=0.0)


def config_updates(case: str) -> dict[str, list[float]]:
    tx = CASES[case](_schedule(), accumulate_steps=ACCUMULATE.get(case, 1),
                     labels=LABELS.get(case))
    return _updates(tx)


def flat_updates(case: str) -> dict[str, list[float]]:
    name, flat = FLAT_CALLS[case]
    return _updates(make_optimizer(name, _schedule(), **flat))


def _updates(tx: optax.GradientTransformation) -> dict[str, list[float]]:
    params = tiny_tree()
    state = tx.init(params)
    for step in range(4):
        grads = jax.tree.map(lambda leaf, s=step: jnp.sin(leaf * (s + 1)), tiny_tree())
        updates, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return {leaf: np.ravel(value).tolist() for leaf, value in params.items()}


@pytest.fixture(scope="module")
def computed() -> dict:
    """Every case's parameters after its updates, computed op by op (as the expected values
    were) in a process of its own at XLA's default optimisation level: this suite compiles
    with LLVM's optimisation off (tests/conftest.py), which moves RecAdam's last bit."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_optimizer_configs as t; "
            "print(json.dumps({'config': {c: t.config_updates(c) for c in t.CASES}, "
            "'flat': {c: t.flat_updates(c) for c in t.FLAT_CALLS}}))")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)],
                          env={**env, "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_configs_give_make_optimizers_updates_bit_for_bit(case, computed):
    _check(case, computed["config"][case])


@pytest.mark.parametrize("case", sorted(FLAT_CALLS))
def test_the_deprecated_flat_function_still_gives_its_updates(case, computed):
    _check(case, computed["flat"][case])


def _check(case: str, params: dict[str, list[float]]) -> None:
    for leaf, expected in EXPECTED[case].items():
        np.testing.assert_array_equal(np.array(params[leaf], np.float32),
                                      np.array(expected, np.float32))


def test_gin_builds_the_model_files_optimizer_with_its_clip_norm():
    gin_setup.parse(SMOKE, ["MODEL_DIR='/runs/a'", "CLIP_NORM=0.5",
                            "tw_jax.train.AdamWConfig.b2=0.98"])
    optimizer = train_config().optimizer
    assert isinstance(optimizer, AdamWConfig) and not isinstance(optimizer, RecAdamConfig)
    assert (optimizer.clip_norm, optimizer.b1, optimizer.b2) == (0.5, 0.9, 0.98)


def test_a_method_file_keeps_its_optimizer_whatever_model_file_follows():
    gin_setup.parse(["diff.gin", "methods/recadam.gin", "models/t5_tiny.gin", "runs/cpu_smoke.gin"],
                    ["MODEL_DIR='/runs/a'"])
    optimizer = train_config().optimizer
    assert isinstance(optimizer, RecAdamConfig)
    # cpu_smoke.gin's short-run annealing, the model file's CLIP_NORM (None for T5).
    assert (optimizer.gamma, optimizer.k, optimizer.t0, optimizer.clip_norm) == (
        100.0, 1.0, 3.0, None)


def test_an_optimizer_named_the_old_way_still_builds_with_a_warning():
    gin_setup.parse(SMOKE, ["MODEL_DIR='/runs/a'", "OPTIMIZER='adafactor'", "CLIP_NORM=2.0"])
    with pytest.warns(FutureWarning, match=r"^OPTIMIZER = 'adafactor' is deprecated: bind the "
                      r"optimizer's config, OPTIMIZER = @tw_jax\.train\.AdafactorConfig\(\)$"):
        optimizer = train_config().optimizer
    assert isinstance(optimizer, AdafactorConfig) and optimizer.clip_norm == 2.0
    with pytest.raises(ValueError, match=r"^unknown optimizer 'lion'; expected one of"):
        resolve("lion")


@pytest.mark.parametrize(("binding", "new"), [
    ("tw_jax.train.make_optimizer.recadam_gamma = 5000.0", "bind tw_jax.train.RecAdamConfig.gamma"),
    ("make_optimizer.adafactor_decay_rate = 0.7", "bind tw_jax.train.AdafactorConfig.decay_rate"),
    ("tw_jax.train.make_optimizer.b2 = 0.98",
     "bind tw_jax.train.AdamWConfig.b2 or tw_jax.train.RecAdamConfig.b2"),
    ("tw_jax.train.make_optimizer.name = 'sgd'",
     "bind the optimizer's config instead of its name: OPTIMIZER = @tw_jax.train.AdamWConfig() "
     "(one of tw_jax.train.AdafactorConfig, tw_jax.train.AdamWConfig, "
     "tw_jax.train.RecAdamConfig, tw_jax.train.SGDConfig)"),
])
def test_a_binding_of_make_optimizer_is_an_error_naming_the_new_binding(binding, new):
    """Over the new base.gin nothing calls make_optimizer: its binding would change nothing."""
    parameter = binding.split("=")[0].strip().rsplit(".", 1)[1]
    gin_setup.parse(SMOKE, ["MODEL_DIR='/runs/a'", binding])
    with pytest.raises(gin_setup.GinConfigError) as error:
        train_config()
    assert str(error.value) == (f"gin: tw_jax.train.make_optimizer.{parameter} is bound but the "
                                f"optimizer is a config now; {new}")


# A run's config.gin as tw-jax train recorded it before the optimizer configs (its optimizer
# lines), over the model and run files: it still parses and trains the same optimizer.
RECORDED = """
CLIP_NORM = 1.0
OPTIMIZER = 'recadam'
tw_jax.train.train.optimizer_fn = @tw_jax.train.make_optimizer
tw_jax.train.compile.optimizer_fn = @tw_jax.train.make_optimizer
make_optimizer.clip_norm = %CLIP_NORM
make_optimizer.name = %OPTIMIZER
make_optimizer.b2 = 0.98
make_optimizer.recadam_gamma = 100.0
make_optimizer.adafactor_decay_rate = 0.5
"""


def test_a_run_recorded_before_the_configs_still_parses_and_trains_its_optimizer(tmp_path):
    recorded = tmp_path / "config.gin"
    recorded.write_text(RECORDED)
    gin_setup.parse([*SMOKE, str(recorded)], ["MODEL_DIR='/runs/a'"])
    with pytest.warns(FutureWarning, match="optimizer_fn = @tw_jax.train.make_optimizer is "
                                           "deprecated"):
        config = train_config()
    assert isinstance(config.optimizer, RecAdamConfig) and config.optimizer_fn is None
    assert (config.optimizer.clip_norm, config.optimizer.b2, config.optimizer.gamma) == (
        1.0, 0.98, 100.0)  # Adafactor's decay rate belongs to another optimizer: ignored
    assert not any("optimizer_fn" in line for line in gin_lines(config, config.gin_record.bound))
