"""CKL's LAMA sets, ECBD's spans and EvolvingQA's questions as lm-eval tasks (small folders made
here, in the layouts tests/tasks reads): names, documents, the requests lm-eval builds from
them, and a tiny random GPT-2 scored on one task of each kind by lm-eval's ``hf`` backend."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

lm_eval = pytest.importorskip("lm_eval")

from tw_jax.cli import main  # noqa: E402
from tw_jax.errors import DumpError  # noqa: E402
from tw_jax.lm_eval import probe_utils  # noqa: E402
from tw_jax.lm_eval.export import export_all  # noqa: E402
from tw_jax.lm_eval.siblings import NO_LEFT_CONTEXT, SAME_ANSWERS, cloze_prompt  # noqa: E402

# CKL (as tests/tasks/test_ckl_tasks.py's release, with rows whose blank has a left context)
IL = [[0, "Barack Obama was born in <extra_id_0> .", "Honolulu"],
      [1, "The capital of France is <extra_id_0>.", "Paris"]]
UL = [["u1", "<extra_id_0> is the prime minister of England.", "Boris Johnson"],
      ["u2", "The prime minister of England is <extra_id_0> .", "Boris Johnson"]]
UL_ANSWERS = {"u1": [{"old": ["Theresa May"], "new": ["Boris Johnson"]}],
              "u2": [{"old": ["Theresa May"], "new": ["Boris Johnson", "Johnson"]}]}
NLE = [["e1", "Allen Lazard is listed as questionable with a <extra_id_0> injury.", "knee"],
       ["e2", "The volleyball stars chose to study at <extra_id_0> .", "Howard University"]]
# ECBD (tests/tasks/test_ecbd_tasks.py's lines)
GPT = {"ex_id": "Widget Model_5551_4_0",
       "masked_sentence": "The Widget Model has <extra_id_0>, and was trained on many pages.",
       "answer_str": "<extra_id_0> 3 billion knobs <extra_id_1>",
       "answer_d": {"<extra_id_0>": "3 billion knobs"}, "span_type": "NP-COMMON",
       "definition": ["[ENT_START]Widget Model[ENT_END] is a machine made in 2019.",
                      "It turns knobs."],
       "entity_span_str": "Widget Model"}
STORM = {"ex_id": "Storm_Ida_777_2_1",
         "masked_sentence": "Storm Ida <extra_id_0> kilometers from the coast.",
         "answer_str": "<extra_id_0> was about 30 <extra_id_1>", "span_type": "RANDOM",
         "definition": "Storm Ida was a storm in 2019."}
# EvolvingQA (tests/tasks/test_evolvingqa_tasks.py's formats)
EDITED = (",question,answer1,answer2,question_time\n"
          "0,Who is the CEO of Grol Textiles?,L. J. Kulric,Granette Naunsberg,x\n"
          "1,Who owns Brisk?,The Brisk Group,Brisk group,y\n")


def _csv(path: Path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _data(root: Path) -> Path:
    """A data folder with CKL's, ECBD's and EvolvingQA's sets where the export looks."""
    ckl = root / "ckl"
    _csv(ckl / "invariantLAMA.csv", ["id", "input", "output"], IL)
    _csv(ckl / "updatedlama" / "updatedLAMA.csv", ["unique_id", "statement", "new_answer"], UL)
    (ckl / "updatedlama_val_answers.json").write_text(json.dumps(UL_ANSWERS))
    _csv(ckl / "newlama" / "newLAMA_easy.csv", ["unique_id", "statement", "answer"], NLE)
    (ckl / "recentlama_val_answers.json").write_text(
        json.dumps({"e1": ["knee", "a knee"], "e2": ["Howard University"]}))
    ecbd = root / "ecbd" / "2019"
    ecbd.mkdir(parents=True)
    (ecbd / "np_spans_test.json").write_text(json.dumps(GPT) + "\n")
    (ecbd / "random_spans_test.json").write_text(json.dumps(STORM) + "\n")
    qa = root / "qa"
    qa.mkdir()
    (qa / "unchanged_train.csv").write_text("question,answer\nWho directed X?,Zelel\n")
    (qa / "unchanged_eval.csv").write_text("question,answer\nWhere is Trurmouth?,Corvania\n")
    (qa / "new_03.csv").write_text("question,answer\nWhom did Bordling marry?,Meel Dreirdstad\n")
    (qa / "edited_03.csv").write_text(EDITED)
    return root


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    data = _data(tmp_path_factory.mktemp("siblings_data"))
    out = tmp_path_factory.mktemp("siblings_tasks")
    assert main(["lm-eval-tasks", "--data", str(data), "--out", str(out)]) == 0
    return data, out


@pytest.fixture(scope="module")
def task_manager(exported):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(exported[1]), include_defaults=False)


CKL_TASKS = ["ckl_invariant_lama", "ckl_invariant_lama_object", "ckl_updated_lama",
             "ckl_updated_lama_object", "ckl_new_lama_easy", "ckl_new_lama_easy_object"]
ECBD_TASKS = [f"ecbd_2019_test{s}" for s in ("", "_no_ent", "_random_def", "_definition")]
QA_TASKS = ["evolvingqa_edited_03", "evolvingqa_edited_03_mc", "evolvingqa_new_03",
            "evolvingqa_unchanged"]


def _requests(task_manager, name: str) -> list[tuple]:
    """The (context, continuation) / (context, generation kwargs) lm-eval asks of ``name``."""
    task = lm_eval.tasks.get_task_dict([name], task_manager)[name]
    task.build_all_requests(limit=None, rank=0, world_size=1)
    return [instance.arguments for instance in task.instances]


def test_every_set_is_a_task_named_after_its_seqio_task(exported, task_manager, capsys):
    _, out = exported
    names = set(task_manager.all_tasks)
    assert {*CKL_TASKS, *ECBD_TASKS, *QA_TASKS} <= names
    assert {"ckl_lama", "ecbd", "ecbd_test", "ecbd_test_no_ent", "evolvingqa",
            "evolvingqa_eval_03"} <= names
    assert "evolvingqa_finetune" not in names  # the QA fine-tuning set trains, is not scored
    assert not any(n.startswith("twiki_probes") for n in names)  # no probes in this folder
    groups = json.loads((out / "siblings.json").read_text())["groups"]
    assert groups["ckl_lama"] == CKL_TASKS  # CKL Table 2's order: IL, UL, NL, NLE
    assert groups["ecbd"] == ["ecbd_test", "ecbd_test_no_ent", "ecbd_test_random_def",
                              "ecbd_test_definition"]
    assert groups["evolvingqa_eval_03"] == QA_TASKS
    manifest = json.loads((out / "siblings.json").read_text())["tasks"]
    assert manifest["ckl_updated_lama"]["skipped"] == {NO_LEFT_CONTEXT: 1}
    assert manifest["ckl_updated_lama"]["documents"] == 1
    assert manifest["evolvingqa_edited_03_mc"]["skipped"] == {SAME_ANSWERS: 1}
    # every task builds its documents and requests (lm-eval's own loading)
    for name in [*CKL_TASKS, *ECBD_TASKS, *QA_TASKS]:
        assert _requests(task_manager, name), name
    # lm-eval's own command line lists them
    capsys.readouterr()
    assert main(["lm-eval", "ls", "tasks", "--include_path", str(out)]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in ("ckl_invariant_lama", "evolvingqa_edited_03_mc"))


def test_ckl_rows_are_the_left_context_then_the_answer(exported, task_manager):
    _, out = exported
    docs = [json.loads(t) for t in (out / "docs" / "ckl_invariant_lama.jsonl").read_text()
            .splitlines()]
    assert docs[0] == {
        "id": "ckl_invariant_lama/0", "key": "0",
        "statement": "Barack Obama was born in <extra_id_0> .",
        "prompt": "Barack Obama was born in", "target": " Honolulu", "answer": "Honolulu",
        "answers": ["Honolulu"], "previous_answers": [], "right": " .", "blank_at_end": True}
    assert _requests(task_manager, "ckl_invariant_lama_object") == [
        ("Barack Obama was born in", " Honolulu"), ("The capital of France is", " Paris")]
    generation = _requests(task_manager, "ckl_invariant_lama")
    assert [g[0] for g in generation] == ["Barack Obama was born in", "The capital of France is"]
    assert generation[0][1]["until"] == ["\n"] and generation[0][1]["max_gen_toks"] == 16
    # UpdatedLAMA: the row whose blank opens the statement is left out; old answers kept
    updated = [json.loads(t) for t in (out / "docs" / "ckl_updated_lama.jsonl").read_text()
               .splitlines()]
    assert [(d["key"], d["answers"], d["previous_answers"]) for d in updated] == [
        ("u2", ["Boris Johnson", "Johnson"], ["Theresa May"])]
    assert "process_answers_previous" in (out / "ckl_updated_lama.yaml").read_text()
    # a blank inside the statement: the left context only (the right one is in the document)
    easy = [json.loads(t) for t in (out / "docs" / "ckl_new_lama_easy.jsonl").read_text()
            .splitlines()]
    assert (easy[0]["prompt"], easy[0]["target"], easy[0]["right"], easy[0]["blank_at_end"]) == (
        "Allen Lazard is listed as questionable with a", " knee", " injury.", False)
    assert cloze_prompt("<extra_id_0> won.", "Joe") == ("", "Joe", " won.")


def test_ecbd_spans_follow_each_input_types_left_context(task_manager):
    assert _requests(task_manager, "ecbd_2019_test") == [
        ("The Widget Model has", " 3 billion knobs"), ("Storm Ida", " was about 30")]
    # the mention replaced as the SeqIO task does (tw_jax.tasks.ecbd.without_entity)
    assert _requests(task_manager, "ecbd_2019_test_no_ent")[0] == (
        "The the entity has", " 3 billion knobs")
    assert _requests(task_manager, "ecbd_2019_test_definition")[0] == (
        "Widget Model is a machine made in 2019. The Widget Model has", " 3 billion knobs")
    # another entity's definition (the SeqIO task's draw: the only other entity here)
    assert _requests(task_manager, "ecbd_2019_test_random_def")[0] == (
        "Storm Ida was a storm in 2019. The Widget Model has", " 3 billion knobs")


def test_evolvingqa_questions_and_the_edited_choice(exported, task_manager):
    _, out = exported
    generation = _requests(task_manager, "evolvingqa_edited_03")
    assert [g[0] for g in generation] == ["Who is the CEO of Grol Textiles?", "Who owns Brisk?"]
    docs = [json.loads(t) for t in (out / "docs" / "evolvingqa_edited_03.jsonl").read_text()
            .splitlines()]
    assert (docs[0]["answers"], docs[0]["previous_answers"]) == (
        ["Granette Naunsberg"], ["L. J. Kulric"])
    scores = probe_utils.process_answers_previous(docs[0], ["  L. J. Kulric\nmore"])
    assert scores == {"em": 0.0, "f1": 0.0, "em_previous": 100.0, "f1_previous": 100.0}
    assert probe_utils.process_answers({"answers": ["knee", "a knee"]}, ["the Knee"])["em"] == 100
    # outdated then updated, gold the updated; a pair that normalises alike is left out
    assert _requests(task_manager, "evolvingqa_edited_03_mc") == [
        ("Who is the CEO of Grol Textiles?", " L. J. Kulric"),
        ("Who is the CEO of Grol Textiles?", " Granette Naunsberg")]
    task = lm_eval.tasks.get_task_dict(["evolvingqa_edited_03_mc"], task_manager)[
        "evolvingqa_edited_03_mc"]
    assert [task.doc_to_target(d) for d in task.test_docs()] == [1]
    assert _requests(task_manager, "evolvingqa_unchanged")[0][0] == "Where is Trurmouth?"


def test_a_folder_given_must_hold_its_sets_and_one_found_is_optional(exported, tmp_path):
    data, _ = exported
    with pytest.raises(DumpError, match="no ECBD files"):
        export_all(data, tmp_path / "a", folders={"ecbd": str(data / "qa")})
    only = tmp_path / "only_qa"
    (only / "qa").mkdir(parents=True)
    (only / "qa" / "new.csv").write_text("question,answer\nQ?,A\n")
    result = export_all(only, tmp_path / "b")
    assert result.probes == [] and result.siblings.names() == ["evolvingqa_new"]
    with pytest.raises(ValueError, match="no probes found"):
        export_all(data, tmp_path / "d", siblings=False)


def test_a_tiny_gpt2_scores_one_task_of_each_kind(task_manager, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from lm_eval.models.huggingface import HFLM

    from tw_jax.data.tokenizer_styles import write_tokenizer

    torch.manual_seed(0)
    folder = tmp_path / "gpt2"
    texts = [" ".join(str(c) for row in rows for c in row) for rows in (IL, UL, NLE)]
    write_tokenizer(folder, "llama3", [*texts, EDITED, json.dumps(GPT), json.dumps(STORM)])
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, n_positions=128,
                                     vocab_size=len(tokenizer),
                                     bos_token_id=tokenizer.bos_token_id,
                                     eos_token_id=tokenizer.eos_token_id)
    transformers.GPT2LMHeadModel(config).save_pretrained(str(folder))
    backend = HFLM(pretrained=str(folder), device="cpu", batch_size=2, dtype="float32",
                   max_length=128)
    tasks = ["ckl_invariant_lama", "ckl_invariant_lama_object", "ecbd_2019_test",
             "evolvingqa_edited_03_mc"]
    found = lm_eval.simple_evaluate(model=backend, tasks=tasks, task_manager=task_manager,
                                    limit=2, bootstrap_iters=0, gen_kwargs="max_gen_toks=4")
    results = found["results"]
    assert {"em,none", "f1,none"} <= set(results["ckl_invariant_lama"])
    assert {"perplexity,none", "acc,none"} <= set(results["ckl_invariant_lama_object"])
    assert results["ecbd_2019_test"]["perplexity,none"] > 1
    assert 0 <= results["evolvingqa_edited_03_mc"]["acc,none"] <= 1
