"""CKL's released files (small ones made here) as seqio tasks: names, examples, lengths, zips."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import pytest
import seqio

from tw_jax.errors import DumpError
from tw_jax.preprocess.ckl.release_files import corpus_files, count_ssm_examples, find_files
from tw_jax.preprocess.dumps.released import UnsafeArchiveError
from tw_jax.runtime import task_data
from tw_jax.tasks.ckl import eval_lengths, probe_tasks, register_ckl

LONG = ("In the long and winding history of the small river town that everybody in the "
        "valley knows, the first mayor was born in <extra_id_0> .")
IL = [[0, "Barack Obama was born in <extra_id_0> .", "Honolulu"], [1, LONG, "Paris"]]
UL = [["u1", "<extra_id_0> is the prime minister of England.", "Boris Johnson"]]
UL_ANSWERS = {"u1": [{"old": ["Theresa May"], "new": ["Boris Johnson", "Johnson"]}]}
NL = [["n1", "<extra_id_0> owns the rights to the Falcon.", "Disney"]]
NL_ANSWERS = {"n1": ["Disney", "The Walt Disney Company"]}
NLE = [["e1", "Allen Lazard is listed as questionable with a <extra_id_0> injury.", "knee"],
       ["e2", "The volleyball stars chose to study at <extra_id_0> .", "Howard University"]]
NEWS = [["<extra_id_0> won the election.", "<extra_id_0> Joe Biden", "Joe Biden won the election."],
        ["", "<extra_id_0> skipped", "an empty input"]]
WIKI = [["Paris is in <extra_id_0>.", "<extra_id_0> France", "Paris is in France."]]
EXPECTED = [
    "ckl_invariant_lama", "ckl_new_lama", "ckl_new_lama_easy", "ckl_new_lama_easy_small_split1",
    "ckl_updated_lama", "ckl_recent_news_small_ssm", "ckl_recent_news_small1_ssm",
    "ckl_recent_news_ssm", "ckl_wikipedia_pretrain_small_ssm", "ckl_wikipedia_pretrain_ssm",
    "ckl_lama", "ckl_mixreview_ssm",
]
# ckl_lama evaluates every LAMA set, in Table 2's order (IL, UL, NL, NLE…)
LAMA_MIXTURE = ["ckl_invariant_lama", "ckl_updated_lama", "ckl_new_lama", "ckl_new_lama_easy",
                "ckl_new_lama_easy_small_split1"]


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def write_release(root: Path) -> Path:
    """The released layout: sets in subfolders, answer JSON files beside them at the top."""
    write_csv(root / "invariantLAMA.csv", ["id", "input", "output"], IL)
    write_csv(root / "updatedlama" / "updatedLAMA.csv", ["unique_id", "statement", "new_answer"],
              UL)
    (root / "updatedlama_val_answers.json").write_text(json.dumps(UL_ANSWERS))
    write_csv(root / "newlama" / "newLAMA.csv", ["unique_id", "statement", "answer"], NL)
    (root / "recentlama_h_val_answers.json").write_text(json.dumps(NL_ANSWERS))
    write_csv(root / "newlama" / "newLAMA_easy.csv", ["unique_id", "statement", "answer"], NLE)
    write_csv(root / "newlama" / "newLAMA_easy_small_split1.csv",
              ["unique_id", "statement", "answer"], NLE[:1])
    (root / "recentlama_val_answers.json").write_text(
        json.dumps({"e1": ["knee", "a knee"], "e2": ["Howard University"]}))
    write_csv(root / "recent_news_small.csv", ["input", "output", "original"], NEWS)
    write_csv(root / "split" / "recent_news_small1.csv", ["input", "output", "original"], NEWS[:1])
    write_csv(root / "wikipedia_pretrain_small.csv", ["input", "output", "original"], WIKI)
    return root


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> dict:
    from tw_jax.data.vocab_training import train_sentencepiece

    root = write_release(tmp_path_factory.mktemp("ckl") / "data")
    texts = [" ".join(str(c) for row in rows for c in row) for rows in (IL, UL, NL, NLE, NEWS)]
    vocab = train_sentencepiece(texts * 20, tmp_path_factory.mktemp("ckl_vocab") / "spiece",
                                hard_vocab_limit=False)
    return {"root": root, "vocab": str(vocab)}


def _examples(task: str, lengths: dict | None = None, split: str = "test") -> list[dict]:
    dataset = task_data.task_dataset(task, lengths or eval_lengths(task), split=split, shuffle=False,
                                num_epochs=1)
    return list(dataset.as_numpy_iterator())


def _text(value) -> str:
    return value.decode("utf-8")


def test_names_lengths_and_examples(release):
    names = register_ckl(release["root"], release["vocab"])
    assert names == EXPECTED
    assert probe_tasks(names) == LAMA_MIXTURE
    assert [t.name for t in seqio.get_mixture_or_task("ckl_lama").tasks] == sorted(LAMA_MIXTURE)
    assert eval_lengths("ckl_invariant_lama") == {"inputs": 25, "targets": 4}
    assert eval_lengths("ckl_updated_lama") == eval_lengths("ckl_new_lama") == {
        "inputs": 50, "targets": 10}
    assert eval_lengths("ckl_new_lama_easy_small_split1") == {"inputs": 150, "targets": 10}

    il = _examples("ckl_invariant_lama")
    assert [_text(e["inputs_pretokenized"]) for e in il] == [IL[0][1], LONG]
    assert [_text(e["targets_pretokenized"]) for e in il] == ["<extra_id_0> Honolulu",
                                                               "<extra_id_0> Paris"]
    vocab = seqio.get_mixture_or_task("ckl_invariant_lama").output_features["inputs"].vocabulary
    eos = vocab.eos_id
    assert il[0]["inputs"].tolist() == list(vocab.encode(IL[0][1])) + [eos]
    # the long statement is cut to InvariantLAMA's 25 input tokens, EOS kept
    assert len(vocab.encode(LONG)) > 25
    assert il[1]["inputs"].tolist() == list(vocab.encode(LONG))[:24] + [eos]

    ul = _examples("ckl_updated_lama")[0]
    assert json.loads(ul["answers"]) == ["Boris Johnson", "Johnson"]
    assert _text(ul["previous_object"]) == "Theresa May" and _text(ul["id"]) == "u1"
    nl = _examples("ckl_new_lama")[0]
    assert json.loads(nl["answers"]) == ["Disney", "The Walt Disney Company"]
    assert [json.loads(e["answers"]) for e in _examples("ckl_new_lama_easy")] == [
        ["knee", "a knee"], ["Howard University"]]

    news = _examples("ckl_recent_news_ssm", {"inputs": 64, "targets": 16}, "train")
    assert len(news) == 1  # the row with an empty input is skipped
    assert news[0]["targets"].tolist() == list(vocab.encode("<extra_id_0> Joe Biden")) + [eos]
    mixed = _examples("ckl_mixreview_ssm", {"inputs": 64, "targets": 16}, "train")
    assert len(mixed) == 5  # one new example and 1 * 4 * 0.7^0 = 4 old ones (CKL's preset)
    assert count_ssm_examples(corpus_files(find_files(release["root"]))["ckl_recent_news_ssm"]) == 1


def test_a_zip_registers_the_same(release, tmp_path):
    archive = tmp_path / "ckl.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted(release["root"].rglob("*")):
            if path.is_file():
                handle.write(path, path.relative_to(release["root"]).as_posix())
    assert register_ckl(archive, release["vocab"], group="ckl_zip") == EXPECTED
    assert [_text(e["inputs_pretokenized"]) for e in _examples("ckl_new_lama_easy")] == [
        r[1] for r in NLE]

    unsafe = tmp_path / "unsafe.zip"
    with zipfile.ZipFile(unsafe, "w") as handle:
        handle.writestr("../invariantLAMA.csv", "id,input,output\n")
    with pytest.raises(UnsafeArchiveError, match="'..' path component"):
        register_ckl(unsafe, release["vocab"], group="ckl_zip")


def test_bad_files_are_named(release, tmp_path):
    root = write_release(tmp_path / "data")
    write_csv(root / "copy" / "newLAMA.csv", ["unique_id", "statement", "answer"], NL)
    with pytest.raises(DumpError, match="newLAMA.csv is also at"):
        register_ckl(root, release["vocab"], group="ckl_bad")

    root = write_release(tmp_path / "data2")
    write_csv(root / "newlama" / "newLAMA.csv", ["unique_id", "statement", "answer"],
              [*NL, ["n2", "Who is <extra_id_0>?", "Nobody"]])
    register_ckl(root, release["vocab"], group="ckl_bad")
    with pytest.raises(DumpError, match="line 3: id 'n2' has no entry in .*recentlama_h_val"):
        _examples("ckl_new_lama")
