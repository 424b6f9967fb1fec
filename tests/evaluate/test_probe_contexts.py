"""``tw-jax probe-contexts`` on the sample world: a month's TemporalWiki probes with the
passages retrieved for them from the month's snapshot (the DiffSet stage's ``full.jsonl``), and
the pieces it is made of on hand-made inputs."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
from eqa_world import build_eqa_world, tiny_dpr_encoders

from tw_jax.cli import main
from tw_jax.errors import DumpError
from tw_jax.evaluate import probe_contexts as pc
from tw_jax.preprocess.probes.probe_csv import read_probe_csv
from tw_jax.retrieval.base import Passage
from tw_jax.retrieval.bm25 import BM25Retriever
from tw_jax.retrieval.index import MARKER, source_index
from tw_jax.retrieval.recall import has_answer
from tw_jax.retrieval.snapshot import article_passages, read_snapshot, snapshot_source
from tw_jax.time import Period

MONTH = "0809"
CATEGORIES = ("unchanged", "updated", "new", "deleted")
ERROR = "tw-jax probe-contexts: error: "


@pytest.fixture(scope="module")
def twiki(sample_world, tmp_path_factory) -> Path:
    """The sample world's TemporalWiki data folder (DiffSets and probes of every month pair,
    every fact kept), as the EvolvingQA tests build it."""
    return build_eqa_world(sample_world, tmp_path_factory.mktemp("probe_contexts")) / "twiki"


def _copy(twiki: Path, to: Path, month: str = MONTH) -> Path:
    """A data folder of its own holding ``month``'s DiffSet and probes (tests that change it)."""
    for part in ("diffset", "probes"):
        shutil.copytree(twiki / month / part, to / month / part)
    return to


def _cli(*argv: str) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["probe-contexts", *argv])
    return code, out.getvalue().splitlines(), err.getvalue().strip()


@pytest.fixture(scope="module")
def bm25_run(twiki, tmp_path_factory) -> dict:
    data = _copy(twiki, tmp_path_factory.mktemp("bm25_data"))
    code, printed, err = _cli("--data", str(data), "--month", MONTH, "--retriever", "bm25")
    assert code == 0, err
    return {"data": data, "printed": printed, "out": data / MONTH / "probes_bm25"}


def _expected_context(index, row: dict, k: int, words: int) -> tuple[str, list[str]]:
    """The context computed again from the index: top-k passages of "subject relation"."""
    [hits] = index.retriever.search([f"{row['subject']} {row['relation']}"], k)
    passages = [index.passages[i] for i, _ in hits]
    full = [w for p in passages for w in f"{p.title}: {p.text}".split()]
    return " ".join(full[:words]), full


def test_bm25_contexts_for_every_category_keep_the_probe_columns(bm25_run, twiki):
    out, printed = bm25_run["out"], bm25_run["printed"]
    assert printed[0].startswith(f"bm25 index of {MONTH}: ") and "built in" in printed[0]
    assert [line.split(":")[0] for line in printed[1:5]] == list(CATEGORIES)
    line = json.loads(printed[-1])
    assert list(line) == [*CATEGORIES, "questions_per_second"] and line["questions_per_second"] > 0
    stats = json.loads((out / "stats.json").read_text())
    for category in CATEGORIES:
        source = twiki / MONTH / "probes" / f"{category}.csv"
        written = out / f"{category}.csv"
        header, source_header = (p.read_text(encoding="utf-8").split("\n", 1)[0]
                                 for p in (written, source))
        assert header == source_header + ",context"
        rows, probes = read_probe_csv(str(written)), read_probe_csv(str(source))
        assert [{k: v for k, v in r.items() if k != "context"} for r in rows] == probes
        assert all(r["subject_id"] and r["context"] for r in rows)  # extra columns are kept
        figures = stats["categories"][category]
        assert figures["rows"] == len(rows) == line[category]["rows"]
        share = (sum(has_answer(r["context"], [r["object"]]) for r in rows) / len(rows)
                 if rows else None)
        assert figures["answer_in_context"] == share == line[category]["answer_in_context"]
    updated = read_probe_csv(str(out / "updated.csv"))
    assert updated and stats["categories"]["updated"]["previous_in_context"] == sum(
        has_answer(r["context"], r["previous_object"].split(" | ")) for r in updated
    ) / len(updated)
    assert "previous_in_context" not in stats["categories"]["new"]
    assert stats["settings"] == {
        "retriever": "bm25", "k": 5, "context_words": 100, "chunk_words": 100,
        "index_fingerprint": stats["settings"]["index_fingerprint"],
        "retriever_settings": BM25Retriever().settings()}
    marker = json.loads((bm25_run["data"] / MONTH / "probes_context" / "index" / "bm25"
                         / MARKER).read_text())
    assert marker["fingerprint"] == stats["settings"]["index_fingerprint"]
    assert marker["inputs"]["passage_settings"] == {"chunker": "ssm_sentences",
                                                    "chunk_words": 100}


def test_the_object_is_in_most_unchanged_and_new_contexts(bm25_run):
    """The sample world's articles state its facts, and a probe's subject names its article:
    BM25 on "subject relation" puts that article in the context (measured: UNCHANGED 0.918,
    NEW 1.000, UPDATED 0.857 with the previous object in 0.714)."""
    line = json.loads(bm25_run["printed"][-1])
    assert line["unchanged"]["answer_in_context"] >= 0.85
    assert line["new"]["answer_in_context"] >= 0.9
    assert line["unchanged"]["rows"] > 500 and line["new"]["rows"] > 20
    assert line["deleted"] == {"rows": 0, "answer_in_context": None}


def test_each_context_is_the_best_passages_first_cut_to_the_word_budget(bm25_run):
    data = bm25_run["data"]
    index = source_index(snapshot_source(str(data), MONTH), BM25Retriever())
    assert index.reused
    cut = 0
    for category in CATEGORIES:
        for row in read_probe_csv(str(bm25_run["out"] / f"{category}.csv")):
            expected, full = _expected_context(index, row, 5, 100)
            assert row["context"] == expected
            assert len(row["context"].split()) == min(100, len(full))
            cut += len(full) > 100
    assert cut > 100  # five passages of up to 100 words: most contexts are cut

    small = _copy(data, data.parent / "small")
    code, printed, err = _cli("--data", str(small), "--month", MONTH, "--k", "2",
                              "--context-words", "7", "--chunk-words", "30")
    assert code == 0, err
    small_index = source_index(snapshot_source(str(small), MONTH, chunk_words=30),
                               BM25Retriever())
    assert small_index.reused and len(small_index.passages) > len(index.passages)
    assert all(len(p.text.split()) <= 30 for p in small_index.passages)
    rows = read_probe_csv(str(small / MONTH / "probes_bm25" / "new.csv"))
    for row in rows:
        expected, full = _expected_context(small_index, row, 2, 7)
        assert row["context"] == expected and len(expected.split()) == 7
        [[best, *_]] = small_index.retriever.search([f"{row['subject']} {row['relation']}"], 1)
        assert expected.startswith(f"{small_index.passages[best[0]].title}:")


def test_a_rerun_reuses_the_index_and_a_changed_snapshot_rebuilds_it(twiki, tmp_path):
    data = _copy(twiki, tmp_path)
    args = ("--data", str(data), "--month", MONTH)
    assert _cli(*args)[0] == 0
    folder = data / MONTH / "probes_context" / "index" / "bm25"
    mtimes = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    first = json.loads((data / MONTH / "probes_bm25" / "stats.json").read_text())
    csv_text = (data / MONTH / "probes_bm25" / "unchanged.csv").read_text()

    code, printed, _ = _cli(*args)
    assert code == 0 and "reused" in printed[0]
    again = json.loads((data / MONTH / "probes_bm25" / "stats.json").read_text())
    assert again["index"]["reused"] and {p.name: p.stat().st_mtime_ns
                                         for p in folder.iterdir()} == mtimes
    assert again["settings"] == first["settings"]
    assert (data / MONTH / "probes_bm25" / "unchanged.csv").read_text() == csv_text

    full = data / MONTH / "diffset" / "full.jsonl"
    with open(full, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": 99999, "title": "Zeta Qorvald",
                                 "text": "Zeta Qorvald is a lighthouse."}) + "\n")
    code, printed, _ = _cli(*args)
    assert code == 0 and "built" in printed[0]
    rebuilt = json.loads((data / MONTH / "probes_bm25" / "stats.json").read_text())
    assert rebuilt["settings"]["index_fingerprint"] != first["settings"]["index_fingerprint"]
    assert rebuilt["index"]["passages"] == first["index"]["passages"] + 1
    assert json.loads((folder / "passages.jsonl").read_text().splitlines()[-1]) == {
        "id": "99999/0", "title": "Zeta Qorvald", "text": "Zeta Qorvald is a lighthouse."}
    code, printed, _ = _cli(*args, "--bm25-k1", "0.9")  # the retriever's settings rebuild it
    assert code == 0 and "built" in printed[0]
    assert "reused" in _cli(*args, "--bm25-k1", "0.9")[1][0]
    assert "built" in _cli(*args, "--bm25-k1", "0.9", "--rebuild")[1][0]


def test_an_interrupted_rerun_leaves_no_stats(twiki, tmp_path, monkeypatch):
    data = _copy(twiki, tmp_path)
    pc.write_probe_contexts(str(data), Period.parse(MONTH), BM25Retriever())
    stats = data / MONTH / "probes_bm25" / "stats.json"
    assert stats.is_file()

    def fails(*args, **kwargs):
        raise OSError("connection lost")

    monkeypatch.setattr(pc, "category_contexts", fails)
    with pytest.raises(OSError, match="connection lost"):
        pc.write_probe_contexts(str(data), Period.parse(MONTH), BM25Retriever())
    assert not stats.exists()


def test_bad_input_is_one_line_naming_the_path(twiki, tmp_path):
    data = _copy(twiki, tmp_path)
    common = ("--data", str(data))
    month = data / MONTH
    cases = [
        (("--month", MONTH, "--k", "0"), "--k must be at least 1, got 0"),
        (("--month", MONTH, "--context-words", "0"), "--context-words must be at least 1"),
        (("--month", MONTH, "--retriever", "tfidf"), "unknown retriever 'tfidf'; known: bm25"),
        (("--month", MONTH, "--retriever", "dpr"), "--retriever dpr needs --question-encoder"),
        (("--month", "1112"), f"{data / '1112' / 'probes'}: no probes folder (run tw-jax probes)"),
    ]
    for argv, message in cases:
        code, _, err = _cli(*common, *argv)
        assert code == 2 and err.startswith(ERROR) and message in err, (argv, err)
        assert "\n" not in err and "Traceback" not in err
    assert not (data / "1112").exists()

    (month / "diffset" / "stats.json").rename(month / "diffset" / "stats.moved")
    code, _, err = _cli(*common, "--month", MONTH)
    assert code == 2 and err == (f"{ERROR}{month / 'diffset'}: has no stats.json: the stage that "
                                 "writes it (tw-jax diffset) did not finish; run it again")
    (month / "diffset" / "stats.moved").rename(month / "diffset" / "stats.json")
    (month / "diffset" / "full.jsonl").unlink()
    code, _, err = _cli(*common, "--month", MONTH)
    assert code == 2 and err == f"{ERROR}{month / 'diffset' / 'full.jsonl'}: missing (run " \
                                "tw-jax diffset)"
    shutil.rmtree(month / "probes")
    code, _, err = _cli(*common, "--month", MONTH)
    assert code == 2 and err == f"{ERROR}{month / 'probes'}: no probes folder (run tw-jax probes)"
    assert not (month / "probes_bm25").exists() and not (month / "probes_context").exists()


def test_dense_retrieval_runs_end_to_end_with_tiny_random_encoders(twiki, tmp_path):
    """`--retriever dpr` with tiny random DPR encoder folders, written as the EvolvingQA dpr
    test writes them (DenseRetriever.random, then save)."""
    question, ctx = tiny_dpr_encoders(tmp_path / "encoders", [
        "the", "of", "is", "was", "in", "population", "head", "capital", "city", "country", ":",
        ".", ","])
    data = _copy(twiki, tmp_path / "data")
    code, printed, err = _cli("--data", str(data), "--month", MONTH, "--retriever", "dpr",
                              "--question-encoder", str(question), "--ctx-encoder", str(ctx),
                              "--k", "3", "--context-words", "40")
    assert code == 0, err
    line = json.loads(printed[-1])
    assert list(line) == [*CATEGORIES, "questions_per_second"]
    assert (data / MONTH / "probes_context" / "index" / "dpr" / "embeddings.npy").is_file()
    stats = json.loads((data / MONTH / "probes_dpr" / "stats.json").read_text())
    assert stats["settings"]["retriever"] == "dpr" and stats["settings"]["k"] == 3
    rows = read_probe_csv(str(data / MONTH / "probes_dpr" / "unchanged.csv"))
    assert rows and all(0 < len(r["context"].split()) <= 40 for r in rows)
    assert 0 <= line["unchanged"]["answer_in_context"] <= 1


# --- the pieces, on hand-made inputs ------------------------------------------------------


def test_context_text_joins_title_and_text_and_cuts_from_the_end():
    passages = [Passage("1/0", "Ada Lovelace", "Ada  was\na mathematician."),
                Passage("2/3", " ", "No title\there."), Passage("3/0", "Z", "last")]
    assert pc.context_text(passages, 100) == (
        "Ada Lovelace: Ada was a mathematician. No title here. Z: last")
    assert pc.context_text(passages, 5) == "Ada Lovelace: Ada was a"
    assert pc.context_text(passages, 9) == "Ada Lovelace: Ada was a mathematician. No title here."
    assert pc.context_text([], 5) == ""
    assert pc.previous_objects({"previous_object": "A | B C |  "}) == ["A", "B C"]
    assert pc.previous_objects({"previous_object": ""}) == []
    assert pc.query({"subject": "Varnholt", "relation": "capital", "object": "x"}) == (
        "Varnholt capital")


def test_an_article_is_cut_into_sentence_packed_passages_of_at_most_n_words(tmp_path):
    text = "One two three.\nFour five six seven.\nEight nine ten eleven twelve."
    assert [(p.id, p.title, p.text) for p in article_passages("7", "T", text, 4)] == [
        ("7/0", "T", "One two three."), ("7/1", "T", "Four five six seven."),
        ("7/2", "T", "Eight nine ten eleven"), ("7/3", "T", "twelve.")]
    assert [p.text for p in article_passages("7", "T", text, 7)] == [
        "One two three.\nFour five six seven.", "Eight nine ten eleven twelve."]
    assert article_passages("8", "Empty", " \n ", 4) == []

    full = tmp_path / "full.jsonl"
    full.write_text(json.dumps({"id": 5, "title": "A", "text": "x y."}) + "\n"
                    + json.dumps({"id": 5, "title": "B", "text": "z."}) + "\n")
    with pytest.raises(DumpError, match=r"full\.jsonl, record 2: id '5' repeats"):
        read_snapshot(str(full), 10)
    full.write_text(json.dumps({"id": 5, "title": None, "text": "x"}) + "\n")
    with pytest.raises(DumpError, match=r"full\.jsonl, record 1: title and text must be"):
        read_snapshot(str(full), 10)
    full.write_text(json.dumps({"id": 5, "text": "x"}) + "\n")
    with pytest.raises(DumpError, match=r"full\.jsonl, line 1: expected an object with id, "
                                        r"title, text"):
        read_snapshot(str(full), 10)


def test_a_data_folder_in_a_bucket_works_as_a_local_one(twiki, tmp_path, gcs_bucket):
    from tw_jax.io import paths

    local = _copy(twiki, tmp_path)
    remote = f"{gcs_bucket}/data"
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        paths.copy(str(path), paths.join(remote, str(path.relative_to(local))))
    code, printed, err = _cli("--data", remote, "--month", MONTH)
    assert code == 0, err
    assert printed[0].endswith(f"({remote}/{MONTH}/probes_context/index/bm25)")
    assert _cli("--data", str(local), "--month", MONTH)[0] == 0

    def figures(stats: dict) -> dict:
        return {c: {k: v for k, v in f.items() if k != "search_seconds"}
                for c, f in stats["categories"].items()}

    local_stats = json.loads((local / MONTH / "probes_bm25" / "stats.json").read_text())
    remote_stats = json.loads(paths.read_text(paths.join(remote, MONTH, "probes_bm25",
                                                         "stats.json")))
    assert figures(remote_stats) == figures(local_stats)
    assert remote_stats["settings"] == local_stats["settings"]
    for category in CATEGORIES:
        name = f"{MONTH}/probes_bm25/{category}.csv"
        assert paths.read_text(paths.join(remote, name)) == (local / name).read_text()
    code, again, _ = _cli("--data", remote, "--month", MONTH)
    assert code == 0 and "reused" in again[0]
    assert again[1:5] == printed[1:5]  # the category lines: figures and files


def test_every_retriever_is_an_open_book_method():
    """``tw-jax lifelong --method <retriever>`` knows every registered retriever."""
    from tw_jax.evaluate.groups import OPEN_BOOK
    from tw_jax.evaluate.results import METHODS
    from tw_jax.retrieval import known_retrievers

    assert sorted(OPEN_BOOK) == sorted(known_retrievers())
    assert set(OPEN_BOOK) <= set(METHODS)


def test_open_book_probes_are_refused_once_the_probes_they_were_made_from_change(twiki,
                                                                                  tmp_path):
    from tw_jax.preprocess.probes.probe_csv import read_stage_probes

    data = _copy(twiki, tmp_path)
    assert _cli("--data", str(data), "--month", MONTH)[0] == 0
    month = data / MONTH
    stats = json.loads((month / "probes_bm25" / "stats.json").read_text())
    probes = month / "probes" / "updated.csv"
    assert stats["made_from"]["files"]["probes/updated.csv"]["bytes"] == probes.stat().st_size
    opened = str(month / "probes_bm25" / "updated.csv")
    rows = read_stage_probes(opened)
    assert len(rows) == stats["categories"]["updated"]["rows"]

    # the same number of rows, one object changed (and its times kept, as cp -p keeps them):
    # the probes folder's own counts still hold, the contexts were retrieved for other facts
    before = probes.stat()
    text = probes.read_text(encoding="utf-8")
    first = read_probe_csv(str(probes))[0]["object"]
    probes.write_text(text.replace(first, first[::-1] + "x", 1), encoding="utf-8")
    import os

    os.utime(probes, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(DumpError) as caught:
        read_stage_probes(opened)
    message = str(caught.value)
    assert message.startswith(f"{month / 'probes_bm25'}: is stale: it was made from {probes}, ")
    assert message.endswith(f"; run tw-jax probe-contexts --data {data} --month {MONTH} "
                            "--retriever bm25") and "\n" not in message
    assert len(read_stage_probes(str(probes))) == len(rows)  # the probes themselves are whole

    assert _cli("--data", str(data), "--month", MONTH)[0] == 0  # the command it names
    assert read_stage_probes(opened)[0]["object"] == first[::-1] + "x"
