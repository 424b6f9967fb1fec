"""Readers of CKL's released formats, on small files in those formats made here."""

from __future__ import annotations

import io
import json

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.ckl.release import (
    INVARIANT,
    NEW,
    UPDATED,
    LamaRow,
    answers_json_text,
    iter_ssm_pairs,
    join_answers,
    lama_csv_text,
    read_answers_json,
    read_lama_csv,
)

IL = "id,input,output\n0,Barack Obama was born in <extra_id_0> .,Honolulu\n1,iPod Touch is produced by <extra_id_0> .,Apple\n"
UL = ('unique_id,statement,new_answer\n'
      'u7,"<extra_id_0> is the prime minister of England.",Boris Johnson\n')
UL_ANSWERS = {"u7": [{"old": ["Theresa May"], "new": ["Boris Johnson", "Johnson"]}]}
NL = "unique_id,statement,answer\nn1,<extra_id_0> owns the rights to the Falcon.,Disney\n"
NL_ANSWERS = {"n1": ["The Walt Disney Company", "Disney"]}


def _lama(text: str, kind: str, name: str = "x.csv") -> list:
    return read_lama_csv(io.StringIO(text, newline=""), name, kind)


def _answers(data: object, updated: bool = False) -> dict:
    return read_answers_json(io.StringIO(json.dumps(data)), "a.json", updated=updated)


def test_each_set_reads_with_its_answers():
    il = join_answers(_lama(IL, INVARIANT), "invariantLAMA.csv")
    assert il == [LamaRow("0", "Barack Obama was born in <extra_id_0> .", ("Honolulu",)),
                  LamaRow("1", "iPod Touch is produced by <extra_id_0> .", ("Apple",))]
    assert il[0].filled() == "Barack Obama was born in Honolulu ."

    ul = join_answers(_lama(UL, UPDATED), "updatedLAMA.csv", _answers(UL_ANSWERS, True), "a.json")
    assert ul == [LamaRow("u7", "<extra_id_0> is the prime minister of England.",
                          ("Boris Johnson", "Johnson"), ("Theresa May",))]
    # the bare {"old", "new"} form reads the same as the release's one-item list
    bare = _answers({"u7": UL_ANSWERS["u7"][0]}, True)
    assert bare == _answers(UL_ANSWERS, True) == {
        "u7": (("Boris Johnson", "Johnson"), ("Theresa May",))}

    nl = join_answers(_lama(NL, NEW), "newLAMA.csv", _answers(NL_ANSWERS), "a.json")
    assert nl[0].answers == ("Disney", "The Walt Disney Company")  # the CSV's answer first
    assert _answers({"n1": "Disney"}) == {"n1": (("Disney",), ())}


def test_written_back_reads_the_same():
    ul = join_answers(_lama(UL, UPDATED), "u.csv", _answers(UL_ANSWERS, True), "a.json")
    again = join_answers(_lama(lama_csv_text(ul, UPDATED), UPDATED), "u.csv",
                         read_answers_json(io.StringIO(answers_json_text(ul, UPDATED)), "b.json",
                                           updated=True), "b.json")
    assert again == ul
    assert lama_csv_text(ul, UPDATED).splitlines()[0] == "unique_id,statement,new_answer"
    assert json.loads(answers_json_text(ul, UPDATED)) == UL_ANSWERS


@pytest.mark.parametrize(
    ("text", "kind", "where", "message"),
    [
        ("", INVARIANT, "line 1", "empty file"),
        ("id,input\n0,x\n", INVARIANT, "line 1", "lacks output"),
        (IL + "2,only two\n", INVARIANT, "line 4", "2 fields, header has 3"),
        (IL + "2,, Paris\n", INVARIANT, "line 4", "empty input"),
        (IL + "1,again <extra_id_0>,x\n", INVARIANT, "line 4", "id '1' repeats line 3"),
        (UL + 'u8,"unclosed\n', UPDATED, "line 3", "fields"),
    ],
)
def test_bad_csv_names_file_and_line(text, kind, where, message):
    with pytest.raises(DumpError, match=message) as error:
        _lama(text, kind, "data/file.csv")
    assert error.value.path == "data/file.csv" and error.value.record == where


def test_bad_answers_name_file_and_place():
    with pytest.raises(DumpError, match="not JSON") as error:
        read_answers_json(io.StringIO('{\n"n1": [\n'), "a.json")
    assert error.value.record == "line 3"
    with pytest.raises(DumpError, match="non-empty list of strings") as error:
        _answers({"n1": [1, 2]})
    assert error.value.record == "id 'n1'"
    with pytest.raises(DumpError, match="'old' and 'new'"):
        _answers({"u7": [{"old": ["A"]}]}, True)
    with pytest.raises(DumpError, match="UpdatedLAMA entry"):
        _answers({"u7": ["A"]}, True)
    with pytest.raises(DumpError, match="mapping ids"):
        _answers(["A"])
    with pytest.raises(DumpError, match="id 'n1' has no entry in a.json") as error:
        join_answers(_lama(NL, NEW), "newLAMA.csv", {}, "a.json")
    assert error.value.record == "line 2"


def test_ssm_pairs_skip_empty_rows_and_report_bad_ones():
    text = ("input,output,original\n"
            '"<extra_id_0> won the election.","<extra_id_0> Joe Biden <extra_id_1>",x\n'
            ",<extra_id_0> nothing,y\n"
            '"Paris is in <extra_id_0>.","<extra_id_0> France",z\n')
    skipped: list[int] = []
    pairs = list(iter_ssm_pairs(io.StringIO(text, newline=""), "n.csv", skipped))
    assert pairs == [("<extra_id_0> won the election.", "<extra_id_0> Joe Biden <extra_id_1>"),
                     ("Paris is in <extra_id_0>.", "<extra_id_0> France")]
    assert skipped == [3]
    with pytest.raises(DumpError, match="lacks output"):
        list(iter_ssm_pairs(io.StringIO("input,original\n"), "n.csv"))
    with pytest.raises(DumpError, match="1 fields, header has 3") as error:
        list(iter_ssm_pairs(io.StringIO(text + "just one\n", newline=""), "n.csv"))
    assert error.value.record == "line 5"
