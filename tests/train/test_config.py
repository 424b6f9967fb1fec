"""The typed run: gin builds a TrainConfig that no longer reads gin; Python derives runs from it,
and the gin record of a run says what Python changed."""

import dataclasses

import gin
import pytest

from tw_jax.models.sharding import LOGICAL_AXIS_RULES
from tw_jax.runtime import gin_setup
from tw_jax.train import trainer
from tw_jax.train.config import TrainConfig, gin_lines
from tw_jax.train.gin_config import train_config

SMOKE = ["kadapter.gin", "models/t5_tiny.gin", "runs/cpu_smoke.gin"]


@pytest.fixture(autouse=True)
def _clean_gin():
    yield
    gin.clear_config()


def _config(*bindings: str) -> TrainConfig:
    gin_setup.parse(SMOKE, ["MODEL_DIR='/runs/a'", *bindings])
    return train_config()


def test_gin_builds_the_run_its_files_describe():
    config = _config("LEARNING_RATE=0.25", "SCHEDULE='constant'", "tw_jax.train.train.progress=False")
    assert type(config) is TrainConfig
    assert (config.model_dir, config.train_steps, config.mesh_shape) == ("/runs/a", 12, (-1, 1, 1))
    assert config.mixture_or_task_name == "twiki_diffset_0809_{objective}"
    assert (config.model_config.freeze, config.model_config.kadapter.num_adapters) == ("encoder", 2)
    assert config.progress is False
    assert float(config.schedule_fn(total_steps=10)(0)) == 0.25


def test_a_built_run_does_not_change_when_gin_does():
    config = _config("LEARNING_RATE=0.25", "SCHEDULE='constant'", "CLIP_NORM=0.5",
                     "OPTIMIZER=@tw_jax.train.AdamWConfig()")
    gin_setup.parse(SMOKE, ["MODEL_DIR='/runs/b'", "LEARNING_RATE=0.5", "CLIP_NORM=2.0",
                            "OPTIMIZER=@tw_jax.train.AdafactorConfig()"])
    assert float(config.schedule_fn(total_steps=10)(0)) == 0.25
    assert (type(config.optimizer).__name__, config.optimizer.clip_norm) == ("AdamWConfig", 0.5)
    gin.clear_config()  # nothing bound at all: the config still builds its optimizer
    assert config.optimizer(schedule=config.schedule_fn(total_steps=10)) is not None


def test_replace_derives_a_run_and_refuses_unknown_fields():
    config = _config()
    derived = config.replace(model_dir="/runs/b", train_steps=3)
    assert (derived.model_dir, derived.train_steps, config.model_dir) == ("/runs/b", 3, "/runs/a")
    with pytest.raises(TypeError, match="train_step"):
        config.replace(train_step=3)


def test_the_gin_record_names_what_python_changed():
    config = _config()
    bound = gin.get_bindings("tw_jax.train.train")
    assert gin_lines(config, bound) == []  # the functions bound now are not changes
    derived = config.replace(
        model_dir="/runs/b", initial_checkpoint_path="/runs/a",
        task_feature_lengths={"inputs": 25, "targets": 25},
        model_config=dataclasses.replace(config.model_config, freeze="none"),
        schedule_fn=lambda total_steps: 0.1,
    )
    assert gin_lines(derived, bound) == [
        "tw_jax.models.T5Config.freeze = 'none'",
        "tw_jax.train.train.task_feature_lengths = {'inputs': 25, 'targets': 25}",
        "tw_jax.train.train.model_dir = '/runs/b'",
        "tw_jax.train.train.initial_checkpoint_path = '/runs/a'",
    ]
    # the record parses back into the run it describes
    gin_setup.parse(SMOKE, ["MODEL_DIR='/runs/a'", *gin_lines(derived, bound)])
    again = train_config()
    assert (again.model_dir, again.initial_checkpoint_path, again.model_config.freeze) == (
        "/runs/b", "/runs/a", "none")


def test_a_run_keeps_its_own_gin_record_and_sharding_table_when_gin_changes():
    """The lifelong runner parses INITIAL's files and the method's once, up front: each run's
    config.gin, operative_config.gin and sharding table are its own, not the last parse's."""
    config = _config("LEARNING_RATE=0.25", "tw_jax.models.axis_rules.rules=[('batch', 'data')]")
    assert config.axis_rules == (("batch", "data"),)
    assert "LEARNING_RATE = 0.25" in config.gin_record.config
    assert "axis_rules.rules = [('batch', 'data')]" in config.gin_record.operative
    assert "TRAIN_STEPS = 12" in config.gin_record.operative
    gin_setup.parse(["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
                    ["MODEL_DIR='/runs/b'", "LEARNING_RATE=0.5"])
    other = train_config()
    derived = config.replace(model_dir="/runs/c")
    written = trainer.gin_config_text("config.gin", derived)
    assert "LEARNING_RATE = 0.25" in written and "LEARNING_RATE = 0.5" not in written
    assert written.endswith("tw_jax.train.train.model_dir = '/runs/c'\n")
    operative = trainer.gin_config_text("operative_config.gin", derived)
    assert "MODEL/T5Config" in operative and "GPT2Config" not in operative
    assert other.axis_rules == LOGICAL_AXIS_RULES  # gin's default table, resolved
    assert "GPT2Config" in other.gin_record.operative


def test_a_method_whose_variant_the_model_lacks_is_refused_before_training():
    """modular.gin switches Modular on for T5 only: on GPT-2 it would train without it."""
    gin_setup.parse(["modular.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"])
    with pytest.raises(gin_setup.GinConfigError) as error:
        train_config()
    assert str(error.value) == (
        "gin binds ModelSettings.modular (the modular method) but the run's MODEL is a GPT2Config, "
        "which has no modular variant: pick another method or model")
    gin_setup.parse(["lora.gin", "models/bart_tiny.gin", "runs/cpu_smoke.gin"])
    bart = train_config().model_config
    assert (type(bart).__name__, bart.lora.rank, bart.lora.alpha) == ("BARTConfig", 4, 16.0)


def test_gin_cannot_bind_what_python_fills_in():
    with pytest.raises(gin_setup.GinConfigError, match="gin_record"):
        gin_setup.parse(SMOKE, ["tw_jax.train.train.gin_record=None"])


def test_a_run_without_model_dir_is_refused():
    gin_setup.parse(SMOKE)  # base.gin leaves MODEL_DIR None: a template
    config = train_config()
    assert config.model_dir is None
    with pytest.raises(ValueError, match="model_dir is not set"):
        trainer.train(config)
    with pytest.raises(gin_setup.GinConfigError, match="MODEL_DIR not set"):
        gin_setup.parse(SMOKE, required_macros=gin_setup.MACROS_TRAIN)


def test_python_alone_trains_a_run(tmp_path, data_bindings):
    """No gin at all: a TrainConfig written in Python trains, and its config.gin records it."""
    import functools

    from tw_jax.train.schedules import make_schedule

    gin_setup.parse(["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"], data_bindings)
    model = gin_setup.model_config()
    gin.clear_config()
    model_dir = tmp_path / "run"
    summary = trainer.train(TrainConfig(
        model_config=model, mixture_or_task_name="twiki_diffset_0809_{objective}",
        task_feature_lengths={"targets": 32}, train_steps=2, batch_size=2,
        model_dir=str(model_dir), schedule_fn=functools.partial(make_schedule, "constant", 1e-3),
        progress=False,
    ))
    assert (summary.step, summary.start_step, summary.resumed) == (2, 0, False)
    written = (model_dir / "config.gin").read_text()
    assert "tw_jax.train.train.train_steps = 2" in written
    assert f"tw_jax.train.train.model_dir = '{model_dir}'" in written
    assert (model_dir / "checkpoints" / "2").is_dir()
