"""CKL, ECBD and EvolvingQA commands with their inputs and outputs in a bucket of a real local GCS
server: each run writes exactly the files of the same run on local folders (bytes equal; in the
stats files only the input paths and timings differ), leaves no temporary object behind, writes
its completion marker last, and a missing input in a bucket is one error line with exit status 2.
"""

from __future__ import annotations

import bz2
import csv
import io
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from gcs_compare import (
    assert_no_local_gs_folder,
    assert_same_outputs,
    assert_written_last,
    bucket_files,
    json_content,
    local_files,
)

from tw_jax.cli import main
from tw_jax.io import paths
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    """Each test runs in its own folder, where :func:`assert_no_local_gs_folder` looks."""
    monkeypatch.chdir(tmp_path)


# --- CKL ----------------------------------------------------------------------------------


def test_ckl_build_lama_in_a_bucket_equals_the_local_run(sample_world, gcs_bucket, gcs_server,
                                                         tmp_path, capsys):
    root, _ = sample_world
    dump = wikidata_dump(root, "2021-09")
    remote_dump = f"{gcs_bucket}/dumps/{dump.name}"
    paths.copy(dump, remote_dump)
    options = ["--max-per-relation", "3"]
    assert main(["ckl", "build-lama", "--wikidata", str(dump), "--out", str(tmp_path / "il"),
                 *options]) == 0
    assert main(["ckl", "build-lama", "--wikidata", remote_dump, "--out", f"{gcs_bucket}/il",
                 *options]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed[1] == {**printed[0], "out": f"{gcs_bucket}/il"} and printed[1]["probes"] == 21

    local, remote = local_files(tmp_path / "il"), bucket_files(gcs_server, f"{gcs_bucket}/il")
    assert sorted(remote) == ["invariantLAMA.csv", "invariantLAMA_answers.json",
                              "invariantLAMA_facts.csv", "stats.json"]
    assert_same_outputs(local, remote, {remote_dump: str(dump)})
    assert json.loads(remote["stats.json"])["inputs"] == {"wikidata": remote_dump}
    assert len(remote["invariantLAMA.csv"].decode().splitlines()) == 1 + 21
    assert_written_last(gcs_server, f"{gcs_bucket}/il", "stats.json")


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _ckl_release(root: Path) -> Path:
    """A small CKL release: InvariantLAMA, UpdatedLAMA with its answers, two NewLAMA-Easy
    splits and two recent-news corpora."""
    _write_csv(root / "invariantLAMA.csv", ["id", "input", "output"],
               [["0", "Barack Obama was born in <extra_id_0> .", "Honolulu"],
                ["1", "The capital of France is <extra_id_0> .", "Paris"]])
    _write_csv(root / "updatedLAMA.csv", ["unique_id", "statement", "new_answer"],
               [["u1", "<extra_id_0> leads England.", "Boris Johnson"]])
    (root / "updatedlama_val_answers.json").write_text(json.dumps(
        {"u1": [{"old": ["Theresa May"], "new": ["Boris Johnson", "Johnson"]}]}))
    for split, row in (("1", ["e1", "Lazard hurt his <extra_id_0> .", "knee"]),
                       ("2", ["e2", "They study at <extra_id_0> .", "Howard University"])):
        _write_csv(root / f"newLAMA_easy_small_split{split}.csv",
                   ["unique_id", "statement", "answer"], [row])
    (root / "recentlama_val_answers.json").write_text(json.dumps(
        {"e1": ["knee", "a knee"], "e2": ["Howard University"]}))
    news = [["<extra_id_0> won the election.", "<extra_id_0> Joe Biden", "Joe Biden won."],
            ["Paris is in <extra_id_0>.", "<extra_id_0> France", "Paris is in France."]]
    for number, rows in (("1", news[:1]), ("2", news)):
        _write_csv(root / f"recent_news_small{number}.csv", ["input", "output", "original"], rows)
    return root


def test_ckl_phases_into_a_bucket_equal_the_local_run(gcs_bucket, gcs_server, tmp_path):
    release = _ckl_release(tmp_path / "release")
    vocab = tmp_path / "spiece.model"
    vocab.write_bytes(bytes(range(256)) * 4)  # copied as it is: any bytes do
    remote_vocab = f"{gcs_bucket}/vocab/spiece.model"
    paths.copy(vocab, remote_vocab)
    options = ["--corpus", "recent_news_small1.csv,recent_news_small2.csv", "--new",
               "newLAMA_easy_small_split1.csv,newLAMA_easy_small_split2.csv",
               "--updated", "updatedLAMA.csv,-"]
    assert main(["ckl", "phases", "--data", str(release), "--out", str(tmp_path / "phases"),
                 "--vocab", str(vocab), *options]) == 0
    for name in os.listdir(release):  # the release read from the bucket too
        paths.copy(release / name, f"{gcs_bucket}/release/{name}")
    assert main(["ckl", "phases", "--data", f"{gcs_bucket}/release", "--out",
                 f"{gcs_bucket}/phases", "--vocab", remote_vocab, *options]) == 0

    local = local_files(tmp_path / "phases")
    remote = bucket_files(gcs_server, f"{gcs_bucket}/phases")
    assert_same_outputs(local, remote, {remote_vocab: str(vocab),
                                         f"{gcs_bucket}/release": str(release)})
    assert {"0001/ssm/diffset.tfrecord-00000-of-00001", "0001/ckl/updatedLAMA.csv",
            "0102/probes/new.csv", "vocab/t5/spiece.model"} <= set(remote)
    assert "0102/ckl/updatedLAMA.csv" not in remote  # phase 2 has no UpdatedLAMA
    manifest = json.loads(remote["ckl_phases.json"])
    assert manifest["t5_vocab"] == remote_vocab and manifest["phases"][1]["counts"]["ssm"] == {
        "examples": 2, "skipped_empty": 0}
    assert remote["vocab/t5/spiece.model"] == vocab.read_bytes()
    assert_written_last(gcs_server, f"{gcs_bucket}/phases", "ckl_phases.json")


# --- ECBD ---------------------------------------------------------------------------------


STORM = ("'''Storm Alpha''' was a strong storm in the year 2020 over the sea.\n\n"
         "Storm Alpha moved north across the islands in two days.\n\n"
         "Later Storm Alpha weakened over the cold water near the coast.")
BETA = ("'''Beta Corp''' is a company making bicycles since 2019.\n\n"
        "Beta Corp sells bicycles in many countries around the world.")


def _ecbd_dumps(folder: Path) -> tuple[Path, Path]:
    """A Wikidata dump of two dated items and a Wikipedia dump of their articles."""
    def item(qid: str, label: str, prop: str, time: str) -> str:
        value = {"time": time, "timezone": 0, "before": 0, "after": 0, "precision": 11,
                 "calendarmodel": "http://www.wikidata.org/entity/Q1985727"}
        claim = {"mainsnak": {"snaktype": "value", "property": prop, "datatype": "time",
                              "datavalue": {"type": "time", "value": value}},
                 "type": "statement", "rank": "normal"}
        return json.dumps({"type": "item", "id": qid,
                           "labels": {"en": {"language": "en", "value": label}},
                           "sitelinks": {"enwiki": {"site": "enwiki", "title": label}},
                           "claims": {prop: [claim]}})

    items = [item("Q1", "Storm Alpha", "P580", "+2020-09-01T00:00:00Z"),
             item("Q2", "Beta Corp", "P571", "+2019-04-01T00:00:00Z")]
    wikidata = folder / "wikidata.json.bz2"
    wikidata.write_bytes(bz2.compress(("[\n" + ",\n".join(items) + "\n]\n").encode()))
    pages = "".join(
        f"<page><title>{title}</title><ns>0</ns><id>{page_id}</id><revision><id>1</id>"
        f"<text xml:space=\"preserve\">{escape(text)}</text></revision></page>\n"
        for page_id, title, text in ((11, "Beta Corp", BETA), (13, "Storm Alpha", STORM)))
    wikipedia = folder / "enwiki.xml.bz2"
    wikipedia.write_bytes(bz2.compress(('<mediawiki xmlns="http://www.mediawiki.org/xml/'
                                        'export-0.10/">\n' + pages + "</mediawiki>\n").encode()))
    return wikidata, wikipedia


def test_ecbd_build_in_a_bucket_equals_the_local_run(gcs_bucket, gcs_server, tmp_path):
    wikidata, wikipedia = _ecbd_dumps(tmp_path)
    remote = {}
    for dump in (wikidata, wikipedia):
        remote[dump] = f"{gcs_bucket}/dumps/{dump.name}"
        paths.copy(dump, remote[dump])
    options = ["--min-words", "10"]
    assert main(["ecbd", "build", "--wikidata", str(wikidata), "--wikipedia", str(wikipedia),
                 "--out", str(tmp_path / "ecbd"), *options]) == 0
    assert main(["ecbd", "build", "--wikidata", remote[wikidata], "--wikipedia",
                 remote[wikipedia], "--out", f"{gcs_bucket}/ecbd", *options]) == 0

    local = local_files(tmp_path / "ecbd")
    written = bucket_files(gcs_server, f"{gcs_bucket}/ecbd")
    assert_same_outputs(local, written, {url: str(dump) for dump, url in remote.items()},
                         timings=("seconds",))
    stats = json.loads(written["stats.json"])
    assert sorted(written) == sorted([*stats["files"], "stats.json"])
    assert stats["examples"] == {"NP-COMMON": 8, "RANDOM": 15}
    assert stats["subsets"]["2020"]["dev"] == {"entities": 1, "np_spans": 4, "random_spans": 10}
    rows = [json.loads(line) for line in written["2020/np_spans_dev.json"].splitlines()]
    assert {r["entity_id"] for r in rows} == {"Q1"} and len(rows) == 4
    assert_written_last(gcs_server, f"{gcs_bucket}/ecbd", "stats.json")


# --- EvolvingQA ---------------------------------------------------------------------------


EQA_OPTIONS = ["--min-changed-chars", "0", "--unchanged-articles", "20"]


def _eqa_dumps(root: Path, bucket: str) -> tuple[list[Path], list[str]]:
    """The sample world's August and September dumps, and their copies in ``bucket``."""
    dumps = [wikipedia_dump(root, month) for month in ("2021-08", "2021-09")]
    remote_dumps = [f"{bucket}/dumps/{dump.name}" for dump in dumps]
    for dump, remote_dump in zip(dumps, remote_dumps, strict=True):
        paths.copy(dump, remote_dump)
    return dumps, remote_dumps


def test_evolvingqa_build_reads_and_writes_its_files_in_a_bucket(sample_world, gcs_bucket,
                                                                 gcs_server, tmp_path):
    """The build's own files on gs://: dumps streamed from the bucket, the complete DiffSet and
    SSM stage folders of an earlier run of those dumps (copied into the bucket) reused and read
    there, passages and stats written there; exactly the files of the local run."""
    root, _ = sample_world
    dumps, remote_dumps = _eqa_dumps(root, gcs_bucket)
    local_out, out = tmp_path / "eqa", f"{gcs_bucket}/eqa"
    assert main(["evolvingqa", "build", "--dumps", *map(str, dumps), "--out", str(local_out),
                 *EQA_OPTIONS]) == 0
    renamed = {url: str(dump) for dump, url in zip(dumps, remote_dumps, strict=True)}
    renamed[out] = str(local_out)
    for stage in ("diffset", "ssm"):  # as if run on the bucket's dumps into the bucket
        for file in sorted((local_out / "0809" / stage).iterdir()):
            data = file.read_bytes()
            for url, local in renamed.items():
                data = data.replace(local.encode(), url.encode()) if file.suffix == ".json" else data
            with paths.open_file(f"{out}/0809/{stage}/{file.name}", "wb") as handle:
                handle.write(data)
    assert main(["evolvingqa", "build", "--dumps", *remote_dumps, "--out", out,
                 *EQA_OPTIONS]) == 0

    local, remote = local_files(local_out), bucket_files(gcs_server, out)
    build = {name: json_content(files.pop("evolvingqa/build.json"), rename, ("seconds",))
             for name, files, rename in (("local", local, {}), ("remote", remote, renamed))}
    assert build["remote"]["pairs"]["0809"].pop("reused") is True
    assert build["local"]["pairs"]["0809"].pop("reused") is False
    assert build["remote"] == build["local"]
    assert_same_outputs(local, remote, renamed, timings=("seconds",))
    assert len(remote["0809/evolvingqa/edited.jsonl"].splitlines()) == 14
    assert len(remote["evolvingqa/unchanged.jsonl"].splitlines()) == 20
    assert json.loads(remote["0809/evolvingqa/stats.json"])["new_passages"] == 30
    assert_written_last(gcs_server, out, "evolvingqa/build.json")


def test_evolvingqa_build_in_a_bucket_equals_the_local_run(sample_world, gcs_bucket, gcs_server,
                                                           tmp_path):
    root, _ = sample_world
    dumps, remote_dumps = _eqa_dumps(root, gcs_bucket)
    assert main(["evolvingqa", "build", "--dumps", *map(str, dumps), "--out",
                 str(tmp_path / "eqa"), *EQA_OPTIONS]) == 0
    assert main(["evolvingqa", "build", "--dumps", *remote_dumps, "--out", f"{gcs_bucket}/eqa",
                 *EQA_OPTIONS]) == 0

    local = local_files(tmp_path / "eqa")
    remote = bucket_files(gcs_server, f"{gcs_bucket}/eqa")
    renamed = {url: str(dump) for dump, url in zip(dumps, remote_dumps, strict=True)}
    renamed[f"{gcs_bucket}/eqa"] = str(tmp_path / "eqa")
    assert_same_outputs(local, remote, renamed, timings=("seconds",))
    assert {"0809/evolvingqa/edited.jsonl", "0809/evolvingqa/new.jsonl", "0809/ssm/stats.json",
            "evolvingqa/unchanged.jsonl", "evolvingqa/build.json"} <= set(remote)
    assert json.loads(remote["evolvingqa/build.json"])["dumps"] == remote_dumps
    assert_written_last(gcs_server, f"{gcs_bucket}/eqa", "evolvingqa/build.json")


PROBE_HEADER = ["subject", "relation", "object", "subject_id", "relation_id", "object_id",
                "previous_object", "text", "cloze"]


def _probe_csv(rows: list[tuple[str, str, str, str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(PROBE_HEADER)
    for subject, relation, obj, previous in rows:
        writer.writerow([subject, relation, obj, "", "", "", previous, "", ""])
    return buffer.getvalue()


def _write_probes(root: str) -> None:
    """Probes of two month pairs under ``root`` (a local folder or a URL)."""
    kept = [("Varnholt", "capital", "Trurhollow", ""), ("Suan Geltholt", "image", "Suan.jpg", "")]
    unchanged = {"0809": [*kept, ("Feltstad", "population", "900", "")], "0910": kept}
    for pair in ("0809", "0910"):
        folder = paths.join(root, pair, "probes")
        paths.write_text(paths.join(folder, "unchanged.csv"), _probe_csv(unchanged[pair]))
        paths.write_text(paths.join(folder, "new.csv"),
                         _probe_csv([("Cien Bordling", "spouse", "Meel", "")]))
        paths.write_text(paths.join(folder, "updated.csv"), _probe_csv([
            ("Trurmouth", "head of government", "Groris Funley", "Wiro Derncroft | Old Mayor"),
            ("Dravminster", "population", "24042", "")]))
        paths.write_text(paths.join(folder, "stats.json"), "{}\n")  # written last by the stage


def test_evolvingqa_offline_generation_into_a_bucket_equals_the_local_run(
        gcs_bucket, gcs_server, tmp_path):
    _write_probes(str(tmp_path / "data"))
    _write_probes(f"{gcs_bucket}/data")
    assert main(["evolvingqa", "generate", "--data", str(tmp_path / "data"),
                 "--finetune-fraction", "0.5"]) == 0
    assert main(["evolvingqa", "generate", "--data", f"{gcs_bucket}/data",
                 "--finetune-fraction", "0.5"]) == 0

    local = local_files(tmp_path / "data" / "qa")
    remote = bucket_files(gcs_server, f"{gcs_bucket}/data/qa")
    assert_same_outputs(local, remote, {f"{gcs_bucket}/data": str(tmp_path / "data")})
    assert remote["edited_0910.csv"].decode().splitlines() == [
        "question,answer1,answer2",
        "Who is the head of government of Trurmouth?,Wiro Derncroft,Groris Funley"]
    summary = json.loads(remote["generate.json"])
    assert summary["probes"] == f"{gcs_bucket}/data" and summary["pairs"] == ["0809", "0910"]
    assert summary["sets"]["unchanged"] == {"train": 1, "eval": 1, "ambiguous": 0}
    assert_written_last(gcs_server, f"{gcs_bucket}/data/qa", "generate.json")


class _Completions(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers every request alike."""

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests += 1
        body = json.dumps({"choices": [{"message": {"content": "Answer: 42"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_llm_reply_cache_in_a_bucket_is_uploaded_whole(gcs_bucket, gcs_server):
    from tw_jax.preprocess.evolvingqa.client import ChatClient

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    httpd.requests = 0
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    endpoint, cache = f"http://127.0.0.1:{httpd.server_address[1]}/v1", f"{gcs_bucket}/qa/c.jsonl"
    try:
        questions = [[{"role": "user", "content": f"question {i}"}] for i in range(3)]
        with ChatClient(endpoint, "m", cache=cache) as client:
            assert [client.complete(q) for q in questions[:2]] == ["Answer: 42"] * 2
        with ChatClient(endpoint, "m", cache=cache) as client:  # a rerun: two from the cache
            assert [client.complete(q) for q in questions] == ["Answer: 42"] * 3
        assert httpd.requests == 3
        lines = [json.loads(line) for line in paths.read_text(cache).splitlines()]
        assert len(lines) == 3 and {line["reply"] for line in lines} == {"Answer: 42"}
        assert gcs_server.objects(gcs_bucket[5:], "qa/") == ["qa/c.jsonl"]
        assert_no_local_gs_folder()
    finally:
        httpd.shutdown()
        httpd.server_close()


# --- a missing input in a bucket ----------------------------------------------------------


@pytest.mark.parametrize(("command", "flag"), [
    (["ckl", "build-lama", "--wikidata", "{missing}", "--out", "{bucket}/o"], "--wikidata"),
    (["ecbd", "build", "--wikidata", "{missing}", "--wikipedia", "{local}", "--out",
      "{bucket}/o"], "--wikidata"),
    (["evolvingqa", "build", "--dumps", "{local}", "{missing}", "--out", "{bucket}/o"], "--dumps"),
    (["evolvingqa", "generate", "--data", "{folder}", "--probes", "{missing}"], "--probes"),
    (["ckl", "phases", "--data", "{missing}", "--out", "{bucket}/o", "--corpus", "a.csv"],
     "--data"),
    (["ecbd", "report", "{missing}"], "results"),
])
def test_a_missing_input_in_a_bucket_is_one_error_line(command, flag, gcs_bucket, tmp_path,
                                                      capsys):
    local = tmp_path / "enwiki-20210801-pages-articles.xml"
    local.write_text("<mediawiki></mediawiki>\n")
    missing = f"{gcs_bucket}/missing.json.bz2"
    argv = [a.format(bucket=gcs_bucket, local=local, missing=missing, folder=tmp_path)
            for a in command]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    line = (f"tw-jax {command[0]} {command[1]}: error: argument {flag}: {missing}: "
            "no such object or folder")
    assert [e for e in err.splitlines() if "error" in e] == [line] and "Traceback" not in err
    assert err.splitlines()[-1] == line
    assert_no_local_gs_folder()


def test_an_output_in_a_missing_bucket_is_one_error_line(sample_world, gcs_bucket, capsys):
    root, _ = sample_world  # gcs_bucket: every client talks to the local server
    with pytest.raises(SystemExit) as stopped:
        main(["ckl", "build-lama", "--wikidata", str(wikidata_dump(root, "2021-09")), "--out",
              "gs://tw-jax-no-such-bucket/il"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tw-jax ckl build-lama: error: argument --out: gs://tw-jax-no-such-bucket/il: bucket "
        "'tw-jax-no-such-bucket' does not exist (or is not visible with these credentials)")
