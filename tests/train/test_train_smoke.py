"""CPU smoke runs of every method on the sample world's tasks, through the shipped gin files
(T5, GPT-2, and the methods of the open-LLM families not covered by their own tests).

Each run: the loss decreases, frozen parameters are bitwise unchanged, every trainable one
changed, and a second invocation with more steps resumes from the checkpoint.
"""

import jax
import numpy as np
import pytest
from train_helpers import read_metrics

from tw_jax.models.variants import TRAINABLE, param_labels
from tw_jax.runtime import gin_setup
from tw_jax.runtime.run_model import build_run_model
from tw_jax.train import trainer
from tw_jax.train.gin_config import train_config

METHODS = {
    "t5_tiny": ("diff", "full", "kadapter", "lora", "modular", "recadam", "mixreview"),
    "gpt2_tiny": ("diff", "full", "kadapter", "lora", "recadam", "mixreview"),  # Modular: T5 only
    # The open-LLM families through the same method files (DIFF, LoRA and K-Adapter steps:
    # tests/models; LoRA from a Hugging Face folder: test_open_llm_run.py). Not RecAdam: the
    # optimizer is the family's no more than Adam is, and cpu_smoke.gin's gamma of 100 holds a
    # random 50,257-way Llama at its start for 6 steps (the loss does not fall yet).
    "llama_tiny": ("full", "mixreview"),
}
CASES = [(model, method) for model, methods in METHODS.items() for method in methods]


def _train(model: str, method: str, model_dir, bindings, steps: int) -> dict:
    import gin

    gin_setup.parse(
        [f"{method}.gin", f"models/{model}.gin", "runs/cpu_smoke.gin"],
        # A constant learning rate keeps the step function independent of TRAIN_STEPS, so the
        # resumed run finds it in the compilation cache (schedules have their own tests).
        [*bindings, f"MODEL_DIR='{model_dir}'", f"TRAIN_STEPS={steps}", "CHECKPOINT_PERIOD=3",
         "SCHEDULE='constant'"],
        required_macros=gin_setup.MACROS_TRAIN,
    )
    config = gin.query_parameter("%MODEL").scoped_configurable_fn()
    return config, trainer.train(train_config())


@pytest.mark.parametrize(("model", "method"), CASES, ids=[f"{a}-{b}" for a, b in CASES])
def test_smoke_run(model, method, tmp_path, data_bindings):
    model_dir = tmp_path / "run"
    config, first = _train(model, method, model_dir, data_bindings, steps=6)
    assert (first.start_step, first.resumed) == (0, False)

    losses = [m["loss"] for m in read_metrics(model_dir)]
    assert len(losses) == 6
    assert np.mean(losses[-2:]) < np.mean(losses[:2]), losses

    start = jax.device_get(build_run_model(config).init_params(0))
    end = jax.device_get(first.params)
    labels = param_labels(config, start)
    frozen = changed = 0
    for label, before, after in zip(
        jax.tree.leaves(labels), jax.tree.leaves(start), jax.tree.leaves(end), strict=True
    ):
        if label == TRAINABLE:
            assert not np.array_equal(before, after)
            changed += 1
        else:
            np.testing.assert_array_equal(before, after)
            frozen += 1
    expects_frozen = method in ("kadapter", "lora", "modular")
    assert (frozen > 0) == expects_frozen and changed > 0

    _, second = _train(model, method, model_dir, data_bindings, steps=8)
    assert (second.start_step, second.resumed) == (6, True)
    assert [m["step"] for m in read_metrics(model_dir)] == list(range(1, 9))
    assert sorted(int(p.name) for p in (model_dir / "checkpoints").iterdir()) == [6, 8]
    assert (model_dir / "operative_config.gin").read_text().count("TRAIN_STEPS = 8") == 1


def test_lora_starts_from_a_hugging_face_folder(tmp_path, data_bindings):
    """INITIAL_CHECKPOINT_PATH may be a Hugging Face folder: base weights load, LoRA starts fresh."""
    import jax.numpy as jnp

    from tw_jax.models import GPT2, GPT2Config
    from tw_jax.models.hf_io import save_gpt2

    base = GPT2Config(vocab_size=50257, n_positions=256, n_embd=64, n_layer=3, n_head=4)
    variables = jax.jit(GPT2(base).init)(jax.random.key(7), jnp.zeros((1, 8), jnp.int32))
    hf_params = jax.device_get(jax.tree.map(np.asarray, variables["params"]))
    hf_params = jax.tree.map(np.asarray, __import__("flax").linen.unbox(hf_params))
    save_gpt2(tmp_path / "hf", base, hf_params)

    bindings = [*data_bindings, f"INITIAL_CHECKPOINT_PATH='{tmp_path / 'hf'}'"]
    _, run = _train("gpt2_tiny", "lora", tmp_path / "run", bindings, steps=4)
    expected_fresh = {f"h_{i}/attn/{p}/lora_{m}" for i in range(3) for p in ("query", "value")
                      for m in "ab"}
    assert set(run.fresh_parameters) == expected_fresh
    trained = jax.device_get(run.params)
    for i in range(3):  # frozen base weights are exactly the Hugging Face ones
        for name in ("query", "value", "out"):
            np.testing.assert_array_equal(
                trained[f"h_{i}"]["attn"][name]["kernel"], hf_params[f"h_{i}"]["attn"][name]["kernel"]
            )
        assert np.any(trained[f"h_{i}"]["attn"]["value"]["lora_b"])  # LoRA trained
    np.testing.assert_array_equal(trained["wte"]["embedding"], hf_params["wte"]["embedding"])
