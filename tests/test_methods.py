"""The method table is the one list of methods: every method in it has its gin files, the
lifelong runner, the demo, the report and the results schema read it, and T5X refuses the
methods it does not run in one line naming tw-jax train."""

from __future__ import annotations

from pathlib import Path

import pytest

from tw_jax.evaluate.colours import METHOD_COLOURS
from tw_jax.evaluate.groups import TRAINS_ON
from tw_jax.evaluate.results import METHODS
from tw_jax.lifelong.options import training_task
from tw_jax.methods import METHOD_TABLE, T5X_METHODS, under_t5x_refusal
from tw_jax.runtime import gin_setup
from tw_jax.time import Period

GIN = Path(__file__).resolve().parents[1] / "gin"


@pytest.mark.parametrize("method", [m for m in METHOD_TABLE if m.trains_on],
                         ids=lambda m: m.name)
def test_every_trained_method_has_its_gin_files_and_training_data(method):
    assert (GIN / f"{method.name}.gin").is_file()
    assert (GIN / "methods" / f"{method.name}.gin").is_file()
    assert (GIN / "t5x" / f"{method.name}.gin").is_file() == method.t5x
    assert TRAINS_ON[method.name] == method.trains_on
    task = training_task(method.name, Period.parse("0910"))
    assert task.endswith("_{objective}") and "0910" in task or "_10_" in task
    if method.name != "vanilla":
        assert method.name in METHODS and method.name in METHOD_COLOURS


@pytest.mark.parametrize("name", T5X_METHODS)
def test_every_t5x_method_has_its_t5x_files(name):
    from tw_jax.t5x.lifelong import t5x_gin_files

    files = t5x_gin_files([f"{name}.gin", "models/t5_tiny.gin"])
    assert files[0] == f"t5x/{name}.gin" and files[-1] == "models/t5_tiny.gin"
    text = (GIN / "t5x" / f"{name}.gin").read_text()
    assert "include 't5x/train.gin'" in text and f"include 'methods/{name}.gin'" in text


def test_t5x_refuses_a_loss_term_method_in_one_line():
    from tw_jax.t5x.lifelong import t5x_gin_files

    assert "ewc" not in T5X_METHODS and "diff" in T5X_METHODS
    assert under_t5x_refusal("diff") is None
    with pytest.raises(gin_setup.GinConfigError) as caught:
        t5x_gin_files(["lwf.gin"])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("lwf.gin: method 'lwf' adds a loss term that only tw-jax's "
                              "trainer runs: train it with `tw-jax train --gin_file=lwf.gin")
