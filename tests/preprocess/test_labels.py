"""LabelIndex: one pass over a dump into SQLite; single and batched lookups; atomic build."""

from __future__ import annotations

import bz2
import json

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.facts.labels import LabelIndex
from tw_jax.preprocess.runners.accounting import Skips


def entity(eid: str, label: str | None, **extra) -> dict:
    labels = {"en": {"language": "en", "value": label}} if label is not None else {}
    kind = "property" if eid.startswith("P") else "item"
    return {"type": kind, "id": eid, "labels": labels, "claims": {}, **extra}


RECORDS = [entity(f"Q{i}", f"label {i}") for i in range(1, 1501)] + [
    entity("Q9999", None),
    {"type": "item", "id": "Q8888", "labels": [], "claims": []},  # old dumpers' empty map
    entity("P31", "instance of", datatype="wikibase-item"),
    entity("P569", "date of birth", datatype="time"),
]


def write_dump(path, records, tail: str = "") -> None:
    lines = [json.dumps(r, separators=(",", ":")) for r in records]
    path.write_bytes(bz2.compress(("[\n" + ",\n".join(lines) + "\n" + tail + "]\n").encode()))


@pytest.fixture
def index(tmp_path):
    dump = tmp_path / "dump.json.bz2"
    write_dump(dump, RECORDS)
    with LabelIndex.build(dump, tmp_path / "labels.sqlite") as idx:
        yield idx


def test_single_lookups(index):
    assert len(index) == len(RECORDS)
    assert index.label("Q1") == "label 1"
    assert index.label("Q1") == "label 1"  # from the cache
    assert index.label("P31") == "instance of"
    assert index.label("Q9999") is None and "Q9999" in index  # present, unlabelled
    assert index.label("Q8888") is None
    assert index.label("Q404404") is None and "Q404404" not in index


def test_batched_lookups_span_several_queries(index):
    ids = [f"Q{i}" for i in range(1, 1501)] + ["Q404404", "Q9999", "Q1"]
    got = index.labels(ids)
    assert len(got) == 1500
    assert got["Q1234"] == "label 1234"
    assert "Q404404" not in got and "Q9999" not in got
    assert index.labels([]) == {}
    assert index.labels(iter(["Q2", "Q404404"])) == {"Q2": "label 2"}  # cached answers, either way


def test_property_datatypes(index):
    assert index.datatype("P31") == "wikibase-item"
    assert index.datatype("P569") == "time"
    assert index.datatype("Q1") is None
    assert index.datatype("P404") is None


def test_reopen_and_missing_index(tmp_path, index):
    with LabelIndex(index.path) as again:
        assert again.label("Q3") == "label 3"
    with pytest.raises(FileNotFoundError):
        LabelIndex(tmp_path / "absent.sqlite")


def test_bad_lines_are_counted(tmp_path):
    dump = tmp_path / "dump.json.bz2"
    write_dump(dump, RECORDS[:3], tail='{"id": \n{"type": "item"},\n')
    skips = Skips()
    with LabelIndex.build(dump, tmp_path / "labels.sqlite", skips) as idx:
        assert len(idx) == 3
    assert skips.counts == {"bad_json": 1, "bad_entity": 1}
    assert skips.examples["bad_json"] == [f"{dump}:5"]


def test_broken_dump_leaves_no_index(tmp_path):
    dump = tmp_path / "dump.json.bz2"
    write_dump(dump, RECORDS)
    data = dump.read_bytes()
    dump.write_bytes(data[: len(data) // 2])
    target = tmp_path / "labels.sqlite"
    with pytest.raises(DumpError, match="truncated"):
        LabelIndex.build(dump, target)
    assert list(tmp_path.iterdir()) == [dump]
