"""The ECBD reader on small files in the released format, the input types, and the seqio tasks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tw_jax.errors import DumpError
from tw_jax.tasks import registered
from tw_jax.tasks.ecbd import (
    discover,
    input_sentence,
    random_definitions,
    read_ecbd,
    read_ecbd_file,
    register_ecbd,
    task_name,
    without_entity,
)

# Lines shaped like the released files (README of the ECBD release), content made up here.
GPT = {
    "ex_id": "Widget Model_5551_4_0",
    "masked_sentence": "The Widget Model has <extra_id_0>, and was trained on many pages.",
    "answer_str": "<extra_id_0> 3 billion knobs <extra_id_1>",
    "answer_d": {"<extra_id_0>": "3 billion knobs"},
    "span_type": "NP-COMMON",
    "definition": ["[ENT_START]Widget Model[ENT_END] is a machine made in 2019.",
                   "It turns knobs."],
    "year": "2019",
    "entity_span_str": "Widget Model",
    "entity_span_loc": [1, 3],
}
STORM = {
    "ex_id": "Storm_Ida_777_2_1",  # a title with underscores: the page id is third from the right
    "masked_sentence": "Storm Ida <extra_id_0> kilometers from the coast.",
    "answer_str": "<extra_id_0> was about 30 <extra_id_1>",
    "span_type": "RANDOM",
    "definition": "Storm Ida was a storm in 2019.",
}


def _write(path: Path, rows: list[dict | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.fixture()
def release(tmp_path) -> Path:
    root = tmp_path / "ecbd"
    _write(root / "2019" / "np_spans_test.json", [GPT, GPT | {"ex_id": "Widget Model_5551_5_0"}])
    _write(root / "2019" / "random_spans_test.json", [STORM, ""])
    _write(root / "2019" / "np_spans_dev.json", [GPT])
    _write(root / "popular" / "random_spans_test.json",
           [STORM | {"ex_id": "Pop_9_1_1", "definition": ["Pop is a band."]}])
    (root / "README.txt").write_text("not data")
    return root


def test_reads_the_released_layout(release):
    found = discover(release)
    assert sorted(found) == [("2019", "dev"), ("2019", "test"), ("popular", "test")]
    data = read_ecbd(release)
    assert list(data) == [("popular", "test"), ("2019", "dev"), ("2019", "test")]
    examples = data[("2019", "test")]
    assert [e.ex_id for e in examples] == ["Widget Model_5551_4_0", "Widget Model_5551_5_0",
                                           "Storm_Ida_777_2_1"]
    first, storm = examples[0], examples[2]
    assert (first.entity, first.span, first.span_group) == ("5551", "3 billion knobs", "NP")
    assert first.definition == ("Widget Model is a machine made in 2019.", "It turns knobs.")
    assert (storm.entity, storm.span, storm.span_group) == ("777", "was about 30", "RANDOM")
    assert storm.definition == ("Storm Ida was a storm in 2019.",)
    assert storm.source.endswith("random_spans_test.json:1")
    assert list(read_ecbd(release, subsets=["2019"], splits=["dev"])) == [("2019", "dev")]
    # A single subset's folder reads as that subset.
    assert list(read_ecbd(release / "popular")) == [("popular", "test")]


@pytest.mark.parametrize("line, message", [
    ("{not json", "line 2: not JSON"),
    (json.dumps(GPT | {"masked_sentence": "no mask here"}), "line 2: masked_sentence has 0"),
    (json.dumps({k: v for k, v in GPT.items() if k != "definition"}), "line 2: missing definition"),
    (json.dumps(GPT | {"ex_id": "nounderscores"}), "line 2: ex_id 'nounderscores'"),
    (json.dumps(GPT | {"answer_str": "x", "answer_d": {}}), "line 2: no span"),
    (json.dumps(GPT | {"definition": 3}), "line 2: definition must be"),
])
def test_bad_lines_name_the_file_and_line(tmp_path, line, message):
    path = _write(tmp_path / "np_spans_dev.json", [GPT, line])
    with pytest.raises(DumpError, match=f"np_spans_dev.json, {message}"):
        read_ecbd_file(path, "2019", "dev")


def test_folders_without_ecbd_files(tmp_path):
    with pytest.raises(DumpError, match="no such ECBD folder"):
        discover(tmp_path / "missing")
    (tmp_path / "2019").mkdir()
    _write(tmp_path / "2019" / "notes.json", [GPT])
    with pytest.raises(DumpError, match="no ECBD files"):
        discover(tmp_path)


def test_input_types(release):
    data = read_ecbd(release)
    gpt, _, storm = data[("2019", "test")]
    assert without_entity(gpt) == "The the entity has <extra_id_0>, and was trained on many pages."
    assert without_entity(storm) is None  # the released line has no entity_span_str
    at_start = replace(gpt, masked_sentence="Widget Model has <extra_id_0> and a Widget Model "
                       "badge.", entity_span_char=(0, 12))
    assert input_sentence(at_start, "no_ent") == "The entity has <extra_id_0> and a Widget Model badge."
    moved = replace(at_start, entity_span_char=(3, 9))  # stale offsets
    assert without_entity(moved).startswith("The entity has")  # falls back to the first match
    assert input_sentence(gpt, "original") == gpt.masked_sentence
    assert input_sentence(gpt, "definition") == (
        "Widget Model is a machine made in 2019. " + gpt.masked_sentence)
    assert input_sentence(gpt, "definition", n_definition=0).startswith(
        "Widget Model is a machine made in 2019. It turns knobs. The Widget")
    pool = [ex for examples in data.values() for ex in examples]
    drawn = random_definitions(pool, seed=0)
    assert drawn == random_definitions(pool, seed=0)
    own = {"5551": "Widget Model is a machine made in 2019.",
           "777": "Storm Ida was a storm in 2019.", "9": "Pop is a band."}
    for example, definition in zip(pool, drawn, strict=True):
        assert definition in own.values() and definition != own[example.entity]
        assert input_sentence(example, "random_def", random_definition=definition) == (
            f"{definition} {example.masked_sentence}")
    assert random_definitions([gpt]) == [None]  # one entity: nothing else to draw
    with pytest.raises(ValueError, match="unknown input type"):
        input_sentence(gpt, "nonsense")


@pytest.fixture()
def unregister():
    yield
    from tw_jax.tasks.registration import Registrar

    Registrar("ecbd")  # a new registrar of the group removes what the test registered


def test_seqio_tasks(release, tmp_path, unregister):
    import seqio

    from tw_jax.data.vocab_training import write_demo_vocabularies

    corpus = [GPT["masked_sentence"], STORM["masked_sentence"], " ".join(GPT["definition"])] * 50
    vocab = write_demo_vocabularies(corpus, tmp_path / "vocab")["t5"]
    names = register_ecbd(release, t5_vocab=str(vocab), input_types=("original", "no_ent"))
    assert sorted(names) == sorted([
        *(task_name(s, sp, t) for s, sp in [("2019", "dev"), ("2019", "test"),
                                             ("popular", "test")] for t in ("original", "no_ent")),
        "ecbd_dev", "ecbd_dev_no_ent", "ecbd_test", "ecbd_test_no_ent"])  # evaluation mixtures
    assert [t.name for t in seqio.get_mixture_or_task("ecbd_test_no_ent").tasks] == [
        "ecbd_2019_test_no_ent", "ecbd_popular_test_no_ent"]
    assert task_name("2019", "test") == "ecbd_2019_test"
    task = seqio.get_mixture_or_task("ecbd_2019_test_no_ent")
    rows = list(task.get_dataset({"inputs": 64, "targets": 16}, split="test", shuffle=False)
                .as_numpy_iterator())
    assert [r["inputs_pretokenized"].decode() for r in rows] == [
        "The the entity has <extra_id_0>, and was trained on many pages.",
        "The the entity has <extra_id_0>, and was trained on many pages.",
        STORM["masked_sentence"],  # no mention known: the sentence stays as it is
    ]
    assert rows[0]["targets_pretokenized"].decode() == GPT["answer_str"]
    assert rows[0]["targets"][-1] == 1  # EOS
    again = register_ecbd(release, t5_vocab=str(vocab), input_types=("definition",))
    assert "ecbd_2019_test_no_ent" not in seqio.TaskRegistry.names()  # replaced, not stacked
    assert "ecbd_2019_test_definition" in again
    assert set(registered("ecbd")) == set(again)
