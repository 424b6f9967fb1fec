"""One definition of probe perplexity: ``tw-jax eval`` on a probe task reproduces the number the
lifelong runner wrote to results.jsonl (the report's) for the same checkpoint and probes, for
GPT-2 (probe text, object) and T5 (object given the prompt, cloze).

INITIAL is trained by the runner itself (two steps), scored on the first ``MAX_PROBES`` probes
of each category; ``tw-jax eval`` scores the first batch of ``MAX_PROBES`` examples of the same
task, which holds the same rows in the same order. The two paths share the formula and the
scored tokens but not the batch shapes (padding, batch size), so a float32 log-probability may
differ in its last bit: the mean NLLs (log perplexities) must agree to 4 float32 ulps, i.e.
the perplexities to ~5e-6 relative for these untrained models (NLL ~11); they agree to <= 7e-7.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tw_jax.cli import main
from tw_jax.evaluate.month_eval import read_probes
from tw_jax.lifelong.runner import LifelongOptions, run_lifelong
from tw_jax.models import GPT2Config, T5Config, model_for
from tw_jax.tasks import LazyVocabulary
from tw_jax.time import Period

MONTH = "0809"
MAX_PROBES = 16
RUN = ["runs/cpu_smoke.gin"]
SHORT = ["TRAIN_STEPS=2", "BATCH_SIZE=2", "SCHEDULE='constant'",
         "tw_jax.train.train.progress=False"]


def _same(found: float, report: float) -> bool:
    """Equal up to float32 rounding of the log-probabilities: 4 ulps of the mean NLL."""
    return math.isclose(math.log(found), math.log(report), rel_tol=4 * np.finfo(np.float32).eps)


def _vocab_bindings(data_bindings: list[str]) -> list[str]:
    return [b for b in data_bindings if b.startswith("tw_jax.tasks.register_all.")]


def _initial(tmp: Path, model_gin: str, metrics: list[str], data_bindings, train_data) -> dict:
    """INITIAL trained and scored by the lifelong runner; its checkpoint and results."""
    out = tmp / "out"
    run_lifelong(LifelongOptions(
        gin_files=["initial.gin", model_gin, *RUN],
        gin_bindings=[*_vocab_bindings(data_bindings), *SHORT],
        months=[MONTH], out_dir=str(out), data_dir=str(train_data["data_dir"]), metrics=metrics,
        max_probes=MAX_PROBES, eval_batch_size=MAX_PROBES,
    ))
    lines = [json.loads(t) for t in (out / "results.jsonl").read_text().splitlines()]
    report = {(r["category"], r["metric"]): r["value"] for r in lines
              if (r["method"], r["trained_through"], r["eval_month"]) == ("initial", "base", MONTH)}
    return {"model_dir": out / "checkpoints" / "initial" / Period.parse(MONTH).old.name,
            "report": report}


def _eval(model_gin: str, model_dir: Path, task: str, data_bindings, *extra: str) -> dict:
    """``tw-jax eval`` of the first MAX_PROBES examples of ``task``: its metrics."""
    flags = [f"--gin_file={f}" for f in ("initial.gin", model_gin, *RUN)]
    flags += [f"--gin.{b}" for b in (*data_bindings[:3], f"MODEL_DIR='{model_dir}'",
                                     f"MIXTURE_OR_TASK_NAME='{task}'", f"BATCH_SIZE={MAX_PROBES}",
                                     f"tw_jax.evaluate.evaluate.max_examples={MAX_PROBES}", *extra)]
    assert main(["eval", *flags]) == 0
    written = model_dir / "inference_eval" / f"{task}.validation.step2.json"
    return json.loads(written.read_text())["tasks"][task]


def _scored(config, vocabulary, category: str, variant: str, data_dir: Path) -> tuple[int, int]:
    """(probes, scored tokens) the runner scored for ``category`` (CHANGED: UPDATED + NEW)."""
    parts = ("updated", "new") if category == "changed" else (category,)
    rows = [r for part in parts for r in read_probes(str(data_dir), Period.parse(MONTH), part, MAX_PROBES)]
    assert len(rows) <= MAX_PROBES  # so the eval's first batch holds the same rows
    examples = [model_for(config).probe_example(vocabulary, row, variant) for row in rows]
    return len(rows), int(sum(sum(e.weights) for e in examples))


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("one_perplexity")


def test_gpt2_eval_gives_the_reports_probe_perplexity(module_tmp, data_bindings, train_data,
                                                     capsys):
    model_gin = "models/gpt2_tiny.gin"
    initial = _initial(module_tmp / "gpt2", model_gin, ["ppl", "ppl_object"], data_bindings,
                       train_data)
    vocabulary = LazyVocabulary("gpt2", str(train_data["gpt2"])).vocabulary
    object_lengths = "TASK_FEATURE_LENGTHS={'inputs': 32, 'targets': 32}"
    for category, suffix, metric, extra in (
        ("unchanged", "", "ppl", ()),
        ("changed", "", "ppl", ()),  # UPDATED then NEW rows, one mean over both
        ("unchanged", "_object", "ppl_object", (object_lengths,)),
    ):
        task = f"twiki_probes_{MONTH}_{category}{suffix}"
        found = _eval(model_gin, initial["model_dir"], task, data_bindings, *extra)
        report = initial["report"][(category, metric)]
        assert _same(found["perplexity"], report), (task, found["perplexity"], report)
        # the token-level number is a different one, under its own name
        assert not _same(found["token_perplexity"], found["perplexity"])
        # the scored tokens are the report's: every probe-text token (BOS first), the object's
        variant = "text" if metric == "ppl" else "object"
        scored = _scored(GPT2Config(), vocabulary, category, variant, train_data["data_dir"])
        assert (found["examples"], found["tokens"]) == scored
    assert "perplexity=" in capsys.readouterr().out

    # The object task has a prompt: without an inputs length GPT-2 would silently drop it.
    flags = [f"--gin_file={f}" for f in ("initial.gin", model_gin, *RUN)]
    flags += [f"--gin.{b}" for b in (*data_bindings[:3], f"MODEL_DIR='{initial['model_dir']}'",
                                     f"MIXTURE_OR_TASK_NAME='twiki_probes_{MONTH}_new_object'")]
    assert main(["eval", *flags]) == 2
    assert "has inputs (a prompt)" in capsys.readouterr().err


def test_t5_eval_gives_the_reports_probe_perplexity(module_tmp, data_bindings, train_data):
    model_gin = "models/t5_tiny.gin"
    initial = _initial(module_tmp / "t5", model_gin, ["ppl", "ppl_cloze"], data_bindings,
                       train_data)
    vocabulary = LazyVocabulary("t5", str(train_data["t5"])).vocabulary
    for category, suffix, metric, variant in (
        ("changed", "_ssm", "ppl", "text"),
        ("unchanged", "_ssm_cloze", "ppl_cloze", "cloze"),
    ):
        task = f"twiki_probes_{MONTH}_{category}{suffix}"
        found = _eval(model_gin, initial["model_dir"], task, data_bindings)
        report = initial["report"][(category, metric)]
        assert _same(found["perplexity"], report), (task, found["perplexity"], report)
        # the object's tokens only: not the sentinel, not EOS
        scored = _scored(T5Config(), vocabulary, category, variant, train_data["data_dir"])
        assert (found["examples"], found["tokens"]) == scored


def _evaluator(run: Path, model_gin: str, mixture: str, **model_options):
    """seqio.Evaluator on ``mixture``'s first MAX_PROBES examples per task, with the model
    functions any seqio user gets from tw_jax: ``{task: {metric: value}}``."""
    import seqio

    from tw_jax.evaluate.seqio_eval import seqio_model

    fns = seqio_model(str(run), gin_files=["initial.gin", model_gin, *RUN],
                      batch_size=MAX_PROBES, **model_options)
    evaluator = seqio.Evaluator(mixture, fns.feature_converter, num_examples=MAX_PROBES,
                                async_compute_metrics=False)
    future, _ = evaluator.evaluate(compute_metrics=True, score_fn=fns.score_fn,
                                   predict_fn=fns.predict_fn)
    return {task: {k: float(getattr(v, "value", v)) for k, v in values.items()}
            for task, values in future.result().items()}


def test_seqio_evaluator_on_the_gpt2_probe_mixture(module_tmp, data_bindings, train_data,
                                                   capsys):
    """One mixture, every category: seqio.Evaluator with tw_jax's score_fn, `tw-jax eval` and
    the report give the same per-category probe perplexity for the same checkpoint."""
    model_gin = "models/gpt2_tiny.gin"
    initial = _initial(module_tmp / "gpt2_mixture", model_gin, ["ppl"], data_bindings,
                       train_data)
    found = _evaluator(initial["model_dir"], model_gin, f"twiki_probes_{MONTH}")
    # the categories with probes (this month deletes no fact: no DELETED task in the mixture)
    categories = sorted(c for c, metric in initial["report"] if metric == "ppl")
    assert categories == ["changed", "new", "unchanged", "updated"]
    assert sorted(found) == [f"twiki_probes_{MONTH}_{c}" for c in categories]
    for category in categories:
        report = initial["report"][(category, "ppl")]
        value = found[f"twiki_probes_{MONTH}_{category}"]["perplexity"]
        assert _same(value, report), (category, value, report)
    # `tw-jax eval` on the mixture is the same Evaluator
    flags = [f"--gin_file={f}" for f in ("initial.gin", model_gin, *RUN)]
    flags += [f"--gin.{b}" for b in (*data_bindings[:3], f"MODEL_DIR='{initial['model_dir']}'",
                                     f"MIXTURE_OR_TASK_NAME='twiki_probes_{MONTH}'",
                                     f"BATCH_SIZE={MAX_PROBES}",
                                     f"tw_jax.evaluate.evaluate.max_examples={MAX_PROBES}")]
    assert main(["eval", *flags]) == 0
    written = initial["model_dir"] / "inference_eval" / f"twiki_probes_{MONTH}.validation.step2.json"
    evaluated = json.loads(written.read_text())["tasks"]
    assert sorted(evaluated) == sorted(found)
    for task, metrics in evaluated.items():  # padded to TASK_FEATURE_LENGTHS, not the longest
        assert (metrics["examples"], metrics["tokens"]) == (found[task]["examples"],
                                                            found[task]["tokens"])
        assert _same(metrics["perplexity"], found[task]["perplexity"]), task
    printed = capsys.readouterr().out.splitlines()
    assert len([line for line in printed if line.startswith(f"twiki_probes_{MONTH}_")]) == 4


def test_seqio_evaluator_on_the_t5_probe_mixture_with_em_and_f1(module_tmp, data_bindings,
                                                                 train_data):
    """T5 on ``twiki_probes_MMMM_ssm``: perplexity of the object and EM/F1 of the greedy
    answers, per category, equal to the report's."""
    model_gin = "models/t5_tiny.gin"
    initial = _initial(module_tmp / "t5_mixture", model_gin, ["ppl", "qa"], data_bindings,
                       train_data)
    found = _evaluator(initial["model_dir"], model_gin, f"twiki_probes_{MONTH}_ssm",
                       max_new_tokens=10)  # the report's decoding length
    for category in ("unchanged", "updated", "new", "changed"):
        metrics = found[f"twiki_probes_{MONTH}_{category}_ssm"]
        assert _same(metrics["perplexity"], initial["report"][(category, "ppl")]), category
        # the outdated answer's EM/F1 where probes have one (UPDATED, and so CHANGED)
        names = ["em", "f1"] + (["em_previous", "f1_previous"]
                                if category in ("updated", "changed") else [])
        assert sorted(n for n in metrics if n.startswith(("em", "f1"))) == sorted(names)
        for name in names:
            assert metrics[name] == pytest.approx(initial["report"][(category, name)],
                                                  abs=1e-9), (category, name)
