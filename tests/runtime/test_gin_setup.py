"""Gin: shipped files found from any folder, later files override, clear configuration errors."""

import gin
import pytest

from tw_jax.runtime import gin_setup
from tw_jax.train.gin_config import train_config

SMOKE = ["kadapter.gin", "models/t5_tiny.gin", "runs/cpu_smoke.gin"]


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # shipped files must be found from any folder
    yield
    gin.clear_config()


def test_shipped_files_layering_gives_a_tiny_kadapter_t5():
    gin_setup.parse(SMOKE, ["MODEL_DIR='/tmp/x'"], required_macros=gin_setup.MACROS_TRAIN)
    config = gin.query_parameter("%MODEL").scoped_configurable_fn()
    assert (config.d_model, config.num_layers, config.freeze) == (64, 3, "encoder")
    assert config.kadapter.num_adapters == 2
    assert gin.query_parameter("%TRAIN_STEPS") == 12  # runs/cpu_smoke.gin overrides tpu.gin
    assert gin.query_parameter("%MESH_SHAPE") == (-1, 1, 1)
    assert gin.query_parameter("%MIXTURE_OR_TASK_NAME") == "twiki_diffset_0809_{objective}"


def test_every_shipped_experiment_parses_with_every_tiny_model():
    for experiment in ("diff", "full", "initial", "kadapter", "lora", "modular", "recadam",
                       "mixreview", "vanilla"):
        for model in ("t5_tiny", "gpt2_tiny", "t5_large", "gpt2_large", "t5_small"):
            files = [f"{experiment}.gin", f"models/{model}.gin", "runs/cpu_smoke.gin"]
            gin_setup.parse(files, ["MODEL_DIR='m'"], required_macros=gin_setup.MACROS_TRAIN)
    for run in ("gpu", "tpu", "cpu_smoke"):
        gin_setup.parse(["lora.gin", f"runs/{run}.gin"], ["MODEL_DIR='m'"])


def test_search_paths_and_working_folder_take_precedence(tmp_path):
    own = tmp_path / "mine"
    (own / "models").mkdir(parents=True)
    (own / "models" / "t5_tiny.gin").write_text("include 'models/t5_small.gin'\nBATCH_SIZE = 7\n")
    assert gin_setup.resolve_gin_file("models/t5_tiny.gin", [str(own)]) == own / "models" / "t5_tiny.gin"
    shipped = gin_setup.resolve_gin_file("models/t5_tiny.gin")
    assert shipped == gin_setup.shipped_gin_dir() / "models" / "t5_tiny.gin"
    gin_setup.parse(["base.gin", "models/t5_tiny.gin"], [], [str(own)])
    assert gin.query_parameter("%BATCH_SIZE") == 7
    assert gin.query_parameter("tw_jax.models.T5Config.d_model") == 512  # from t5_small.gin


def test_missing_file_names_the_places_tried():
    with pytest.raises(gin_setup.GinConfigError, match="'nope.gin' not found; looked in"):
        gin_setup.parse(["nope.gin"])


def test_misspelt_binding_is_named_with_the_closest_names():
    with pytest.raises(gin_setup.GinConfigError) as raised:
        gin_setup.parse(SMOKE, ["tw_jax.train.train.trian_steps = 3"])
    assert str(raised.value) == ("gin: tw_jax.train.train has no parameter 'trian_steps'; did "
                                 "you mean train_steps? (--gin bindings, line 1)")
    with pytest.raises(gin_setup.GinConfigError) as raised:
        gin_setup.parse(SMOKE, ["T5Confg.d_model = 3"])
    assert str(raised.value).startswith("gin: no configurable named 'T5Confg'; did you mean "
                                        "tw_jax.models.T5Config")
    assert "\n" not in str(raised.value)


def test_misspelt_binding_in_a_file_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.gin"
    bad.write_text("include 'base.gin'\n\ntw_jax.models.T5Config.d_modle = 8\n")
    with pytest.raises(gin_setup.GinConfigError) as raised:
        gin_setup.parse([str(bad)])
    assert str(raised.value) == (f"gin: tw_jax.models.T5Config has no parameter 'd_modle'; did "
                                 f"you mean d_model? (file \"{bad}\", line 3)")


def test_unset_required_macro_is_named():
    with pytest.raises(gin_setup.GinConfigError, match="MODEL_DIR not set.*--gin.MODEL_DIR="):
        gin_setup.parse(SMOKE, [], required_macros=gin_setup.MACROS_TRAIN)


def test_unquoted_path_binding_is_a_string():
    gin_setup.parse(SMOKE, ["MODEL_DIR=/tmp/run one", "TRAIN_STEPS=5"])
    assert gin.query_parameter("%MODEL_DIR") == "/tmp/run one"
    assert gin.query_parameter("%TRAIN_STEPS") == 5


def test_cli_accepts_gin_dot_bindings():
    from tw_jax.cli import build_parser

    args = build_parser().parse_args(
        ["train", "--gin_file=lora.gin", "--gin.MODEL_DIR=/tmp/a", "--gin.TRAIN_STEPS", "3",
         "--gin_bindings", "SEED=2"]
    )
    assert args.gin_file == ["lora.gin"]
    assert args.gin_bindings == ["MODEL_DIR=/tmp/a", "TRAIN_STEPS=3", "SEED=2"]


def test_cli_reports_a_config_error_and_exits_2(capsys):
    from tw_jax.cli import main

    assert main(["train", "--gin_file=lora.gin", "--gin_file=models/t5_tiny.gin"]) == 2
    # lora.gin is the paper's run: the steps depend on the month's data, so they are required.
    assert "gin macro(s) MODEL_DIR, TRAIN_STEPS not set" in capsys.readouterr().err


def test_a_misspelt_macro_is_named_with_the_closest_ones(capsys):
    with pytest.raises(gin_setup.GinConfigError,
                       match=r"^gin macro TRAIN_STEP is bound but nothing in the gin files uses "
                             r"it \(did you mean TRAIN_STEPS\?\)$"):
        gin_setup.parse(SMOKE, ["MODEL_DIR='m'", "TRAIN_STEP=3"])
    gin_setup.parse(SMOKE, ["MODEL_DIR='m'", "TRAIN_STEP=3"], strict_macros=False)
    gin_setup.parse(SMOKE, ["MODEL_DIR='m'", "TRAIN_STEPS=3", "tw_jax.train.train.seed=2"])
    assert gin.query_parameter("%TRAIN_STEPS") == 3

    from tw_jax.cli import main

    assert main(["train", "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin",
                 "--gin.MODEL_DIR=m", "--gin.BATCH_SIZ=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tw-jax train: error: gin macro BATCH_SIZ is bound but nothing in the gin "
                   "files uses it (did you mean BATCH_SIZE?)"]


def test_a_runs_operative_config_builds_the_model_it_trained(tmp_path):
    """Gin records the model's parameters in the MODEL macro's scope (``MODEL/GPT2Config.n_embd
    = 64``); loading that file for evaluation must build that model, not the default one."""
    gin_setup.parse(["lora.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
                    ["MODEL_DIR='m'", "tw_jax.models.GPT2Config.vocab_size=1257"],
                    required_macros=gin_setup.MACROS_TRAIN)
    trained = train_config().model_config  # gin calls GPT2Config inside scope MODEL
    operative = tmp_path / "operative_config.gin"
    operative.write_text(gin.operative_config_str())
    assert "MODEL/GPT2Config.n_embd = 64" in operative.read_text()
    gin.clear_config()
    gin_setup.parse([str(operative)], [])
    assert gin_setup.model_config() == trained
    assert (trained.n_embd, trained.n_layer, trained.vocab_size) == (64, 3, 1257)
    assert trained.lora is not None


def test_without_the_input_pipeline_the_same_files_give_the_same_training_settings():
    """A compiled step alone (the GPU benchmarks, on an image without TensorFlow) parses the
    experiment files with the pipeline's bindings skipped: the model, method, optimizer and
    schedule come out the same."""
    files = ["kadapter.gin", "models/t5_tiny.gin", "runs/cpu_smoke.gin"]
    bindings = ["MODEL_DIR='/tmp/x'", "TRAIN_STEPS=7"]
    gin_setup.parse(files, bindings)
    full = train_config()
    gin_setup.parse(files, bindings, input_pipeline=False)
    alone = train_config()
    assert (alone.replace(gin_record=None, schedule_fn=None)
            == full.replace(gin_record=None, schedule_fn=None))
    assert alone.schedule_fn.keywords == full.schedule_fn.keywords  # partials: by identity
    assert alone.train_steps == 7 and alone.model_config == full.model_config
    # Where seqio is installed the pipeline's bindings still parse (skip_unknown skips only
    # what gin does not know); tests/tools/test_bench_gpu.py runs the step where it is not.
