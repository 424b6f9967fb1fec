"""Retrieval speed: index build time and questions per second, for BM25 (and DPR where present).

    python tools/bench_retrieval.py --passages 200000 --questions 2000
    python tools/bench_retrieval.py --data eqa/ --month 0809          # a real build folder
    python tools/bench_retrieval.py --retriever dpr --question-encoder Q/ --ctx-encoder C/
    python tools/bench_retrieval.py --retriever dpr --random-encoders base --dtype bfloat16 \
        --batch-size 512 --passages 100000                            # a GPU, no download

EvolvingQA's Unchanged set alone is drawn from 200K articles (paper, Section 2.2), so a month's
snapshot is a few hundred thousand passages. Without ``--data`` the corpus is synthetic:
``--passages`` passages of ``--words`` words drawn from a Zipf distribution (exponent 1.1) over
a vocabulary of made-up words, each with a title; every question takes six distinct words of one
passage (and a few stopwords around them), as EvolvingQA's questions reuse their passage's words,
so ``passage_hit@k`` (the source passage among the top k) says the search is doing its job. With
``--data DATA --month MMMM`` the corpus is that month's snapshot
(:func:`tw_jax.retrieval.index.read_passages`) and the questions are synthetic as above.

Timed: ``build`` (tokenising and indexing, in memory), ``save`` into a temporary folder and
``load`` back, and ``search`` of every question at depth ``--k`` (best of ``--repeats``). One
JSON object on the last line of output.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

SYLLABLES = ["ka", "lo", "mi", "ter", "vos", "an", "drel", "fin", "gu", "hal", "ish", "jor",
             "kel", "mun", "nor", "ost", "pra", "quel", "ris", "sun", "tav", "ul", "ven", "wik"]
STOP = ["what", "is", "the", "of", "which", "did", "in", "a", "who", "to"]


def _vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words.add("".join(SYLLABLES[int(i)] for i in rng.integers(0, len(SYLLABLES), n)))
    return sorted(words)


def synthetic_passages(count: int, words: int, seed: int) -> list[Any]:
    """``count`` passages of ``words`` Zipf-distributed made-up words (see the docstring)."""
    from tw_jax.retrieval.base import Passage

    rng = np.random.default_rng(seed)
    vocab = np.array(_vocabulary(50_000, rng))
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    drawn = rng.choice(len(vocab), size=(count, words), p=weights / weights.sum())
    titles = rng.choice(len(vocab), size=(count, 2))
    return [Passage(f"p{i}", " ".join(vocab[titles[i]]).title(), " ".join(vocab[drawn[i]]))
            for i in range(count)]


def synthetic_questions(passages: list[Any], count: int, seed: int) -> tuple[list[str], list[int]]:
    """(questions, the position of each one's source passage)."""
    rng = np.random.default_rng(seed + 1)
    sources = rng.integers(0, len(passages), count)
    questions = []
    for source in sources:
        words = sorted(set(passages[int(source)].text.split()))
        picked = [words[int(i)] for i in rng.choice(len(words), min(6, len(words)), replace=False)]
        stops = [STOP[int(i)] for i in rng.integers(0, len(STOP), 3)]
        questions.append(" ".join([stops[0], stops[1], *picked[:3], stops[2], *picked[3:]]) + "?")
    return questions, [int(s) for s in sources]


def _bert_base() -> Any:
    from tw_jax.retrieval.bert import BertConfig

    return BertConfig(dropout_rate=0.0, attention_dropout=0.0)  # BERT-base, as DPR's encoders


def _bert_tiny() -> Any:
    from tw_jax.retrieval.bert import BertConfig

    return BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, dropout_rate=0.0, attention_dropout=0.0)


# Random weights of DPR's shapes: the speed of real encoders, with no download.
RANDOM_ENCODERS = {"base": _bert_base, "tiny": _bert_tiny}


def _wordpiece_vocabulary(seed: int) -> list[str]:
    """BERT's 30,522 entries: the special tokens, then the synthetic corpus's words (so texts
    tokenise to whole words, about as many tokens as English words give)."""
    rng = np.random.default_rng(seed)  # the same draw as synthetic_passages' vocabulary
    words = _vocabulary(50_000, rng)[: 30_522 - 5]
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]


def _retriever(args: argparse.Namespace) -> Any:
    from tw_jax.retrieval import retriever_class

    cls = retriever_class(args.retriever)
    if args.retriever == "dpr":
        settings = {"dtype": args.dtype, "batch_size": args.batch_size}
        if args.random_encoders:
            return cls.random(args.seed, RANDOM_ENCODERS[args.random_encoders](),
                              _wordpiece_vocabulary(args.seed), **settings)
        if not (args.question_encoder and args.ctx_encoder):
            raise SystemExit("bench_retrieval: --retriever dpr needs --question-encoder and "
                             "--ctx-encoder (Hugging Face DPR folders), or --random-encoders")
        return cls(question_encoder=args.question_encoder, ctx_encoder=args.ctx_encoder,
                   **settings)
    if args.retriever == "bm25":
        return cls(k1=args.k1, b=args.b)
    return cls()


def _device() -> str:
    import jax

    devices = jax.devices()
    return f"{len(devices)} x {devices[0].device_kind}"


def _folder_bytes(folder: str) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.data:
        from tw_jax.retrieval.index import passage_files, read_passages

        passages = read_passages(passage_files(args.data, args.month))
        source = f"{args.data} {args.month}"
    else:
        passages = synthetic_passages(args.passages, args.words, args.seed)
        source = "synthetic"
    questions, truth = synthetic_questions(passages, args.questions, args.seed)
    retriever = _retriever(args)

    start = time.perf_counter()
    retriever.build(passages)
    build_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="bench_retrieval_") as folder:
        start = time.perf_counter()
        retriever.save(folder)
        save_s = time.perf_counter() - start
        index_bytes = _folder_bytes(folder)
        start = time.perf_counter()
        loaded = type(retriever).load(folder)
        load_s = time.perf_counter() - start
    times, hits = [], []
    for _ in range(max(1, args.repeats)):
        start = time.perf_counter()
        hits = loaded.search(questions, args.k)
        times.append(time.perf_counter() - start)
    search_s = min(times)
    ranks = [next((r for r, (p, _) in enumerate(found) if p == t), None)
             for found, t in zip(hits, truth, strict=True)]
    return {
        "retriever": retriever.name, "settings": retriever.settings(), "source": source,
        "passages": len(passages), "words_per_passage": args.words if not args.data else None,
        "questions": len(questions), "k": args.k,
        "build_s": round(build_s, 3), "passages_per_second_build": round(len(passages) / build_s),
        "save_s": round(save_s, 3), "load_s": round(load_s, 3), "index_bytes": index_bytes,
        "search_s": round(search_s, 4), "search_cold_s": round(times[0], 4),
        "questions_per_second": round(len(questions) / search_s, 1),
        "passage_hit@1": sum(r == 0 for r in ranks) / len(ranks),
        f"passage_hit@{args.k}": sum(r is not None for r in ranks) / len(ranks),
        "device": _device() if args.retriever == "dpr" else "cpu",
        "cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--retriever", default="bm25", help="bm25 (default) or dpr")
    parser.add_argument("--passages", type=int, default=200_000, help="synthetic passages")
    parser.add_argument("--words", type=int, default=100, help="words per synthetic passage")
    parser.add_argument("--questions", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="searches timed; best is kept")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=None, help="a tw-jax evolvingqa build folder")
    parser.add_argument("--month", default=None, metavar="MMMM", help="with --data")
    parser.add_argument("--k1", type=float, default=1.5, help="bm25: k1")
    parser.add_argument("--b", type=float, default=0.75, help="bm25: b")
    parser.add_argument("--question-encoder", default=None, help="dpr: question encoder folder")
    parser.add_argument("--ctx-encoder", default=None, help="dpr: context encoder folder")
    parser.add_argument("--random-encoders", choices=sorted(RANDOM_ENCODERS), default=None,
                        help="dpr: random encoders of BERT-base (or tiny) shapes, for speed")
    parser.add_argument("--dtype", default="float32", help="dpr: compute dtype (bfloat16 on "
                        "accelerators)")
    parser.add_argument("--batch-size", type=int, default=64, help="dpr: texts per encoder step")
    parser.add_argument("--jsonl", default=None, help="also append the record to this file")
    args = parser.parse_args(argv)
    if args.data and not args.month:
        parser.error("--data needs --month MMMM")
    if min(args.passages, args.words, args.questions, args.k) < 1:
        parser.error("--passages, --words, --questions and --k must be positive")
    record = run(args)
    print(f"{record['retriever']}: {record['passages']} passages indexed in "
          f"{record['build_s']} s ({record['passages_per_second_build']} passages/s); "
          f"{record['questions']} questions in {record['search_s']} s "
          f"({record['questions_per_second']} questions/s) at k={args.k}")
    line = json.dumps(record)
    if args.jsonl:
        with open(args.jsonl, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
