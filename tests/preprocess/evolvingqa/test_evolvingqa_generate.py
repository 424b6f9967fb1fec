"""QA generation: the OpenAI-compatible client against a local HTTP server started here (which
checks every request and answers with canned completions), the paper's filters, and the offline
generator from probe CSVs."""

import csv
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tw_jax.benchmarks import evolvingqa_cli
from tw_jax.preprocess.evolvingqa.client import ChatClient, ChatError

KEY = "sk-test-not-a-real-key"
MODEL = "test-model"

# The passages of a tiny build folder (the build's JSON-lines formats).
UNCHANGED = [
    {"id": "1:0", "article_id": 1, "title": "Silent Islands", "month": "2021-08",
     "text": "Silent Islands is a 2016 film directed by Zelel Wernton.",
     "entities": [{"text": "2016", "label": "DATE"}, {"text": "Zelel Wernton", "label": "PERSON"}]},
    {"id": "2:0", "article_id": 2, "title": "Trurmouth", "month": "2021-08",
     "text": "Trurmouth is a city on the coast of Corvania.",
     "entities": [{"text": "Trurmouth", "label": "GPE"}, {"text": "Corvania", "label": "GPE"}]},
    {"id": "3:0", "article_id": 3, "title": "Feltstad", "month": "2021-08",
     "text": "Feltstad has a population of 24042.",
     "entities": [{"text": "24042", "label": "CARDINAL"}]},
    {"id": "4:0", "article_id": 4, "title": "Nothing", "month": "2021-08",
     "text": "it is quiet here.", "entities": []},
]
NEW = [
    {"id": "5:0", "article_id": 5, "title": "Cien Bordling", "pair": "0809", "month": "2021-09",
     "kind": "changed", "text": "Bordling and Meel Dreirdstad married on 24 August 2021.",
     "entities": [{"text": "Meel Dreirdstad", "label": "PERSON"},
                  {"text": "24 August 2021", "label": "DATE"}]},
]


def _edited(article_id, title, old, new, old_entities, new_entities):
    return {"id": f"{article_id}:0:0", "article_id": article_id, "title": title, "pair": "0809",
            "old_month": "2021-08", "new_month": "2021-09", "old_text": old, "new_text": new,
            "old_paragraph": old, "new_paragraph": new,
            "old_entities": [{"text": e, "label": "X"} for e in old_entities],
            "new_entities": [{"text": e, "label": "X"} for e in new_entities]}


EDITED = [
    _edited(6, "Grol Textiles", "Its chief executive officer is L. J. Kulric.",
            "Its chief executive officer is Granette Naunsberg.", ["L. J. Kulric"],
            ["Granette Naunsberg"]),
    _edited(7, "Veistdale Rovers", "It is a club based in Veistdale.",
            "It is a club from Veistdale.", ["Veistdale"], ["Veistdale"]),
    _edited(8, "Hirwick", "The team has 28 players.", "The team has Twenty-Eight players.",
            ["28"], ["Twenty-Eight"]),
]
QUESTION = {
    "Silent Islands": "Question: Who directed Silent Islands?\nAnswer: Zelel Wernton",
    "Trurmouth": "Question: What is the capital of Corvania?\nAnswer: Paris",  # not in passage
    "Feltstad": "Question: What is the population of Feltstad?\nAnswer: 24042",
    "Cien Bordling": "Question: Whom did Bordling marry?\nAnswer: Meel Dreirdstad",
    "Grol Textiles": ("Question: Who is the chief executive officer of Grol Textiles?\n"
                      "Answer1: L. J. Kulric\nAnswer2: Granette Naunsberg"),
    "Veistdale Rovers": "no factual update",
    "Hirwick": "Question: How many players does the team have?\nAnswer1: 28\nAnswer2: "
               "Twenty-Eight",
}


def _reply(messages: list[dict]) -> str:
    query = messages[-1]["content"]
    if "semantically equivalent" in query:
        return "(A) True" if "'28'" in query else "(B) False"
    if "Given the context, is the proposed answer" in query:
        return "(B) False" if "Proposed Answer: 24042" in query else "(A) True"
    title = query.split('"')[1]
    return QUESTION[title]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.seen.append({"path": self.path, "auth": self.headers.get("Authorization"),
                            "type": self.headers.get("Content-Type"), "body": body})
        if server.failures:
            server.failures.pop(0)
            self.send_response(server.status)
            self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(b'{"error": "busy"}')
            return
        ok = (self.path == "/v1/chat/completions" and body.get("model") == MODEL
              and self.headers.get("Authorization") == f"Bearer {KEY}")
        if not ok:
            self.send_response(400)
            self.end_headers()
            return
        content = json.dumps({"choices": [{"index": 0, "message": {
            "role": "assistant", "content": _reply(body["messages"])}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.seen, httpd.failures, httpd.status = [], [], 429
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _url(httpd) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _build_folder(root: Path) -> Path:
    _write_jsonl(root / "evolvingqa" / "unchanged.jsonl", UNCHANGED)
    _write_jsonl(root / "0809" / "evolvingqa" / "new.jsonl", NEW)
    _write_jsonl(root / "0809" / "evolvingqa" / "edited.jsonl", EDITED)
    (root / "0809" / "evolvingqa" / "stats.json").write_text("{}")
    (root / "evolvingqa" / "stats.json").write_text("{}")
    return root


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_llm_generation_applies_the_papers_filters(server, tmp_path, monkeypatch, capsys):
    data = _build_folder(tmp_path / "data")
    monkeypatch.setenv("EQA_TEST_KEY", KEY)
    argv = ["evolvingqa", "generate", "--data", str(data), "--endpoint", _url(server),
            "--model", MODEL, "--api-key-env", "EQA_TEST_KEY", "--concurrency", "2",
            "--finetune-fraction", "1"]
    assert evolvingqa_cli.main(argv) == 0
    printed = capsys.readouterr()
    qa = data / "qa"
    assert _rows(qa / "unchanged_train.csv") == [
        ["question", "answer"], ["Who directed Silent Islands?", "Zelel Wernton"]]
    assert _rows(qa / "new_0809.csv") == [
        ["question", "answer"], ["Whom did Bordling marry?", "Meel Dreirdstad"]]
    assert _rows(qa / "edited_0809.csv") == [
        ["question", "answer1", "answer2"],
        ["Who is the chief executive officer of Grol Textiles?", "L. J. Kulric",
         "Granette Naunsberg"]]
    summary = json.loads((qa / "generate.json").read_text())
    assert summary["reasons"] == {
        "unchanged": {"answer_not_in_passage": 1, "kept": 1, "llm_hallucination": 1,
                      "no_entities": 1},
        "new_0809": {"kept": 1},
        "edited_0809": {"kept": 1, "llm_equivalent": 1, "no_factual_update": 1},
    }
    # Requests: 3 + 1 generations, 2 + 1 verifications, 3 edited generations, 2 equivalence
    # checks, 2 verifications of the kept pair; the passage without entities costs nothing.
    assert summary["requests"] == len(server.seen) == 14
    first = server.seen[0]
    assert (first["path"], first["type"], first["auth"]) == (
        "/v1/chat/completions", "application/json", f"Bearer {KEY}")
    assert first["body"]["temperature"] == 0.0
    assert [m["role"] for m in first["body"]["messages"]] == ["system", "user", "assistant", "user"]
    edited_bodies = [s["body"] for s in server.seen if "two documents" in
                     s["body"]["messages"][0]["content"]]
    assert "written in August 2021 and September 2021" in edited_bodies[0]["messages"][0]["content"]
    everything = printed.out + printed.err + "".join(p.read_text() for p in qa.iterdir())
    assert KEY not in everything  # the key is never written or printed
    # A rerun is answered from the cache: no request reaches the server.
    assert evolvingqa_cli.main(argv) == 0
    assert len(server.seen) == 14
    assert json.loads((qa / "generate.json").read_text())["requests"] == 0


def test_client_retries_transient_errors_with_backoff(server, monkeypatch):
    monkeypatch.setenv("EQA_TEST_KEY", KEY)
    slept = []
    client = ChatClient(_url(server), MODEL, api_key_env="EQA_TEST_KEY", backoff=0.5,
                        max_retries=3, sleep=slept.append)
    server.failures = [1, 2]
    question = [{"role": "user", "content": 'Document of "Feltstad" in May 2021: ...'}]
    assert client.complete(question).endswith("Answer: 24042")
    assert slept == [0.5, 1.0] and client.requests == 3
    server.status, server.failures = 503, [1] * 5
    with pytest.raises(ChatError, match=r"giving up after 4 attempts \(HTTP 503"):
        client.complete(question + [{"role": "user", "content": "again"}])
    assert KEY not in repr(client)


def test_client_errors_are_plain(server, monkeypatch):
    with pytest.raises(ChatError, match="EQA_MISSING_KEY .* not set"):
        ChatClient(_url(server), MODEL, api_key_env="EQA_MISSING_KEY")
    client = ChatClient(_url(server), "wrong-model", max_retries=0, sleep=lambda s: None)
    with pytest.raises(ChatError, match="HTTP 400"):  # not retried
        client.complete([{"role": "user", "content": "x"}])
    with pytest.raises(ChatError, match="not an http"):
        ChatClient("ftp://example.org", MODEL)


PROBE_HEADER = ["subject", "relation", "object", "subject_id", "relation_id", "object_id",
                "previous_object", "text", "cloze"]


def _probes(folder: Path, category: str, rows: list[tuple[str, str, str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{category}.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(PROBE_HEADER)
        for subject, relation, obj, previous in rows:
            writer.writerow([subject, relation, obj, "", "", "", previous, "", ""])
    (folder / "stats.json").write_text("{}")  # the probes stage's completion marker


def test_offline_generation_from_probes(tmp_path, capsys):
    probes = tmp_path / "probes"
    _probes(probes / "0809" / "probes", "unchanged", [
        ("Varnholt", "capital", "Trurhollow", ""), ("Feltstad", "population", "900", ""),
        ("Suan Geltholt", "image", "Suan.jpg", ""), ("Film", "cast member", "A", ""),
        ("Film", "cast member", "B", "")])
    _probes(probes / "0910" / "probes", "unchanged", [
        ("Varnholt", "capital", "Trurhollow", ""), ("Suan Geltholt", "image", "Suan.jpg", ""),
        ("Film", "cast member", "A", ""), ("Film", "cast member", "B", "")])
    for pair in ("0809", "0910"):
        _probes(probes / pair / "probes", "new", [("Cien Bordling", "spouse", "Meel", "")])
        _probes(probes / pair / "probes", "updated", [
            ("Trurmouth", "head of government", "Groris Funley", "Wiro Derncroft | Old Mayor"),
            ("Dravminster", "population", "24042", ""), ("X", "population", "1", "1")])
    out = tmp_path / "qa"
    assert evolvingqa_cli.main(["evolvingqa", "generate", "--data", str(tmp_path / "none"),
                                "--probes", str(probes), "--out", str(out),
                                "--finetune-fraction", "0.5"]) == 0
    unchanged = _rows(out / "unchanged_train.csv")[1:] + _rows(out / "unchanged_eval.csv")[1:]
    # Feltstad's population changed in 0910; the film's two cast members make an ambiguous
    # question; "image" has no written question and gets one derived from its label.
    assert sorted(unchanged) == [["What is the capital of Varnholt?", "Trurhollow"],
                                 ["What is the image of Suan Geltholt?", "Suan.jpg"]]
    assert _rows(out / "new_0910.csv") == [["question", "answer"],
                                           ["Who is the spouse of Cien Bordling?", "Meel"]]
    assert _rows(out / "edited_0809.csv") == [
        ["question", "answer1", "answer2"],
        ["Who is the head of government of Trurmouth?", "Wiro Derncroft", "Groris Funley"]]
    summary = json.loads((out / "generate.json").read_text())
    assert summary["skipped"] == {"no_previous_object": 2, "same_answer": 2}
    assert summary["templates"] == {"derived": 1, "written": 7}
    assert summary["sources_checked"] is False
    printed = capsys.readouterr().out
    assert "offline generator" in printed
    assert (f"sources not checked: {tmp_path / 'none'} has no EvolvingQA build, so New and "
            "Edited questions are kept whatever their subject's article") in printed


def _extraction(build: Path, pair: str, new: list[str], edited: list[str]) -> None:
    """A build's extraction folder for ``pair`` whose New articles and Edited pairs have these
    titles (the fields the source check reads, plus ids)."""
    folder = build / pair / "evolvingqa"
    folder.mkdir(parents=True)
    for name, titles in (("new.jsonl", new), ("edited.jsonl", edited)):
        (folder / name).write_text("".join(
            json.dumps({"id": f"{i}:0", "title": t}) + "\n" for i, t in enumerate(titles)))
    (folder / "stats.json").write_text("{}")


def test_offline_questions_come_from_their_sets_articles(tmp_path, capsys):
    """With a build, a New question needs its subject among the pair's New articles and an
    Edited one among its Edited pairs (titles compared as MediaWiki stores them); the others
    have no passage to answer them and are dropped, one line per set saying how many."""
    probes, build = tmp_path / "probes", tmp_path / "build"
    for pair in ("0809", "0910"):
        _probes(probes / pair / "probes", "unchanged", [("Varnholt", "capital", "Trurhollow", "")])
    _probes(probes / "0809" / "probes", "new", [
        ("Cien Bordling", "spouse", "Meel", ""), ("Groris Funley", "spouse", "Ada", ""),
        ("cien_Bordling", "occupation", "poet", "")])
    _probes(probes / "0809" / "probes", "updated", [
        ("Trurmouth", "head of government", "Groris Funley", "Wiro Derncroft"),
        ("Dravminster", "population", "24042", "23865"),
        ("Trurmouth", "population", "900", "")])
    _probes(probes / "0910" / "probes", "new", [("Zuel Drosley", "spouse", "Meel", "")])
    _probes(probes / "0910" / "probes", "updated", [
        ("Dravminster", "population", "24100", "24042")])
    _extraction(build, "0809", new=["Cien Bordling"], edited=["Trurmouth"])
    _extraction(build, "0910", new=["Zuel Drosley"], edited=[])
    out = tmp_path / "qa"
    assert evolvingqa_cli.main(["evolvingqa", "generate", "--data", str(build), "--probes",
                                str(probes), "--out", str(out)]) == 0
    assert _rows(out / "new_0809.csv")[1:] == [
        ["Who is the spouse of Cien Bordling?", "Meel"],
        ["What is the occupation of cien_Bordling?", "poet"]]
    assert _rows(out / "edited_0809.csv")[1:] == [
        ["Who is the head of government of Trurmouth?", "Wiro Derncroft", "Groris Funley"]]
    assert _rows(out / "new_0910.csv")[1:] == [["Who is the spouse of Zuel Drosley?", "Meel"]]
    assert _rows(out / "edited_0910.csv") == [["question", "answer1", "answer2"]]
    summary = json.loads((out / "generate.json").read_text())
    assert {name: counts.get("no_source_article") for name, counts in summary["sets"].items()} == {
        "unchanged": None, "new_0809": 1, "new_0910": 0, "edited_0809": 1, "edited_0910": 1}
    # Trurmouth's population has no previous value: counted once, after the source check.
    assert summary["skipped"] == {"no_previous_object": 1}
    assert summary["sources_checked"] is True and summary["build"] == str(build)
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if "dropped" in line] == [
        "new_0809: 1 questions dropped: their subject is not one of 0809's New articles, so no "
        "passage answers them",
        "edited_0809: 1 questions dropped: their subject is not one of 0809's Edited pairs, so "
        "no passage answers them",
        "edited_0910: 1 questions dropped: their subject is not one of 0910's Edited pairs, so "
        "no passage answers them"]

    # A build stopped before an extraction folder's stats.json: its lists are cut, refused.
    (build / "0910" / "evolvingqa" / "stats.json").unlink()
    assert evolvingqa_cli.main(["evolvingqa", "generate", "--data", str(build), "--probes",
                                str(probes), "--out", str(out)]) == 2
    assert "0910/evolvingqa: has no stats.json" in capsys.readouterr().err


def test_offline_generation_names_a_bad_probe_file(tmp_path, capsys):
    folder = tmp_path / "0809" / "probes"
    folder.mkdir(parents=True)
    (folder / "unchanged.csv").write_text("subject,relation,object\nA,capital\n")
    (folder / "stats.json").write_text("{}")
    code = evolvingqa_cli.main(["evolvingqa", "generate", "--data", str(tmp_path)])
    assert code == 2
    assert "unchanged.csv, line 2: 2 fields, header has 3" in capsys.readouterr().err
