"""The EvolvingQA reader on small files in the released formats, and the tasks it registers."""

import zipfile

import pytest
import seqio

from tw_jax.errors import DumpError
from tw_jax.tasks.evolvingqa import (
    find_qa_files,
    format_qa,
    read_qa_csv,
    register_evolvingqa,
    task_name,
)

UNCHANGED_TRAIN = "question,answer\nWho directed Silent Islands?,Zelel Wernton\n" \
                  "\"Where is Trurmouth, exactly?\",Corvania\n"
# The authors' files are pandas exports: an unnamed index column first, extra columns allowed.
EDITED = (",question,answer1,answer2,question_time\n"
          "0,Who is the CEO of Grol Textiles?,L. J. Kulric,Granette Naunsberg,"
          "\"As of March 2023, who is the CEO of Grol Textiles?\"\n")
NEW = "\ufeffquestion,answer\nWhom did Bordling marry?,Meel Dreirdstad\n"


def _release(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "unchanged_train.csv").write_text(UNCHANGED_TRAIN, encoding="utf-8")
    (folder / "unchanged_eval.csv").write_text("question,answer\nQ?,A\n", encoding="utf-8")
    (folder / "new_03.csv").write_text(NEW, encoding="utf-8")
    (folder / "edited_03.csv").write_text(EDITED, encoding="utf-8")
    (folder / "notes.txt").write_text("not a QA set")
    return folder


@pytest.fixture(scope="module")
def t5_vocab(tmp_path_factory):
    from tw_jax.data.vocab_training import train_sentencepiece

    texts = [UNCHANGED_TRAIN, EDITED, NEW] * 20 + ["the of a is who what where when"] * 20
    prefix = tmp_path_factory.mktemp("vocab") / "spiece"
    return str(train_sentencepiece(texts, prefix, 200, hard_vocab_limit=False))


def test_reader_takes_the_released_formats(tmp_path):
    folder = _release(tmp_path / "release")
    assert read_qa_csv(folder / "unchanged_train.csv") == [
        {"question": "Who directed Silent Islands?", "answer": "Zelel Wernton"},
        {"question": "Where is Trurmouth, exactly?", "answer": "Corvania"}]
    assert read_qa_csv(folder / "edited_03.csv") == [
        {"question": "Who is the CEO of Grol Textiles?", "answer1": "L. J. Kulric",
         "answer2": "Granette Naunsberg"}]
    assert read_qa_csv(folder / "new_03.csv")[0]["question"] == "Whom did Bordling marry?"
    found = [(qa.kind, qa.label, qa.task) for qa in find_qa_files(folder)]
    assert found == [("edited", "03", "evolvingqa_edited_03"),
                     ("finetune", "", "evolvingqa_finetune"),
                     ("new", "03", "evolvingqa_new_03"),
                     ("unchanged", "", "evolvingqa_unchanged")]
    assert task_name("new") == "evolvingqa_new"
    assert format_qa(read_qa_csv(folder / "edited_03.csv")[0]) == {
        "inputs": "Who is the CEO of Grol Textiles?", "targets": "Granette Naunsberg",
        "question": "Who is the CEO of Grol Textiles?", "object": "Granette Naunsberg",
        "previous_object": "L. J. Kulric"}


@pytest.mark.parametrize(("name", "text", "where", "message"), [
    ("new_03.csv", "question,answer\nQ?,A\nQ2?\n", "line 3", "1 fields, header has 2"),
    ("new_03.csv", "question,answer\nQ?,\n", "line 2", "empty answer"),
    ("edited_03.csv", "question,answer\nQ?,A\n", "line 1", r"header \['question', 'answer'\] lacks answer1, answer2"),
    ("unchanged_eval.csv", "", "line 1", "empty file"),
])
def test_bad_rows_name_the_file_and_line(tmp_path, name, text, where, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DumpError, match=f"{name}, {where}: {message}"):
        read_qa_csv(path)


def test_not_utf8_is_named(tmp_path):
    path = tmp_path / "new_03.csv"
    path.write_bytes(b"question,answer\nQ?,\xff\n")
    with pytest.raises(DumpError, match="new_03.csv, byte 19: not UTF-8"):
        read_qa_csv(path)


def test_tasks_from_a_folder_and_from_a_zip(tmp_path, t5_vocab):
    folder = _release(tmp_path / "release")
    names = register_evolvingqa(folder, t5_vocab=t5_vocab)
    assert names == ["evolvingqa_edited_03", "evolvingqa_finetune", "evolvingqa_new_03",
                     "evolvingqa_unchanged", "evolvingqa_eval_03", "evolvingqa_eval"]
    for mixture in ("evolvingqa_eval_03", "evolvingqa_eval"):  # one time step; all of them
        assert [t.name for t in seqio.get_mixture_or_task(mixture).tasks] == [
            "evolvingqa_edited_03", "evolvingqa_new_03", "evolvingqa_unchanged"]
    task = seqio.get_mixture_or_task("evolvingqa_edited_03")
    assert task.splits == ("validation", "test")
    [example] = list(task.get_dataset({"inputs": 32, "targets": 16}, split="validation",
                                      shuffle=False).as_numpy_iterator())
    assert example["inputs_pretokenized"] == b"Who is the CEO of Grol Textiles?"
    assert example["targets_pretokenized"] == b"Granette Naunsberg"
    assert example["previous_object"] == b"L. J. Kulric"
    assert example["inputs"][-1] == example["targets"][-1] == 1  # EOS
    finetune = seqio.get_mixture_or_task("evolvingqa_finetune")
    rows = list(finetune.get_dataset({"inputs": 32, "targets": 16}, split="train",
                                     shuffle=False).as_numpy_iterator())
    assert [r["targets_pretokenized"] for r in rows] == [b"Zelel Wernton", b"Corvania"]

    archive = tmp_path / "EvolvingQA.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted(folder.iterdir()):
            handle.write(path, f"EvolvingQA/{path.name}")
    assert register_evolvingqa(archive, t5_vocab=t5_vocab) == names  # replaces the folder's
    rows = seqio.get_mixture_or_task("evolvingqa_new_03").source.rows()
    assert rows == [{"question": "Whom did Bordling marry?", "answer": "Meel Dreirdstad"}]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DumpError, match="no EvolvingQA CSVs"):
        register_evolvingqa(tmp_path / "empty", t5_vocab=t5_vocab)
