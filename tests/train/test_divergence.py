"""A diverging run stops cleanly: no NaN state saved, the last good checkpoint kept and named."""

import json

import pytest

from tw_jax.runtime import gin_setup
from tw_jax.train import trainer
from tw_jax.train.gin_config import train_config


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, data_bindings):
    model_dir = tmp_path / "diverge"
    gin_setup.parse(
        ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
        [*data_bindings, f"MODEL_DIR='{model_dir}'", "TRAIN_STEPS=6", "CHECKPOINT_PERIOD=1",
         "OPTIMIZER=@tw_jax.train.SGDConfig()", "CLIP_NORM=None", "LEARNING_RATE=1e38",
         "SCHEDULE='constant'"],
    )
    with pytest.raises(trainer.TrainingDivergedError,
                       match=r"loss is nan at step 2; .*last good checkpoint is step 1"):
        trainer.train(train_config())
    assert sorted(p.name for p in (model_dir / "checkpoints").iterdir()) == ["1"]
    lines = (model_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1]


def test_infinite_updates_with_a_finite_loss_are_never_saved(tmp_path, data_bindings):
    """The loss of step 1 is finite, its update is not: nothing of that step is kept."""
    import optax

    gin_setup.parse(["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
                    [*data_bindings, "CHECKPOINT_PERIOD=1", "TRAIN_STEPS=3",
                     "SCHEDULE='constant'"])
    model_dir = tmp_path / "overflow"

    def overflowing(schedule, labels=None, accumulate_steps=1):
        return optax.chain(optax.sgd(schedule), optax.scale(float("inf")))

    config = train_config().replace(model_dir=str(model_dir), optimizer=overflowing)
    with pytest.raises(trainer.TrainingDivergedError,
                       match=r"^the updated parameters are not finite at step 1; training "
                             r"stopped, no checkpoint was saved$"):
        trainer.train(config)
    assert not list((model_dir / "checkpoints").glob("*"))
    assert not (model_dir / "metrics.jsonl").exists() or not (model_dir / "metrics.jsonl").read_text()


def test_the_step_flags_non_finite_gradients_behind_a_finite_loss():
    """d/dz sqrt(z) at z = 0 is infinite while the loss (through sqrt(0) = 0) is finite."""
    import jax.numpy as jnp
    import optax

    from tw_jax.train.steps import make_train_step

    class SqrtModel:  # the one protocol member the step calls
        @staticmethod
        def logits(params, batch, deterministic, rng):
            scale = params["w"] * jnp.sqrt(params["z"])
            one_hot = jnp.array([1.0, 0.0, 0.0, 0.0])  # the target (0) gains with the scale
            return scale * jnp.broadcast_to(one_hot, batch["decoder_target_tokens"].shape + (4,))

    params = {"w": jnp.ones(()), "z": jnp.zeros(())}
    batch = {"decoder_target_tokens": jnp.zeros((1, 3), jnp.int32),
             "decoder_loss_weights": jnp.ones((1, 3)), "decoder_mask": jnp.ones((1, 3))}
    step = make_train_step(SqrtModel(), optax.sgd, {"w": True, "z": True}, seed=0)
    opt_state = optax.sgd(optax.constant_schedule(0.1)).init(params)
    _, _, out = step(params, opt_state, jnp.int32(0), jnp.float32(0.1), batch)
    assert float(out["loss"]) == pytest.approx(jnp.log(4.0))
    assert (bool(out["grads_finite"]), bool(out["params_finite"])) == (False, False)
    assert trainer._non_finite(float(out["loss"]), False, False, float(out["grad_norm"])) == (
        "the gradients are not finite (norm inf)")
