"""Month-aware indexes on a hand-made build folder: which passages, where stored, when rebuilt."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from retrieval_data import NEW, UNCHANGED, write_jsonl

from tw_jax.errors import DumpError
from tw_jax.retrieval.bm25 import BM25Retriever
from tw_jax.retrieval.index import MARKER, month_index


def test_a_months_index_holds_its_snapshot_unchanged_new_and_the_edited_current_side(data):
    index = month_index(str(data), "0809", BM25Retriever())
    assert [(p.id, p.title, p.text) for p in index.passages] == [
        ("unchanged/7:0", "Varnholt", UNCHANGED[0]["text"]),
        ("unchanged/8:0", "Corvania", UNCHANGED[1]["text"]),
        ("new/21:0", "Cien Bordling", NEW["0809"][0]["text"]),
        ("edited/30:2:0", "Grol Textiles", "Its chief executive officer is Granette Naunsberg."),
    ]
    assert index.folder == str(data / "0809" / "evolvingqa" / "index" / "bm25")
    assert not index.reused
    [[best, *_]] = index.retriever.search(["Who is the chief executive officer of Grol "
                                           "Textiles?"], k=3)
    assert index.passages[best[0]].id == "edited/30:2:0"
    marker = json.loads((data / "0809" / "evolvingqa" / "index" / "bm25" / MARKER).read_text())
    assert marker["passages"] == 4 and marker["kinds"] == {"unchanged": 2, "new": 1, "edited": 1}
    assert set(marker["inputs"]["files"]) == {"unchanged", "new", "edited"}

    other = month_index(str(data), "0910", BM25Retriever())  # the next month: its own New
    assert [p.id for p in other.passages] == ["unchanged/7:0", "unchanged/8:0", "new/22:0"]


def test_a_second_call_reuses_the_index_and_a_changed_input_rebuilds_it(data):
    first = month_index(str(data), "0809", BM25Retriever())
    again = month_index(str(data), "0809", BM25Retriever())
    assert again.reused and again.fingerprint == first.fingerprint
    assert [p.id for p in again.passages] == [p.id for p in first.passages]
    question = ["Whom did Cien Bordling marry?"]
    assert again.retriever.search(question, k=4) == first.retriever.search(question, k=4)

    write_jsonl(data / "0809" / "evolvingqa" / "new.jsonl", [
        *NEW["0809"], {"id": "23:0", "title": "Meel Dreirdstad", "text": "Meel is a painter."}])
    changed = month_index(str(data), "0809", BM25Retriever())
    assert not changed.reused and changed.fingerprint != first.fingerprint
    assert changed.passages[-2].id == "new/23:0"
    assert month_index(str(data), "0809", BM25Retriever()).reused

    settings = month_index(str(data), "0809", BM25Retriever(k1=0.9))  # settings change it too
    assert not settings.reused and settings.retriever.settings()["k1"] == 0.9
    assert not month_index(str(data), "0809", BM25Retriever(k1=0.9), force=True).reused


class _FailingSave(BM25Retriever):
    """A BM25 whose storage breaks half-way (a full disk, a lost connection)."""

    def save(self, folder: str) -> None:
        super().save(folder)
        raise OSError("connection lost while writing the index")


def test_an_interrupted_build_leaves_no_marker_and_is_rebuilt(data):
    month_index(str(data), "0809", BM25Retriever())
    write_jsonl(data / "evolvingqa" / "unchanged.jsonl", UNCHANGED[:1])
    with pytest.raises(OSError, match="connection lost"):
        month_index(str(data), "0809", _FailingSave())
    assert not (data / "0809" / "evolvingqa" / "index" / "bm25" / MARKER).exists()
    rebuilt = month_index(str(data), "0809", BM25Retriever())
    assert not rebuilt.reused and len(rebuilt.passages) == 3


def test_a_missing_or_bad_input_names_the_file_and_record(data):
    with pytest.raises(DumpError, match=r"1011/evolvingqa: has no stats\.json.*evolvingqa build"):
        month_index(str(data), "1011", BM25Retriever())
    (data / "0809" / "evolvingqa" / "edited.jsonl").unlink()
    with pytest.raises(DumpError, match=r"edited\.jsonl: missing \(run tw-jax evolvingqa build"):
        month_index(str(data), "0809", BM25Retriever())
    write_jsonl(data / "0809" / "evolvingqa" / "edited.jsonl", [])
    (data / "0809" / "evolvingqa" / "new.jsonl").write_text(
        json.dumps(NEW["0809"][0]) + "\n{broken\n")
    with pytest.raises(DumpError, match=r"new\.jsonl, line 2: not JSON"):
        month_index(str(data), "0809", BM25Retriever())
    write_jsonl(data / "0809" / "evolvingqa" / "new.jsonl", [{"id": "1:0", "text": "no title"}])
    with pytest.raises(DumpError, match=r"new\.jsonl, line 1: expected an object with id, title"):
        month_index(str(data), "0809", BM25Retriever())
    write_jsonl(data / "0809" / "evolvingqa" / "new.jsonl", [NEW["0809"][0], NEW["0809"][0]])
    with pytest.raises(DumpError, match=r"new\.jsonl, record 2: id '21:0' repeats"):
        month_index(str(data), "0809", BM25Retriever())


def test_an_index_in_a_bucket_is_reused_like_a_local_one(data, gcs_bucket):
    from tw_jax.io import paths

    remote = f"{gcs_bucket}/eqa"
    for local in sorted(p for p in data.rglob("*") if p.is_file()):
        paths.makedirs(paths.parent(paths.join(remote, str(local.relative_to(data)))))
        paths.copy(str(local), paths.join(remote, str(local.relative_to(data))))
    built = month_index(remote, "0809", BM25Retriever())
    assert built.folder == f"{remote}/0809/evolvingqa/index/bm25" and not built.reused
    reused = month_index(remote, "0809", BM25Retriever())
    assert reused.reused and [p.id for p in reused.passages] == [p.id for p in built.passages]
    assert reused.fingerprint == month_index(str(data), "0809", BM25Retriever()).fingerprint


def _folder(data):
    return data / "0809" / "evolvingqa" / "index" / "bm25"


def _moved_line(path, data):  # the same lines, two swapped: same size, same count
    lines = path.read_text().splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    path.write_text("".join(lines))


def _other_months_arrays(path, data):
    month_index(str(data), "0910", BM25Retriever())
    path.write_bytes((data / "0910" / "evolvingqa" / "index" / "bm25" / path.name).read_bytes())


@pytest.mark.parametrize(("damage", "file", "reason"), [
    (_moved_line, "passages.jsonl", "does not match its checksum"),
    (lambda p, d: p.write_bytes(p.read_bytes()[:-3]), "passages.jsonl", "bytes, "),
    (_other_months_arrays, "data.npy", ""),
    (lambda p, d: p.unlink(), "indptr.npy", "indptr.npy is missing"),
])
def test_a_damaged_stored_index_is_rebuilt_with_a_warning(data, caplog, damage, file, reason):
    first = month_index(str(data), "0809", BM25Retriever())
    marker = json.loads((_folder(data) / MARKER).read_text())
    assert set(marker["files"]) >= {"passages.jsonl", "bm25.json", "data.npy", "indptr.npy"}
    assert marker["indexed"] == marker["passages"] == 4
    damage(_folder(data) / file, data)
    with caplog.at_level("WARNING", logger="tw_jax.retrieval.index"):
        again = month_index(str(data), "0809", BM25Retriever())
    assert not again.reused  # before: reused, exit 0, with the damaged files
    [warning] = [m for m in caplog.messages if "rebuilding the index" in m]
    assert warning.startswith(f"{_folder(data)}: {file}") and reason in warning
    assert [p.id for p in again.passages] == [p.id for p in first.passages]
    question = ["Whom did Cien Bordling marry?"]
    assert again.retriever.search(question, k=4) == first.retriever.search(question, k=4)
    assert month_index(str(data), "0809", BM25Retriever()).reused  # rebuilt whole


def test_an_index_from_before_the_file_records_is_rebuilt_and_reuse_is_timed(data, caplog):
    month_index(str(data), "0809", BM25Retriever())
    reused = month_index(str(data), "0809", BM25Retriever())
    assert reused.reused and reused.verify_seconds >= 0.0
    marker_path = _folder(data) / MARKER
    marker = json.loads(marker_path.read_text())
    del marker["files"]
    marker_path.write_text(json.dumps(marker))
    with caplog.at_level("WARNING", logger="tw_jax.retrieval.index"):
        assert not month_index(str(data), "0809", BM25Retriever()).reused
    assert any("records no index files" in m for m in caplog.messages)


def test_an_index_whose_files_pass_but_cannot_be_read_names_the_file_and_the_flag(data):
    month_index(str(data), "0809", BM25Retriever())
    settings = _folder(data) / "bm25.json"
    settings.write_text("{not json")
    marker_path = _folder(data) / MARKER  # recorded as it is now: the bytes check passes
    marker = json.loads(marker_path.read_text())
    marker["files"]["bm25.json"] = {"bytes": settings.stat().st_size, "sha256": hashlib.sha256(
        settings.read_bytes()).hexdigest()}
    marker_path.write_text(json.dumps(marker))
    with pytest.raises(DumpError, match=r"bm25\.json.*rebuild it with --rebuild "):
        month_index(str(data), "0809", BM25Retriever())


LONG_AGO = 1_000_000_000  # 2001: what `cp -p`, `tar` and `rsync -a` may leave on a new file


def _rebuilt_because(caplog) -> str:
    [warning] = [m for m in caplog.messages if "rebuilding the index" in m]
    return warning


def test_an_input_replaced_with_an_older_mtime_rebuilds_the_index_naming_it(data, caplog):
    first = month_index(str(data), "0809", BM25Retriever())
    new = data / "0809" / "evolvingqa" / "new.jsonl"
    os.utime(new, None)  # touched, the same bytes: the index stays
    assert month_index(str(data), "0809", BM25Retriever()).reused
    [record] = NEW["0809"]  # other words, the same size, dated before the index
    write_jsonl(new, [{**record, "text": record["text"].replace("married", "admired")}])
    os.utime(new, (LONG_AGO, LONG_AGO))
    with caplog.at_level("WARNING", logger="tw_jax.retrieval.index"):
        changed = month_index(str(data), "0809", BM25Retriever())
    assert not changed.reused and changed.fingerprint != first.fingerprint  # before: no word
    assert _rebuilt_because(caplog) == (
        f"{_folder(data)}: built from other data or settings ({new} does not match its checksum "
        "(its bytes changed after it was indexed)); rebuilding the index")
    assert changed.passages[2].text == "Cien Bordling admired Meel Dreirdstad."
    assert month_index(str(data), "0809", BM25Retriever()).reused


def test_other_retriever_settings_are_named_when_the_index_is_rebuilt(data, caplog):
    month_index(str(data), "0809", BM25Retriever())
    with caplog.at_level("WARNING", logger="tw_jax.retrieval.index"):
        assert not month_index(str(data), "0809", BM25Retriever(k1=0.9)).reused
    assert "(bm25 k1 1.5 → 0.9); rebuilding the index" in _rebuilt_because(caplog)


def _snapshot_folder(data, articles) -> None:
    write_jsonl(data / "0809" / "diffset" / "full.jsonl", articles)
    (data / "0809" / "diffset" / "stats.json").write_text("{}")


def test_a_snapshot_index_follows_the_content_of_full_jsonl_and_its_chunking(data, caplog):
    from tw_jax.retrieval.index import source_index
    from tw_jax.retrieval.snapshot import snapshot_source

    articles = [{"id": 7, "title": "Varnholt", "text": UNCHANGED[0]["text"]},
                {"id": 21, "title": "Cien Bordling", "text": NEW["0809"][0]["text"]}]
    _snapshot_folder(data, articles)
    built = source_index(snapshot_source(str(data), "0809"), BM25Retriever())
    assert not built.reused
    assert source_index(snapshot_source(str(data), "0809"), BM25Retriever()).reused
    full = data / "0809" / "diffset" / "full.jsonl"
    _snapshot_folder(data, [articles[0], {**articles[1], "title": "Cien Bordlinq"}])
    os.utime(full, (LONG_AGO, LONG_AGO))
    with caplog.at_level("WARNING", logger="tw_jax.retrieval.index"):
        again = source_index(snapshot_source(str(data), "0809"), BM25Retriever())
    assert not again.reused and again.passages[-1].title == "Cien Bordlinq"
    assert f"({full} does not match its checksum" in _rebuilt_because(caplog)
    caplog.clear()
    with caplog.at_level("WARNING", logger="tw_jax.retrieval.index"):
        assert not source_index(snapshot_source(str(data), "0809", chunk_words=5),
                                BM25Retriever()).reused
    assert "(chunk_words 100 → 5); rebuilding the index" in _rebuilt_because(caplog)
