"""Settings bound once for whatever model a run uses (``tw_jax.models.ModelSettings``): every
family takes them, a setting a family cannot take is a one-line error, the shipped run and method
files give T5, GPT-2 and BART the models the per-class files gave, old per-class bindings still
work (and disagreeing with the settings is an error naming both), and the shipped big model files
have their published shapes (``jax.eval_shape`` only: nothing is allocated)."""

from __future__ import annotations

import copy
import dataclasses

import gin
import pytest

from tw_jax.models import (
    FREEZE_AUTO,
    KAdapterConfig,
    LoRAConfig,
    ModelSettings,
    ModelSettingsError,
    ModularConfig,
    apply_settings,
    model_for,
    registered_families,
)
from tw_jax.models.variants import VARIANT_FIELDS, freeze_policy
from tw_jax.runtime import gin_setup
from tw_jax.train.gin_config import train_config

TINY = ("t5_tiny", "gpt2_tiny", "bart_tiny")
DECODERS = ("llama_tiny", "qwen2_tiny", "qwen3_tiny", "mistral_tiny", "gemma_tiny")
BIND = ["MODEL_DIR='m'", "TRAIN_STEPS=1"]

# The method and run files as they were before ModelSettings (bindings per config class; their
# comments and unrelated run settings left out): the "before" every shipped file is held to.
OLD_FILES = {
    "methods/vanilla.gin": """MIXTURE_OR_TASK_NAME = 'twiki_diffset_0809_{objective}'
tw_jax.models.T5Config.freeze = 'none'
tw_jax.models.GPT2Config.freeze = 'none'
""",
    "methods/diff.gin": "include 'methods/vanilla.gin'\n",
    "methods/full.gin": """MIXTURE_OR_TASK_NAME = 'twiki_full_09_{objective}'
tw_jax.models.T5Config.freeze = 'none'
tw_jax.models.GPT2Config.freeze = 'none'
""",
    "methods/kadapter.gin": """tw_jax.models.T5Config.kadapter = @tw_jax.models.KAdapterConfig()
tw_jax.models.GPT2Config.kadapter = @tw_jax.models.KAdapterConfig()
tw_jax.models.KAdapterConfig.num_adapters = 2
tw_jax.models.T5Config.freeze = 'encoder'
tw_jax.models.GPT2Config.freeze = 'base'
""",
    "methods/lora.gin": """tw_jax.models.T5Config.lora = @tw_jax.models.LoRAConfig()
tw_jax.models.GPT2Config.lora = @tw_jax.models.LoRAConfig()
tw_jax.models.BARTConfig.lora = @tw_jax.models.LoRAConfig()
tw_jax.models.LoRAConfig.rank = 4
tw_jax.models.LoRAConfig.alpha = 16.0
tw_jax.models.LoRAConfig.scaling = 'rank_over_alpha'
tw_jax.models.LoRAConfig.targets = ('query', 'value')
tw_jax.models.T5Config.freeze = 'encoder'
tw_jax.models.GPT2Config.freeze = 'base'
""",
    "methods/mixreview.gin": """MIXTURE_OR_TASK_NAME = 'twiki_mixreview_0809_{objective}'
tw_jax.models.T5Config.freeze = 'none'
tw_jax.models.GPT2Config.freeze = 'none'
""",
    "methods/modular.gin": """tw_jax.models.T5Config.modular = @tw_jax.models.ModularConfig()
tw_jax.models.T5Config.freeze = 'encoder'
""",
    "methods/recadam.gin": """tw_jax.train.train.optimizer = @tw_jax.train.RecAdamConfig()
tw_jax.train.compile.optimizer = @tw_jax.train.RecAdamConfig()
tw_jax.train.RecAdamConfig.gamma = 5000.0
tw_jax.train.RecAdamConfig.k = 0.5
tw_jax.train.RecAdamConfig.t0 = 250.0
tw_jax.train.RecAdamConfig.anneal = 'sigmoid'
tw_jax.train.make_schedule.base_lr = 1e-4
tw_jax.models.T5Config.freeze = 'none'
tw_jax.models.GPT2Config.freeze = 'none'
""",
    "runs/cpu_smoke.gin": """TRAIN_STEPS = 12
BATCH_SIZE = 4
INPUTS_LENGTH = 64
TARGETS_LENGTH = 32
MESH_SHAPE = (-1, 1, 1)
LEARNING_RATE = 1e-2
tw_jax.models.T5Config.dtype = 'float32'
tw_jax.models.GPT2Config.dtype = 'float32'
tw_jax.models.T5Config.remat = False
tw_jax.models.GPT2Config.remat = False
""",
    "runs/gpu.gin": """MESH_SHAPE = (-1, 1, 1)
tw_jax.models.T5Config.dtype = 'bfloat16'
tw_jax.models.GPT2Config.dtype = 'bfloat16'
tw_jax.models.T5Config.remat = True
tw_jax.models.GPT2Config.remat = True
""",
}
METHODS = ("vanilla", "diff", "full", "kadapter", "lora", "mixreview", "modular", "recadam")
# What the old files gave on the tiny models, read from them on the commit before the change
# (freeze, variants; None: refused): the table the old-file comparison below recomputes.
BEFORE = {
    "t5_tiny": {"vanilla": ("none", ()), "kadapter": ("encoder", ("kadapter",)),
                "lora": ("encoder", ("lora",)), "modular": ("encoder", ("modular",))},
    "gpt2_tiny": {"vanilla": ("none", ()), "kadapter": ("base", ("kadapter",)),
                  "lora": ("base", ("lora",)), "modular": None},
    "bart_tiny": {"vanilla": (None, ()), "kadapter": None, "lora": (None, ("lora",)),
                  "modular": None},
}


@pytest.fixture(autouse=True)
def _clean(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gin.clear_config()
    yield
    gin.clear_config()


def _model(files, bindings=(), search=()):
    gin_setup.parse(files, [*BIND, *bindings], search)
    return train_config().model_config


def _old_files(tmp_path):
    for name, text in OLD_FILES.items():
        path = tmp_path / "old" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "old"


def _variants(config):
    return tuple(name for name in VARIANT_FIELDS if getattr(config, name, None) is not None)


# --- every family takes the settings; what one cannot take is an error --------------------

def test_the_settings_apply_to_every_registered_family():
    settings = ModelSettings(dtype="bfloat16", param_dtype="bfloat16", remat=True,
                             lora=LoRAConfig(rank=2), freeze=FREEZE_AUTO)
    for family in registered_families():
        config = apply_settings(family.config_class(), settings)
        assert (config.dtype, config.param_dtype, config.remat) == ("bfloat16", "bfloat16", True)
        assert config.lora == LoRAConfig(rank=2), family
        assert config.freeze == ("encoder" if config.model_type == "t5" else "base"), family
        assert type(model_for(config)) is family
        assert apply_settings(config, settings) == config  # applying again changes nothing
        for name, variant in (("kadapter", KAdapterConfig()), ("modular", ModularConfig())):
            try:  # taken, or refused: never dropped
                assert getattr(apply_settings(config, ModelSettings(**{name: variant})),
                               name) == variant
            except ModelSettingsError as error:
                assert f"ModelSettings.{name} (the {name} method)" in str(error)
                assert type(config).__name__ in str(error)


@pytest.mark.parametrize(("config", "settings", "message"), [
    ("GPT2Config", ModelSettings(modular=ModularConfig()),
     "ModelSettings.modular (the modular method) cannot apply to the run's model, a GPT2Config, "
     "which has no modular variant: pick another method or model"),
    ("LlamaConfig", ModelSettings(modular=ModularConfig()),
     "ModelSettings.modular (the modular method) cannot apply to the run's model, a "
     "LlamaConfig, which has no modular variant: pick another method or model"),
    ("GemmaConfig", ModelSettings(modular=ModularConfig()),
     "ModelSettings.modular (the modular method) cannot apply to the run's model, a GemmaConfig, "
     "which has no modular variant: pick another method or model"),
    ("BARTConfig", ModelSettings(kadapter=KAdapterConfig()),
     "ModelSettings.kadapter (the kadapter method) cannot apply to the run's model, a "
     "BARTConfig, which refuses it: K-Adapter is not supported on the BART family (bart); use "
     "LoRA or full training, or a T5 or GPT-2 model for this method"),
    ("Qwen3Config", ModelSettings(freeze="encoder"),
     "ModelSettings.freeze = 'encoder' cannot apply to the run's model, a Qwen3Config, which "
     "refuses it: freeze='encoder' needs an encoder-decoder model, not qwen3"),
])
def test_a_setting_the_family_cannot_take_is_an_error_naming_both(config, settings, message):
    cls = next(f.config_class for f in registered_families()
               if f.config_class.__name__ == config)
    with pytest.raises(ModelSettingsError) as error:
        apply_settings(cls(), settings)
    assert str(error.value) == message


def test_a_config_without_the_field_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Plain:
        dtype: str = "float32"
        model_type = "plain"

    assert apply_settings(Plain(), ModelSettings(dtype="bfloat16")).dtype == "bfloat16"
    with pytest.raises(ModelSettingsError, match=r"^ModelSettings.remat = True cannot apply to "
                       r"the run's model, a Plain, which has no remat field$"):
        apply_settings(Plain(), ModelSettings(dtype="bfloat16", remat=True))


@pytest.mark.parametrize("bad", [dict(dtype="bfloat1"), dict(param_dtype="int32"),
                                 dict(freeze="decoder"), dict(remat=1),
                                 dict(lora=KAdapterConfig())])
def test_settings_are_typed(bad):
    with pytest.raises((ValueError, TypeError)):
        ModelSettings(**bad)


@pytest.mark.parametrize(("method", "model", "message"), [
    ("modular", "gpt2_tiny", "gin binds ModelSettings.modular (the modular method) but the run's "
     "MODEL is a GPT2Config, which has no modular variant: pick another method or model"),
    ("modular", "llama_tiny", "gin binds ModelSettings.modular (the modular method) but the "
     "run's MODEL is a LlamaConfig, which has no modular variant: pick another method or model"),
    ("kadapter", "bart_tiny", "gin binds ModelSettings.kadapter (the kadapter method) but the "
     "run's MODEL is a BARTConfig, which refuses it: K-Adapter is not supported on the BART "
     "family (bart); use LoRA or full training, or a T5 or GPT-2 model for this method"),
    ("modular", "gemma_tiny", "gin binds ModelSettings.modular (the modular method) but the "
     "run's MODEL is a GemmaConfig, which has no modular variant: pick another method or model"),
])
def test_a_method_the_model_lacks_is_one_line_where_the_run_is_built(method, model, message):
    gin_setup.parse([f"{method}.gin", f"models/{model}.gin", "runs/cpu_smoke.gin"], BIND)
    for build in (train_config, gin_setup.model_config):  # training; evaluation's loader
        with pytest.raises(gin_setup.GinConfigError) as error:
            build()
        assert str(error.value) == message


# --- the shipped run and method files ---------------------------------------------------------

@pytest.mark.parametrize("model", DECODERS)
@pytest.mark.parametrize("run", ["gpu", "tpu"])
def test_accelerator_runs_make_every_decoder_bfloat16_with_remat(model, run):
    config = _model(["diff.gin", f"models/{model}.gin", f"runs/{run}.gin"])
    assert (config.dtype, config.remat, config.freeze) == ("bfloat16", True, "none")
    # every reader of %MODEL sees the same model: the trainer, evaluation's loader, a raw call
    assert gin_setup.model_config() == config
    assert gin.query_parameter("%MODEL").scoped_configurable_fn() == config
    assert gin.get_bindings("tw_jax.train.compile")["model_config"] == config


@pytest.mark.parametrize("model", DECODERS)
def test_lora_on_a_decoder_gives_a_lora_decoder_with_its_base_frozen(model):
    config = _model(["lora.gin", f"models/{model}.gin", "runs/cpu_smoke.gin"])
    assert (config.lora.rank, config.lora.alpha, config.freeze) == (4, 16.0, "base")
    count = model_for(config).count_params()
    assert 0 < count.trainable < count.total  # the LoRA matrices train, the base does not


@pytest.mark.parametrize("run", ["cpu_smoke", "gpu"])
@pytest.mark.parametrize("model", TINY)
@pytest.mark.parametrize("method", METHODS)
def test_every_method_gives_the_model_the_per_class_files_gave(tmp_path, method, model, run):
    old = _old_files(tmp_path)
    try:
        before = _model(["base.gin", str(old / f"methods/{method}.gin"), f"models/{model}.gin",
                         str(old / f"runs/{run}.gin")], search=[str(old)])
    except gin_setup.GinConfigError:
        before = None
    try:
        after = _model(["base.gin", f"methods/{method}.gin", f"models/{model}.gin",
                        f"runs/{run}.gin"])
    except gin_setup.GinConfigError as error:
        assert before is None, error
        return
    assert before is not None
    key = {"diff": "vanilla", "full": "vanilla", "mixreview": "vanilla", "recadam": "vanilla"}
    expected = BEFORE[model].get(key.get(method, method))
    assert (before.freeze, _variants(before)) == expected
    if model == "bart_tiny":
        # BART was never named by the per-class files but lora.gin's variant: its freeze was left
        # None, which meant the same policy, and the run files left it in float32 (the bug this
        # fixes): the same model otherwise, the same trainable parameters.
        assert freeze_policy(after) == freeze_policy(before)
        assert after.dtype == ("bfloat16" if run == "gpu" else "float32")
        normal = {"freeze": freeze_policy(after), "dtype": after.dtype, "remat": after.remat}
        assert dataclasses.replace(before, **normal) == after
        assert model_for(after).count_params() == model_for(before).count_params()
    else:
        assert after == before


def test_old_per_class_bindings_still_work(tmp_path):
    old = _old_files(tmp_path)
    config = _model(["base.gin", str(old / "methods/lora.gin"), "models/t5_tiny.gin",
                     str(old / "runs/gpu.gin")], search=[str(old)])
    assert (config.dtype, config.remat, config.freeze, config.lora.rank) == (
        "bfloat16", True, "encoder", 4)
    # beside the new files, agreeing with them
    config = _model(["kadapter.gin", "models/gpt2_tiny.gin", "runs/gpu.gin"],
                    ["tw_jax.models.GPT2Config.remat=True",
                     "tw_jax.models.GPT2Config.freeze='none'"])  # 'auto' defers to it
    assert (config.remat, config.freeze, config.kadapter.num_adapters) == (True, "none", 2)


def test_a_per_class_binding_that_disagrees_with_the_settings_is_an_error_naming_both():
    gin_setup.parse(["lora.gin", "models/gpt2_tiny.gin", "runs/gpu.gin"],
                    [*BIND, "tw_jax.models.GPT2Config.remat=False"])
    with pytest.raises(gin_setup.GinConfigError) as error:
        train_config()
    assert str(error.value) == (
        "gin binds GPT2Config.remat = False and ModelSettings.remat = True, which set the run's "
        "model's remat differently: bind one of them (tw_jax.models.ModelSettings.remat sets it "
        "for every family)")


def test_a_runs_records_build_its_model_and_take_new_settings(tmp_path):
    config = _model(["lora.gin", "models/llama_tiny.gin", "runs/gpu.gin"])
    (tmp_path / "config.gin").write_text(gin.config_str())
    (tmp_path / "operative_config.gin").write_text(gin.operative_config_str())
    for record in ("config.gin", "operative_config.gin"):
        gin_setup.parse([str(tmp_path / record)], [])
        assert gin_setup.model_config() == config, record
    gin_setup.parse([str(tmp_path / "config.gin")], ["tw_jax.models.ModelSettings.dtype='float32'"])
    assert gin_setup.model_config() == dataclasses.replace(config, dtype="float32")


def test_gins_own_parse_as_the_real_t5x_does_gets_the_settings_when_it_finalizes():
    gin_setup.register_configurables()
    for folder in gin_setup.search_paths():
        gin.add_config_file_search_path(str(folder))
    shipped = gin_setup.shipped_gin_dir()
    gin.parse_config_files_and_bindings(
        [str(shipped / "lora.gin"), str(shipped / "models/qwen3_tiny.gin")],
        ["MODEL_DIR = 'm'", "TRAIN_STEPS = 1"], finalize_config=True)
    config = copy.deepcopy(gin.query_parameter("tw_jax.train.train.model_config"))
    assert (type(config).__name__, config.dtype, config.remat) == ("Qwen3Config", "bfloat16", True)
    assert (config.lora.rank, config.freeze) == (4, "base")


# --- the shipped big models: published shapes, by jax.eval_shape only -----------------------

PUBLISHED = {  # Hugging Face config.json (the keys that fix the model) and the published total
    "llama3_2_1b": (1_235_814_400, {
        "model_type": "llama", "vocab_size": 128256, "hidden_size": 2048,
        "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 64, "hidden_act": "silu", "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0, "rope_scaling": {
            "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "max_position_embeddings": 131072, "tie_word_embeddings": True, "attention_bias": False,
        "mlp_bias": False, "bos_token_id": 128000, "eos_token_id": 128001}),
    "llama3_1_8b": (8_030_261_248, {
        "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "hidden_act": "silu", "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0, "rope_scaling": {
            "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "max_position_embeddings": 131072, "tie_word_embeddings": False,
        "attention_bias": False, "mlp_bias": False, "bos_token_id": 128000,
        "eos_token_id": 128001}),
    "qwen2_5_7b": (7_615_616_512, {
        "model_type": "qwen2", "vocab_size": 152064, "hidden_size": 3584,
        "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
        "num_key_value_heads": 4, "hidden_act": "silu", "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0, "max_position_embeddings": 131072, "sliding_window": 131072,
        "use_sliding_window": False, "tie_word_embeddings": False, "bos_token_id": 151643,
        "eos_token_id": 151643}),
    "qwen3_8b": (8_190_735_360, {
        "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 4096,
        "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu", "rms_norm_eps": 1e-06,
        "rope_theta": 1000000, "rope_scaling": None, "max_position_embeddings": 40960,
        "sliding_window": None, "use_sliding_window": False, "tie_word_embeddings": False,
        "attention_bias": False, "bos_token_id": 151643, "eos_token_id": 151645}),
    # No published total for the text decoder alone: the figure is the shapes' (see below).
    "gemma3_4b": (3_880_263_168, {
        "model_type": "gemma3", "text_config": {
            "model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
            "num_hidden_layers": 34, "sliding_window": 1024,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}}),
}


def _count_from_shapes(c) -> int:
    """The parameters of a Llama-style or Gemma 3 decoder, from its config's numbers."""
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    gemma = c.model_type == "gemma3_text"
    attention = 2 * c.hidden_size * q + 2 * c.hidden_size * kv
    if not gemma and c.attention_bias:
        attention += q + 2 * kv + (c.hidden_size if c.out_bias else 0)
    if gemma or c.qk_norm:
        attention += 2 * c.head_dim
    norms = (4 if gemma else 2) * c.hidden_size
    layer = attention + 3 * c.hidden_size * c.intermediate_size + norms
    heads = 1 if c.tie_word_embeddings else 2
    return heads * c.vocab_size * c.hidden_size + c.num_hidden_layers * layer + c.hidden_size


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shipped_big_models_have_their_published_shapes(name):
    total, hf = PUBLISHED[name]
    config = _model(["diff.gin", f"models/{name}.gin", "runs/gpu.gin"])
    assert (config.dtype, config.remat) == ("bfloat16", True)
    family = next(f for f in registered_families() if f.model_type == hf["model_type"])
    gin.clear_config()
    read = family.config_class.from_hf_config(hf)
    assert dataclasses.replace(config, dtype="float32", remat=False, freeze=None) == read
    count = model_for(config).count_params()  # jax.eval_shape: shapes, no arrays
    assert count.total == _count_from_shapes(config) == total
    assert count.trainable == total  # diff.gin: every parameter trains


def test_kadapter_gin_gives_a_llama_and_a_gemma_their_adapters_over_a_frozen_base():
    for model in ("llama_tiny", "gemma_tiny"):
        config = _model(["kadapter.gin", f"models/{model}.gin", "runs/cpu_smoke.gin"])
        assert (config.kadapter is not None, config.freeze) == (True, "base"), model
