"""``--model tw_jax`` on a tw_jax training run: ``model_dir=MODEL_DIR[,step=N]``.

A tiny GPT-2 trains 2 steps on the sample world (a checkpoint at each step). lm-eval with
``TwJaxLM(model_dir=RUN)`` gives each probe of an object task (loglikelihood) and of a text
task (loglikelihood_rolling) the log-likelihood and greedy flag ``tw-jax eval --per-probe``
gives with the run's own ``config.gin`` and the same step (<= 1e-4), and not those of the
model the run started from (its step-0 parameters); ``step=1`` scores the earlier step. The
command line writes results, and a folder that is not a run is a one-line error naming it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

lm_eval = pytest.importorskip("lm_eval")

from tw_jax.cli import main  # noqa: E402

PERIOD, CATEGORY, LIMIT = "0809", "updated", 4
OBJECT = f"twiki_probes_{PERIOD}_{CATEGORY}_object"  # loglikelihood
TEXT = f"twiki_probes_{PERIOD}_{CATEGORY}"  # loglikelihood_rolling
TOLERANCE = 1e-4
# gpt2_tiny.gin made smaller still: one layer of width 32 (test_lm_eval.py's HF GPT-2 has 2)
MODEL = ["tw_jax.models.GPT2Config.n_layer=1", "tw_jax.models.GPT2Config.n_embd=32",
         "tw_jax.models.GPT2Config.n_head=2"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def own_tasks_only(monkeypatch):
    """lm-eval's command line indexes its whole task library first (about 9 s a call on two
    busy cores); these runs need the exported tasks alone (``--include_path``)."""
    import lm_eval.tasks

    class OwnTasks(lm_eval.tasks.TaskManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "include_defaults": False})

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", OwnTasks)


def _data_bindings(train_data) -> list[str]:
    """conftest's ``data_bindings`` (a function fixture) for the module's fixtures."""
    import tw_jax.tasks

    tw_jax.tasks.register_all(train_data["data_dir"], t5_vocab=str(train_data["t5"]),
                              gpt2_vocab=str(train_data["gpt2"]))
    return [f"DATA_DIR='{train_data['data_dir']}'",
            f"tw_jax.tasks.register_all.t5_vocab='{train_data['t5']}'",
            f"tw_jax.tasks.register_all.gpt2_vocab='{train_data['gpt2']}'",
            "tw_jax.train.train.progress=False"]


@pytest.fixture(scope="module")
def run(train_data, compile_cache, tmp_path_factory) -> Path:
    """MODEL_DIR of 2 steps of FULL on a tiny GPT-2, checkpoints of steps 1 and 2."""
    from tw_jax.data.vocabularies import gpt2_vocabulary

    model_dir = tmp_path_factory.mktemp("lm_eval_run") / "run"
    flags = [f"--gin_file={f}" for f in ("full.gin", "models/gpt2_tiny.gin",
                                         "runs/cpu_smoke.gin")]
    vocab_size = gpt2_vocabulary(str(train_data["gpt2"])).vocab_size  # the data's, as the demo
    bindings = [*_data_bindings(train_data), *MODEL, f"MODEL_DIR='{model_dir}'",
                f"tw_jax.models.GPT2Config.vocab_size={vocab_size}",
                "TRAIN_STEPS=2", "CHECKPOINT_PERIOD=1", "KEEP_CHECKPOINTS=2", "BATCH_SIZE=2",
                "TASK_FEATURE_LENGTHS={'targets': 32}", "SCHEDULE='constant'"]
    assert main(["train", *flags, *(f"--gin.{b}" for b in bindings)]) == 0
    assert sorted(int(p.name) for p in (model_dir / "checkpoints").iterdir()) == [1, 2]
    assert (model_dir / "config.gin").is_file()
    return model_dir


@pytest.fixture(scope="module")
def exported(train_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lm_eval_tasks")
    assert main(["lm-eval-tasks", "--data", str(train_data["data_dir"]), "--out", str(out),
                 "--no-siblings"]) == 0
    return out


@pytest.fixture(scope="module")
def task_manager(exported):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(exported), include_defaults=False)


def _per_sample(lm, task_manager) -> dict[tuple[str, int], object]:
    """``{(task, probe index): response}`` of the first LIMIT probes of OBJECT and TEXT."""
    found = lm_eval.simple_evaluate(model=lm, tasks=[OBJECT, TEXT], task_manager=task_manager,
                                    limit=LIMIT, log_samples=True, bootstrap_iters=0)
    samples = {(task, int(s["doc"]["id"].rsplit("/", 1)[1])): s["resps"][0][0]
               for task, samples in found["samples"].items() for s in samples}
    assert len(samples) == 2 * LIMIT
    return samples


def _tw_jax_eval(run: Path, step: int, task: str, train_data, out: Path) -> dict[int, dict]:
    """``tw-jax eval --per-probe`` of step ``step`` of the run with its own config.gin, on the
    first LIMIT probes of ``task``: ``{index: line}``."""
    per_probe = out / f"{task}_{step}.jsonl"
    bindings = [*_data_bindings(train_data), f"MODEL_DIR='{out / 'eval'}'",
                f"tw_jax.evaluate.evaluate.checkpoint_path='{run / 'checkpoints' / str(step)}'",
                "TASK_FEATURE_LENGTHS={'inputs': 32, 'targets': 32}", f"BATCH_SIZE={LIMIT}",
                f"tw_jax.evaluate.evaluate.max_examples={LIMIT}"]
    assert main(["eval", "--task", task, "--per-probe", str(per_probe),
                 f"--gin_file={run / 'config.gin'}", *(f"--gin.{b}" for b in bindings)]) == 0
    lines = [json.loads(t) for t in per_probe.read_text().splitlines()]
    assert [line["index"] for line in lines] == list(range(LIMIT))
    return {line["index"]: line for line in lines}


def _differences(lm_scores, evals) -> dict[str, float]:
    """The largest |lm-eval − tw-jax eval| of each task; the greedy flags must be equal."""
    worst = {}
    for (task, index), found in lm_scores.items():
        line = evals[task][index]
        ll = found[0] if task == OBJECT else found
        if task == OBJECT:
            assert found[1] == line["greedy"], (task, index, found, line)
        worst[task] = max(worst.get(task, 0.0), abs(ll - line["log_likelihood"]))
    return worst


def _log_likelihoods(lm_scores) -> list[float]:
    return [v[0] if task == OBJECT else v for (task, _), v in sorted(lm_scores.items())]


def test_model_dir_scores_the_runs_checkpoint_as_tw_jax_eval_does(run, task_manager,
                                                                  train_data, tmp_path):
    from tw_jax.evaluate.runs import LoadedRun
    from tw_jax.lm_eval.model import TwJaxLM

    latest = TwJaxLM(model_dir=str(run), batch_size=LIMIT)
    assert latest.loaded.step == 2
    trained = _per_sample(latest, task_manager)
    evals = {task: _tw_jax_eval(run, 2, task, train_data, tmp_path) for task in (OBJECT, TEXT)}
    worst = _differences(trained, evals)
    assert max(worst.values()) <= TOLERANCE, worst

    # the parameters the run started from (its seed's initialisation) score otherwise
    latest.loaded = LoadedRun(latest.loaded.run, latest.loaded.run.init_params(0), None)
    fresh = _per_sample(latest, task_manager)
    gaps = [abs(a - b) for a, b in zip(_log_likelihoods(trained), _log_likelihoods(fresh),
                                       strict=True)]
    assert min(gaps) > 10 * TOLERANCE, gaps

    # step=1: the earlier checkpoint, as tw-jax eval scores it
    earlier = TwJaxLM(model_dir=str(run), step="1", batch_size=LIMIT)
    assert earlier.loaded.step == 1
    first = _per_sample(earlier, task_manager)
    evals_1 = {task: _tw_jax_eval(run, 1, task, train_data, tmp_path) for task in (OBJECT, TEXT)}
    worst_1 = _differences(first, evals_1)
    assert max(worst_1.values()) <= TOLERANCE, worst_1
    gaps_1 = [abs(a - b) for a, b in zip(_log_likelihoods(trained), _log_likelihoods(first),
                                         strict=True)]
    assert min(gaps_1) > 10 * TOLERANCE, gaps_1


def test_tw_jax_lm_eval_runs_lm_eval_on_a_run_folder(run, exported, tmp_path, own_tasks_only):
    out = tmp_path / "results"
    assert main(["lm-eval", "--model", "tw_jax", "--model_args",
                 f"model_dir={run},batch_size=4", "--include_path", str(exported),
                 "--tasks", OBJECT, "--limit", "2", "--output_path", str(out)]) == 0
    written = [json.loads(p.read_text()) for p in out.rglob("results_*.json")]
    assert written and "acc,none" in written[0]["results"][OBJECT]


def test_a_folder_that_is_not_a_run_is_a_one_line_error(run, exported, tmp_path, capsys,
                                                        own_tasks_only):
    from tw_jax.errors import UsageError
    from tw_jax.lm_eval.model import TwJaxLM

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match=f"{empty}.*config.gin"):
        TwJaxLM(model_dir=str(empty))
    with pytest.raises(UsageError, match=f"{tmp_path / 'missing'}"):
        TwJaxLM(model_dir=str(tmp_path / "missing"))
    untrained = tmp_path / "untrained"  # a config.gin but no checkpoint
    untrained.mkdir()
    shutil.copy(run / "config.gin", untrained / "config.gin")
    with pytest.raises(UsageError, match=f"{untrained}.*no checkpoint"):
        TwJaxLM(model_dir=str(untrained))
    with pytest.raises(UsageError, match=f"{run / 'checkpoints' / '7'}.*no checkpoint"):
        TwJaxLM(model_dir=str(run), step=7)
    # gin files of another model than the run trained (gpt2_tiny.gin's own sizes)
    with pytest.raises(UsageError, match=f"{run}"):
        TwJaxLM(model_dir=str(run), gin_file="full.gin;models/gpt2_tiny.gin;runs/cpu_smoke.gin")

    capsys.readouterr()
    assert main(["lm-eval", "--model", "tw_jax", "--model_args", f"model_dir={empty}",
                 "--include_path", str(exported), "--tasks", OBJECT, "--limit", "1",
                 "--output_path", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    lines = [t for t in err.splitlines() if t.startswith("tw-jax lm-eval")]
    assert len(lines) == 1 and str(empty) in lines[0], lines
    assert "Traceback" not in err
