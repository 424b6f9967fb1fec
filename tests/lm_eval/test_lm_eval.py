"""The probes as lm-eval tasks, tw_jax models in lm-eval, and the same numbers three ways.

On the sample world's probes (tests/conftest.py's ``train_data``), for a tiny random GPT-2 (the
fixture GPT-2 tokenizer) and a tiny Llama (a ``llama3``-style tokenizer of its own), both saved
by transformers: lm-eval's ``hf`` backend, lm-eval with ``--model tw_jax`` and ``tw-jax eval
--per-probe`` give each probe the same log-likelihood (<= 1e-4, float32) and greedy flag.
The ``hf`` backend frames a text as its tokenizer does (docs/lm_eval.md): tw_jax's BOS-first
row is ``add_bos_token=True`` for the object tasks and ``False`` for the rolling text tasks.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

lm_eval = pytest.importorskip("lm_eval")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tw_jax.cli import main  # noqa: E402
from tw_jax.evaluate.per_probe import probe_keys  # noqa: E402
from tw_jax.lm_eval import probe_utils  # noqa: E402
from tw_jax.text import answers  # noqa: E402

PERIOD, CATEGORY, LIMIT = "0809", "updated", 4
OBJECT = f"twiki_probes_{PERIOD}_{CATEGORY}_object"
TEXT = f"twiki_probes_{PERIOD}_{CATEGORY}"
GEN = f"twiki_probes_{PERIOD}_{CATEGORY}_object_gen"
TOLERANCE = 1e-4


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def exported(train_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lm_eval_tasks")
    assert main(["lm-eval-tasks", "--data", str(train_data["data_dir"]), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def task_manager(exported):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(exported), include_defaults=False)


def _gpt2(folder: Path, train_data) -> Path:
    shutil.copytree(train_data["gpt2"], folder)
    # lm-eval's hf backend needs the tokenizer's EOS (GPT-2's <|endoftext|>, BOS too)
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
         "unk_token": "<|endoftext|>", "tokenizer_class": "PreTrainedTokenizerFast"}))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    eos = tokenizer.eos_token_id
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=128,
                                     vocab_size=len(tokenizer), bos_token_id=eos,
                                     eos_token_id=eos)
    transformers.GPT2LMHeadModel(config).save_pretrained(str(folder))
    return folder


def _llama(folder: Path, train_data) -> Path:
    from tw_jax.data.tokenizer_styles import write_tokenizer

    texts = [p.read_text() for p in sorted(Path(train_data["data_dir"]).glob("*/probes/*.csv"))]
    write_tokenizer(folder, "llama3", texts)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True)
    transformers.LlamaForCausalLM(config).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def models(train_data, tmp_path_factory) -> dict[str, Path]:
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("hf_models")
    return {"gpt2": _gpt2(root / "gpt2", train_data), "llama": _llama(root / "llama", train_data)}


def _per_sample(lm, tasks, task_manager) -> dict[tuple[str, str], object]:
    """``{(task, doc id): response}`` of a simple_evaluate run with ``--limit``."""
    found = lm_eval.simple_evaluate(model=lm, tasks=tasks, task_manager=task_manager,
                                    limit=LIMIT, log_samples=True, bootstrap_iters=0)
    return {(task, s["doc"]["id"]): s["resps"][0][0]
            for task, samples in found["samples"].items() for s in samples}


def _model_bindings(folder: Path) -> list[str]:
    """gin bindings of the folder's model config where it differs from its class's defaults."""
    from tw_jax.models import hf_folder_config

    config = hf_folder_config(str(folder))
    default = type(config)()
    name = type(config).__name__
    return [f"tw_jax.models.{name}.{f.name}={getattr(config, f.name)!r}"
            for f in dataclasses.fields(config)
            if f.name == "vocab_size" or getattr(config, f.name) != getattr(default, f.name)]


def _tw_jax_eval(folder: Path, task: str, gin_model: str, train_data, out: Path) -> dict:
    """``tw-jax eval --per-probe`` of the first LIMIT probes of ``task``: ``{index: line}``."""
    data = train_data
    bindings = [*_model_bindings(folder), f"DATA_DIR='{data['data_dir']}'",
                f"tw_jax.tasks.register_all.t5_vocab='{data['t5']}'",
                f"tw_jax.tasks.register_all.gpt2_vocab='{data['gpt2']}'",
                f"MODEL_DIR='{out / 'run'}'", f"tw_jax.evaluate.evaluate.checkpoint_path='{folder}'",
                "TASK_FEATURE_LENGTHS={'inputs': 32, 'targets': 32}", f"BATCH_SIZE={LIMIT}",
                f"tw_jax.evaluate.evaluate.max_examples={LIMIT}"]
    per_probe = out / f"{task}.jsonl"
    import tw_jax.tasks

    # as a new process finds them: an earlier test of this worker may have registered the
    # folder's tasks with its own vocabulary (DATA/vocab/gpt2), which eval would then reuse
    tw_jax.tasks.register_all(data["data_dir"], t5_vocab=str(data["t5"]),
                              gpt2_vocab=str(data["gpt2"]))
    flags = [f"--gin_file={f}" for f in ("initial.gin", gin_model, "runs/cpu_smoke.gin")]
    assert main(["eval", "--task", task, "--per-probe", str(per_probe), *flags,
                 *(f"--gin.{b}" for b in bindings)]) == 0
    lines = [json.loads(t) for t in per_probe.read_text().splitlines()]
    assert [line["index"] for line in lines] == list(range(LIMIT))
    return {line["index"]: line for line in lines}


def test_the_export_is_every_period_and_category_as_lm_eval_tasks(exported, task_manager,
                                                                   train_data, capsys):
    data = Path(train_data["data_dir"])
    names = set(task_manager.all_tasks)
    for probes in sorted(data.glob("*/probes/*.csv")):
        category = probes.stem
        if category.startswith("lighttuning"):
            continue
        rows = list(csv.DictReader(probes.open(encoding="utf-8")))
        period = probes.parent.parent.name
        tasks = {f"twiki_probes_{period}_{category}{s}" for s in ("", "_object", "_object_gen")}
        if not rows:  # an empty set has no task (lm-eval cannot evaluate one)
            assert not tasks & names
            continue
        assert tasks <= names
        docs = [json.loads(t) for t in (exported / "docs" / f"{period}_{category}.jsonl")
                .read_text(encoding="utf-8").splitlines()]
        assert [d["key"] for d in docs] == [str(k) for k in probe_keys(rows).tolist()]
        assert docs[0]["prompt"] + docs[0]["target"] == f"{rows[0]['subject']} " \
            f"{rows[0]['relation']} {rows[0]['object']}"
    assert {"twiki_probes", f"twiki_probes_{PERIOD}", f"twiki_probes_{PERIOD}_changed"} <= names
    # lm-eval's own command line lists them (through tw-jax lm-eval)
    assert main(["lm-eval", "ls", "tasks", "--include_path", str(exported)]) == 0
    assert OBJECT in capsys.readouterr().out
    # the written scoring copies tw_jax's SQuAD normalisation
    for prediction, answer in (("The  Eiffel-Tower!", "eiffel tower"), ("an apple", "Apple pie"),
                               ("", ""), ("Paris\nFrance", "paris")):
        assert probe_utils.exact_match(prediction, answer) == answers.exact_match(prediction,
                                                                                  answer)
        assert probe_utils.token_f1(prediction, answer) == answers.token_f1(prediction, answer)
    assert (exported / "utils.py").read_text() == Path(probe_utils.__file__).read_text()


@pytest.mark.parametrize(("name", "gin_model", "suffix"), [
    ("gpt2", "models/gpt2_tiny.gin", ""), ("llama", "models/llama_tiny.gin", "_lm_llama")])
def test_hf_lm_eval_tw_jax_lm_and_tw_jax_eval_agree_probe_by_probe(
        name, gin_model, suffix, models, task_manager, train_data, tmp_path):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from tw_jax.lm_eval.model import TwJaxLM

    folder = models[name]
    ours = TwJaxLM(pretrained=str(folder), batch_size=LIMIT)
    tw = _per_sample(ours, [OBJECT, TEXT, GEN], task_manager)
    hf = {}
    for add_bos, tasks in ((True, [OBJECT]), (False, [TEXT, GEN])):
        backend = HFLM(pretrained=str(folder), device="cpu", batch_size=LIMIT, dtype="float32",
                       add_bos_token=add_bos)
        hf.update(_per_sample(backend, tasks, task_manager))
    evals = {TEXT: _tw_jax_eval(folder, f"{TEXT}{suffix}", gin_model, train_data, tmp_path),
             OBJECT: _tw_jax_eval(folder, f"twiki_probes_{PERIOD}_{CATEGORY}{suffix}_object",
                                  gin_model, train_data, tmp_path)}
    assert len(hf) == len(tw) == 3 * LIMIT
    worst = {}
    for (task, doc_id), found in hf.items():
        index = int(doc_id.rsplit("/", 1)[1])
        if task == GEN:  # greedy decoding: the same text
            assert tw[(task, doc_id)] == found
            continue
        ll_hf = found[0] if task == OBJECT else found
        ll_tw = tw[(task, doc_id)][0] if task == OBJECT else tw[(task, doc_id)]
        ll_eval = evals[task][index]["log_likelihood"]
        worst[task] = max(worst.get(task, 0.0), abs(ll_hf - ll_tw), abs(ll_hf - ll_eval))
        if task == OBJECT:
            assert found[1] == tw[(task, doc_id)][1] == evals[task][index]["greedy"]
    assert max(worst.values()) <= TOLERANCE, worst

    # flags that are true: the continuation greedy decoding writes after BOS + prompt (the hf
    # backend's generation with add_bos_token=True), re-read as text
    backend = HFLM(pretrained=str(folder), device="cpu", batch_size=LIMIT, dtype="float32",
                   add_bos_token=True)
    prompts = [(p, {"until": ["\n"], "max_gen_toks": 2}) for p in ("Trurmouth", "Real", "The")]
    continuations = backend.generate_until([Instance("generate_until", {}, p, 0)
                                            for p in prompts])
    requests = [Instance("loglikelihood", {}, (p[0], c), 0)
                for p, c in zip(prompts, continuations, strict=True) if c.strip()]
    flags = [g for _, g in backend.loglikelihood(requests)]
    assert [g for _, g in ours.loglikelihood(requests)] == flags
    assert any(flags), continuations

def test_tw_jax_lm_eval_runs_lm_eval_with_the_tw_jax_model(models, exported, tmp_path):
    out = tmp_path / "results"
    assert main(["lm-eval", "--model", "tw_jax", "--model_args",
                 f"pretrained={models['gpt2']},batch_size=4", "--include_path", str(exported),
                 "--tasks", f"{OBJECT},{TEXT}", "--limit", "2", "--output_path", str(out)]) == 0
    written = [json.loads(p.read_text()) for p in out.rglob("results_*.json")]
    assert written and {OBJECT, TEXT} <= set(written[0]["results"])
    assert "acc,none" in written[0]["results"][OBJECT]
    assert "bits_per_byte,none" in written[0]["results"][TEXT]


def test_a_second_lm_eval_run_in_one_process_logs_to_its_own_stderr(monkeypatch):
    """lm-eval's console handler keeps the stderr of the first run; a notebook or a test that
    replaced (and closed) it since would get '--- Logging error ---' tracebacks."""
    import io
    import logging
    import sys

    from tw_jax.lm_eval import cli as lm_eval_cli

    first = io.StringIO()
    handler = logging.StreamHandler(first)
    monkeypatch.setattr(logging.getLogger("lm_eval"), "handlers", [handler])
    first.close()
    now = io.StringIO()
    monkeypatch.setattr(sys, "stderr", now)
    lm_eval_cli._log_to_this_stderr()
    logging.getLogger("lm_eval").handlers[0].emit(logging.makeLogRecord({"msg": "scored"}))
    assert now.getvalue() == "scored\n"
