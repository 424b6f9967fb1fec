"""`tw-jax eval` / `tw-jax infer` on a trained checkpoint, and loading a run at any step
(tw_jax.evaluate.task_eval, tw_jax.evaluate.runs)."""

import json
import math

import pytest
import seqio

from tw_jax.cli import main
from tw_jax.runtime import gin_setup
from tw_jax.train import trainer
from tw_jax.train.gin_config import train_config

T5_FILES = ["diff.gin", "models/t5_tiny.gin", "runs/cpu_smoke.gin"]


def _tensorboard_scalars(folder) -> dict:
    """``{tag: (step, value)}`` of the scalars in a folder's event files."""
    import tensorflow as tf

    found = {}
    for path in folder.glob("events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                found[value.tag] = (event.step, value.simple_value)
    return found


def _cli_bindings(bindings, model_dir):
    return [f"--gin.{b}" for b in bindings] + [f"--gin.MODEL_DIR={model_dir}"]


def test_eval_and_infer_a_trained_checkpoint(tmp_path, data_bindings, capsys):
    model_dir = tmp_path / "run"
    gin_setup.parse(T5_FILES, [*data_bindings, f"MODEL_DIR='{model_dir}'", "TRAIN_STEPS=3"])
    trainer.train(train_config())
    files = [f"--gin_file={name}" for name in T5_FILES]

    assert main(["eval", *files, *_cli_bindings(data_bindings[:3], model_dir)]) == 0
    out = model_dir / "inference_eval"  # where T5X's evaluation writes
    task = "twiki_diffset_0809_ssm"
    summary = json.loads((out / f"{task}.validation.step3.json").read_text())
    assert summary["step"] == 3 and summary["split"] == "validation"
    metrics = summary["tasks"][task]
    examples = seqio.get_mixture_or_task(task).get_dataset(
        {"inputs": 64, "targets": 32}, split="validation", shuffle=False, num_epochs=1
    )
    assert metrics["examples"] == len(list(examples)) == 17
    assert sorted(metrics) == ["examples", "perplexity", "token_perplexity", "tokens"]
    # seqio's files: the metrics line, every example with its score [log-likelihood, tokens]
    (line,) = (out / f"{task}-metrics.jsonl").read_text().splitlines()
    assert json.loads(line) == {"step": 3, **metrics}
    rows = [json.loads(r) for r in (out / f"{task}-000003.jsonl").read_text().splitlines()]
    assert len(rows) == 17
    scores = [r["score"] for r in rows]
    assert sum(n for _, n in scores) == metrics["tokens"]
    # perplexity: the mean of per-example ones; token_perplexity: exp of the mean token loss
    assert metrics["perplexity"] == pytest.approx(
        sum(math.exp(-ll / n) for ll, n in scores) / 17, rel=1e-12)
    assert metrics["token_perplexity"] == pytest.approx(
        math.exp(-sum(ll for ll, _ in scores) / metrics["tokens"]), rel=1e-12)
    assert _tensorboard_scalars(out / task) == {
        f"eval/{name}": (3, pytest.approx(value, rel=1e-6)) for name, value in metrics.items()}
    printed = capsys.readouterr().out
    assert f"{task} step=3 perplexity={metrics['perplexity']:g}" in printed

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
    from tw_jax.runtime import checkpoints

    files = ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"]
    model_dir = tmp_path / "steps"
    bindings = [*data_bindings, "TRAIN_STEPS=4", "CHECKPOINT_PERIOD=2", "KEEP_CHECKPOINTS=None"]
    gin_setup.parse(files, [*bindings, f"MODEL_DIR='{model_dir}'"])
    trained = trainer.train(train_config())

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
    # The run's own operative config (its model's parameters in gin's MODEL scope) loads it too.
    operative = ModelSource(model_dir=str(model_dir),
                            gin_files=[str(model_dir / "operative_config.gin")])
    with loaded_run(operative) as reloaded:
        assert reloaded.model.config == latest.model.config and reloaded.step == 4
        for a, b in zip(leaves(reloaded.params), final, strict=True):
            np.testing.assert_array_equal(a, b)


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


def test_a_task_whose_split_is_empty_is_one_line(tmp_path, data_bindings, capsys):
    """Before: seqio's traceback ("not enough values to unpack") from deep inside."""
    import flax.linen as nn
    import jax
    import numpy as np
    import tensorflow as tf

    from tw_jax.models import model_for
    from tw_jax.runtime.checkpoints import save_params
    from tw_jax.tasks import metrics

    gin_setup.parse(T5_FILES, data_bindings)
    model = model_for(gin_setup.model_config())
    # A checkpoint of the model's shapes (its values play no part: the split is found empty
    # first); zeros from the shapes, not an initialisation that compiles the whole model.
    shapes = nn.unbox(model.abstract_variables(2, 8)["params"])
    params = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), shapes)
    save_params(tmp_path / "run", 0, params, {"step": 0})
    base = seqio.get_mixture_or_task("twiki_diffset_0809_ssm")
    name = "tw_test_empty_split_ssm"
    seqio.TaskRegistry.add(
        name, source=seqio.FunctionDataSource(
            lambda split, shuffle_files, seed=None: tf.data.Dataset.from_tensor_slices(
                {"inputs": tf.constant([], tf.string), "targets": tf.constant([], tf.string)}),
            splits=["validation"]),
        preprocessors=[seqio.preprocessors.tokenize, seqio.preprocessors.append_eos_after_trim],
        output_features=base.output_features, metric_fns=[metrics.perplexity])
    try:
        files = [f"--gin_file={f}" for f in T5_FILES]
        code = main(["eval", *files, *_cli_bindings(data_bindings[:3], tmp_path / "run"),
                     f"--gin.MIXTURE_OR_TASK_NAME={name}"])
    finally:
        seqio.TaskRegistry.remove(name)
    assert code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [f"tw-jax eval: error: {name}: no examples in the 'validation' split, so "
                     f"nothing to evaluate; evaluate {name}'s other tasks by name, or another "
                     "split (--gin.tw_jax.evaluate.evaluate.split=...)"]
