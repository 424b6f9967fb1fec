"""`tw-jax eval` / `tw-jax infer` on a trained checkpoint, and loading a run at any step
(tw_jax.evaluate.task_eval, tw_jax.evaluate.runs)."""

import json
import math

import pytest
import seqio

from tw_jax.cli import main
from tw_jax.train import gin_setup, trainer

T5_FILES = ["diff.gin", "models/t5_tiny.gin", "runs/cpu_smoke.gin"]


def _cli_bindings(bindings, model_dir):
    return [f"--gin.{b}" for b in bindings] + [f"--gin.MODEL_DIR={model_dir}"]


def test_eval_and_infer_a_trained_checkpoint(tmp_path, data_bindings, capsys):
    model_dir = tmp_path / "run"
    gin_setup.parse(T5_FILES, [*data_bindings, f"MODEL_DIR='{model_dir}'", "TRAIN_STEPS=3"])
    trainer.train(gin_setup.train_config())
    files = [f"--gin_file={name}" for name in T5_FILES]

    assert main(["eval", *files, *_cli_bindings(data_bindings[:3], model_dir)]) == 0
    (written,) = (model_dir / "eval").glob("*.json")
    assert written.name == "twiki_diffset_0809_ssm.validation.step3.json"
    metrics = json.loads(written.read_text())
    examples = seqio.get_mixture_or_task("twiki_diffset_0809_ssm").get_dataset(
        {"inputs": 64, "targets": 32}, split="validation", shuffle=False, num_epochs=1
    )
    assert metrics["examples"] == len(list(examples)) == 17
    assert metrics["step"] == 3
    # token_perplexity: exp of the mean token loss; perplexity: the mean of per-example ones
    assert metrics["token_perplexity"] == math.exp(metrics["loss"])
    assert metrics["perplexity"] > 1 and metrics["token_perplexity"] > 1
    assert metrics["unscored_examples"] == 0
    # the task's own perplexity metric sees the same scores and token counts
    task = metrics["task_metrics"]
    assert task == {"perplexity": metrics["perplexity"],
                    "token_perplexity": metrics["token_perplexity"]}
    assert 0.0 <= metrics["accuracy"] <= 1.0
    printed = capsys.readouterr().out
    assert f" perplexity={metrics['perplexity']}" in printed
    assert f"token_perplexity={metrics['token_perplexity']}" in printed

    bindings = [*_cli_bindings(data_bindings[:3], model_dir), "--gin.tw_jax.evaluate.infer.max_examples=5"]
    assert main(["infer", *files, *bindings]) == 0
    output = model_dir / "infer" / "twiki_diffset_0809_ssm.validation.jsonl"
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["index"] for r in records] == [0, 1, 2, 3, 4]
    assert all(isinstance(r["prediction"], str) for r in records)
    assert all(r["targets"].startswith("<extra_id_0>") for r in records)


def test_a_run_loads_at_any_step(tmp_path, data_bindings):
    """tw_jax.evaluate.runs: the model a MODEL_DIR's gin files build, with the parameters of the
    step asked for (default the latest), inside the run's mesh."""
    import jax
    import numpy as np

    from tw_jax.evaluate.runs import ModelSource, loaded_run
    from tw_jax.train import checkpoints

    files = ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"]
    model_dir = tmp_path / "steps"
    bindings = [*data_bindings, "TRAIN_STEPS=4", "CHECKPOINT_PERIOD=2", "KEEP_CHECKPOINTS=None"]
    gin_setup.parse(files, [*bindings, f"MODEL_DIR='{model_dir}'"])
    trained = trainer.train(gin_setup.train_config())

    def leaves(params):
        return [np.asarray(x) for x in jax.tree.leaves(params)]

    source = ModelSource(model_dir=str(model_dir), gin_files=files, gin_bindings=bindings)
    with loaded_run(source) as latest:
        assert latest.step == 4
        assert latest.model.vocabulary_kind == "gpt2"
        final = leaves(latest.params)
    for a, b in zip(final, leaves(trained.params), strict=True):
        np.testing.assert_array_equal(a, b)
    source.step = 2
    with loaded_run(source) as second:
        assert second.step == 2
        assert any(not np.array_equal(a, b) for a, b in zip(leaves(second.params), final,
                                                            strict=True))
    source.step = 3
    with (pytest.raises(checkpoints.CheckpointError, match="no checkpoint to evaluate"),
          loaded_run(source)):
        pass


def test_feature_text_reads_past_a_leading_bos():
    """GPT-2 probe rows start with EOS standing for BOS: infer's texts are what follows it."""
    import numpy as np

    from tw_jax.evaluate.task_eval import _text

    class Vocab:
        eos_id = 0

        def decode(self, ids):
            return ",".join(map(str, ids))

    assert _text(Vocab(), np.array([0, 5, 6, 0, 0])) == "5,6"
    assert _text(Vocab(), np.array([5, 0, 6])) == "5"
    assert _text(Vocab(), None) is None
