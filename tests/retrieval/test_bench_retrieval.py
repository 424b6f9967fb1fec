"""tools/bench_retrieval.py runs end to end on a tiny synthetic corpus and on a build folder."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def _bench() -> ModuleType:
    key = "tools_bench_retrieval"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, TOOLS / "bench_retrieval.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def test_synthetic_questions_reuse_their_passages_words():
    bench = _bench()
    passages = bench.synthetic_passages(50, 30, seed=3)
    assert len(passages) == 50 and all(len(p.text.split()) == 30 for p in passages)
    assert passages == bench.synthetic_passages(50, 30, seed=3)  # seeded: the same corpus
    questions, sources = bench.synthetic_questions(passages, 20, seed=3)
    for question, source in zip(questions, sources, strict=True):
        content = [w for w in question.rstrip("?").split() if w not in bench.STOP]
        assert content and set(content) <= set(passages[source].text.split())


def test_bm25_bench_prints_its_record(capsys, tmp_path):
    bench = _bench()
    record_file = tmp_path / "bench.jsonl"
    assert bench.main(["--passages", "300", "--words", "40", "--questions", "50", "--k", "5",
                       "--repeats", "2", "--jsonl", str(record_file)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    record = json.loads(lines[-1])
    assert json.loads(record_file.read_text()) == record
    assert record["retriever"] == "bm25" and record["passages"] == 300
    assert record["questions"] == 50 and record["k"] == 5
    # measured: their type and sign (build_s is rounded to the millisecond: 0.0 on a fast build)
    assert isinstance(record["build_s"], float) and record["build_s"] >= 0
    assert isinstance(record["questions_per_second"], float) and record["questions_per_second"] > 0
    assert record["index_bytes"] > 0 and record["passage_hit@5"] >= 0.9
    assert "questions/s" in lines[0]


def test_bench_on_a_build_folder(data, capsys):
    bench = _bench()
    assert bench.main(["--data", str(data), "--month", "0809", "--questions", "10",
                       "--repeats", "1"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["passages"] == 4 and record["source"] == f"{data} 0809"
    assert record["passage_hit@20"] == 1.0


def test_dpr_bench_with_random_encoders(capsys):
    """No encoder folders to download: random weights of DPR's shapes, BERT's vocabulary size."""
    bench = _bench()
    vocabulary = bench._wordpiece_vocabulary(0)
    assert len(vocabulary) == 30_522 and vocabulary[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                           "[MASK]"]
    assert bench.main(["--retriever", "dpr", "--random-encoders", "tiny", "--passages", "40",
                       "--words", "20", "--questions", "8", "--k", "3", "--repeats", "1",
                       "--batch-size", "16"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["retriever"] == "dpr" and record["passages"] == 40
    assert record["settings"]["dtype"] == "float32" and record["device"].startswith("1 x ")
    assert record["questions_per_second"] > 0
