"""The model protocol is real: a third family (``third_family/rope_family.py``: rotary positions,
RMSNorm, no biases, untied head; one module and one gin file) trains through the unchanged
trainer, is evaluated and decoded by ``tw-jax eval``/``infer``, and is scored, decoded and
ranked by the unchanged evaluators, which agree with direct computations on its forward pass."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

FAMILY_DIR = Path(__file__).resolve().parent / "third_family"
sys.path.insert(0, str(FAMILY_DIR))

import rope_family  # noqa: E402

from tw_jax.data.vocabularies import gpt2_vocabulary  # noqa: E402
from tw_jax.evaluate import ecbd, open_book, task_eval  # noqa: E402
from tw_jax.evaluate.qa import decode_answers, default_protocol  # noqa: E402
from tw_jax.evaluate.rank import RankItem, probe_rank_items, rank_classify  # noqa: E402
from tw_jax.models import model_for  # noqa: E402
from tw_jax.runtime import gin_setup  # noqa: E402
from tw_jax.tasks.ecbd import EcbdExample  # noqa: E402
from tw_jax.tasks.metrics import instance_perplexities  # noqa: E402
from tw_jax.train import trainer  # noqa: E402
from tw_jax.train.flops import train_step_flops  # noqa: E402
from tw_jax.train.gin_config import train_config  # noqa: E402

ROWS = [
    {"subject": "Ada Lovelace", "relation": "country of citizenship", "object": "England",
     "previous_object": ""},
    {"subject": "Paris", "relation": "capital of", "object": "France", "previous_object": ""},
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, train_data, compile_cache):
    import tw_jax.tasks

    tw_jax.tasks.register_all(train_data["data_dir"], t5_vocab=str(train_data["t5"]),
                              gpt2_vocab=str(train_data["gpt2"]))
    model_dir = tmp_path_factory.mktemp("rope") / "run"
    bindings = [
        f"DATA_DIR='{train_data['data_dir']}'",
        f"tw_jax.tasks.register_all.gpt2_vocab='{train_data['gpt2']}'",
        "tw_jax.train.train.progress=False", f"MODEL_DIR='{model_dir}'", "TRAIN_STEPS=8",
        "SCHEDULE='constant'", "LEARNING_RATE=3e-3", "CHECKPOINT_PERIOD=8",
    ]
    files = ["diff.gin", "rope_tiny.gin", "runs/cpu_smoke.gin"]
    gin_setup.parse(files, bindings, [str(FAMILY_DIR)])
    summary = trainer.train(train_config())
    return {"summary": summary, "model_dir": model_dir, "files": files, "bindings": bindings,
            "vocabulary": gpt2_vocabulary(str(train_data["gpt2"]))}

WIDTH = 32  # the test's own forward passes: every row fits


def test_the_trainer_trains_it(trained):
    summary = trained["summary"]
    assert summary.step == 8
    config = rope_family.RopeConfig(d_model=64, n_layer=2, n_head=4, mlp_dim=128)
    model = model_for(config)
    assert isinstance(model, rope_family.RopeModel) and model.objective == "lm"
    params = summary.params
    assert set(params) == {"embed", "layer_0", "layer_1", "final_norm", "lm_head"}
    assert "bias" not in json.dumps(jax.tree.map(lambda x: 0, params))
    losses = [json.loads(line)["loss"]
              for line in (trained["model_dir"] / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 8 and losses[-1] < losses[0]


def test_flops_come_from_its_layout():
    config = rope_family.RopeConfig(d_model=64, n_layer=2, n_head=4, mlp_dim=128)
    kernels = 2 * (4 * 64 * 64 + 3 * 64 * 128) + 64 * 50257  # attention, MLP, LM head
    flops = train_step_flops(config, 4, {"targets": 32})
    assert flops.matmul_forward == 2 * kernels * 4 * 32
    assert flops.matmul_backward_weights == flops.matmul_forward  # everything trains
    assert flops.attention_forward == 2 * 4 * 4 * 32 * 32 * 64


def test_tw_jax_eval_and_infer_run_it(trained):
    gin_setup.parse(trained["files"], trained["bindings"], [str(FAMILY_DIR)])
    summary = task_eval.evaluate()  # seqio.Evaluator with tw_jax's model functions
    ((task, metrics),) = summary["tasks"].items()
    assert summary["step"] == 8 and metrics["examples"] > 0
    # the family's scores, as seqio's per-example output holds them, give the task's metric
    model_dir = Path(gin.query_parameter("%MODEL_DIR"))
    rows = (model_dir / "inference_eval" / f"{task}-000008.jsonl").read_text().splitlines()
    scores = [json.loads(row)["score"] for row in rows]
    assert len(scores) == metrics["examples"]
    assert metrics["token_perplexity"] == pytest.approx(
        math.exp(-sum(ll for ll, _ in scores) / sum(n for _, n in scores)), rel=1e-9)
    gin_setup.parse(trained["files"], [*trained["bindings"], "tw_jax.evaluate.infer.max_examples=3",
                                       "tw_jax.evaluate.infer.max_new_tokens=4"], [str(FAMILY_DIR)])
    output = task_eval.infer()
    records = [json.loads(line) for line in Path(output).read_text().splitlines()]
    assert [r["index"] for r in records] == [0, 1, 2]


def test_the_evaluators_score_decode_and_rank_it(trained):
    params = trained["summary"].params
    vocabulary = trained["vocabulary"]
    model = model_for(rope_family.RopeConfig(d_model=64, n_layer=2, n_head=4, mlp_dim=128))
    @jax.jit  # built once: eager, every operation of the model compiles on its own
    def forward(params, row):
        logits = model.module.apply({"params": params}, row)[0]
        return logits, jax.nn.log_softmax(logits, -1)

    def full_pass(ids):  # (logits, log-softmax) of ids from one forward pass; every row is
        # right-padded to one width, so one compiled graph serves them all (causal: a position
        # never sees the padding after it)
        assert len(ids) <= WIDTH
        row = np.zeros((1, WIDTH), np.int32)
        row[0, : len(ids)] = ids
        return tuple(np.asarray(x)[: len(ids)] for x in forward(params, jnp.asarray(row)))

    def log_probs(ids):  # of ids[1:], each given those before it, from one forward pass
        return full_pass(ids)[1][np.arange(len(ids) - 1), np.asarray(ids[1:])]

    # Probe perplexity: EOS as BOS, every token of "subject relation object" scored.
    scores = model.score(params, [model.probe_example(vocabulary, row, "text") for row in ROWS])
    got = instance_perplexities(scores.log_likelihood, scores.num_tokens)
    for row, value in zip(ROWS, got, strict=True):
        ids = [vocabulary.eos_id, *vocabulary.encode(
            f"{row['subject']} {row['relation']} {row['object']}")]
        assert value == pytest.approx(float(np.exp(-np.mean(log_probs(ids)))), rel=1e-4)

    # ECBD: the span's tokens given the left context, as any decoder-only model reads a blank;
    # no fillers of its own, so recall@k is skipped, not failed.
    example = EcbdExample("1_0", "Paris is the <extra_id_0> of France.", "capital", "capital",
                          "NP", (), "1", "2019", "test", "f:1")
    nll, tokens = ecbd.span_nlls(model, params, vocabulary, [example], [example.masked_sentence])
    ids = [vocabulary.eos_id, *vocabulary.encode("Paris is the capital")]
    span = len(vocabulary.encode(" capital"))
    assert tokens[0] == span
    assert nll[0] == pytest.approx(-float(np.mean(log_probs(ids)[-span:])), rel=1e-4)
    run = ecbd.evaluate_ecbd(model, params, vocabulary, {("2019", "test"): [example]}, "rope",
                             ecbd.EcbdOptions(input_types=("original",), recall_k=2))
    assert run.notes == {ecbd.RECALL_SKIPPED: 1}

    # Its answers are TemporalWiki's teacher-forced ones; prompt and answer share its 256
    # positions, as a decoder-only model's do.
    assert default_protocol(model) == "teacher_forced"
    assert open_book.input_budget(model, 300, 8) == 248

    # Greedy decoding through the cache equals argmax over full forward passes.
    prompt = "Ada Lovelace country of"
    (answer,) = decode_answers(model, params, vocabulary, [prompt], max_new_tokens=5,
                               batch_size=2)
    ids = list(vocabulary.encode(prompt))
    for _ in range(5):
        ids.append(int(np.argmax(full_pass(ids)[0][-1])))
        if ids[-1] == vocabulary.eos_id:
            break
    new = ids[len(vocabulary.encode(prompt)):]
    new = new[: new.index(vocabulary.eos_id)] if vocabulary.eos_id in new else new
    assert answer == model.answer_text(vocabulary.decode(new))

    # Rank classification: the candidate with the higher teacher-forced log-likelihood wins.
    (item,) = probe_rank_items([{"subject": "Paris", "relation": "capital of",
                                 "object": "France", "previous_object": "Spain"}], model)
    assert item == RankItem("Paris capital of", ("France", "Spain"), gold=0)
    result = rank_classify(model, params, vocabulary, [item])
    summed = result.summed[0]
    assert summed.shape == (2,) and np.all(np.isfinite(summed))
    assert result.accuracy == (100.0 if summed[0] > summed[1] else 0.0)
