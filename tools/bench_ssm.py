"""SSM throughput: spaCy tokens per second per core, the stage's path against a plain loop.

On the same texts (the sample world's full snapshot, repeated to ``--tokens`` spaCy tokens), in
one run, measures

* ``plain_loop``: ``for t in texts: nlp(t)`` with the whole English pipeline (tok2vec, tagger,
  parser, attribute_ruler, lemmatizer, ner), as a plain script would run it;
* ``stage_1_process``: the stage's own path in this process: chunking, the pruned pipeline (ner
  only) over ``nlp.pipe`` batches (:func:`~tw_jax.text.spacy_pipeline.pipe_docs`, which
  decodes the NER with the GIL held), span selection and example encoding
  (:func:`~tw_jax.preprocess.ssm.examples.process_job` over the stage's jobs);
* ``stage_N_workers`` (``--workers``): the whole local stage (``build_ssm``: reading, forked
  workers, writing), wall clock divided by the worker count.

One-process figures use the process's CPU time (what a core gives, whatever else the machine
runs); each is the best of ``--repeat`` interleaved runs. Prints one JSON line per measure and a
summary with the ratio; the issue's target is at least 3x per core.

    python tools/bench_ssm.py [--tokens 300000] [--repeat 2] [--workers 2] [--texts FULL.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import orjson

from tw_jax.preprocess.ssm.examples import SsmOptions, process_job
from tw_jax.preprocess.ssm.local import build_ssm
from tw_jax.preprocess.ssm.reader import iter_jobs
from tw_jax.text.spacy_pipeline import DEFAULT_MODEL, load_ner_pipeline


def sample_texts(work: Path) -> Path:
    """The sample world's full snapshot of 2021-09 (``full.jsonl`` of the 0809 DiffSet)."""
    from tw_jax.preprocess.diffset.local import build_diffset
    from tw_jax.sample_world.build import build_sample_world, wikipedia_dump

    build_sample_world(work / "world")
    out = work / "diffset"
    build_diffset(
        wikipedia_dump(work / "world", "2021-08"),
        wikipedia_dump(work / "world", "2021-09"),
        out,
        progress=False,
    )
    return out / "full.jsonl"


def repeated(source: Path, tokenizer, tokens: int, target: Path) -> tuple[list[str], int]:  # noqa: ANN001
    """The texts of ``source`` repeated until they hold ``tokens`` spaCy tokens, also written
    to ``target`` as a DiffSet folder's ``full.jsonl`` (fresh ids, so every copy is an article)."""
    base = [orjson.loads(line)["text"] for line in source.read_bytes().splitlines() if line]
    counts = [len(doc) for doc in tokenizer.pipe(base)]
    texts: list[str] = []
    total = 0
    while total < tokens:
        for text, count in zip(base, counts, strict=True):
            texts.append(text)
            total += count
            if total >= tokens:
                break
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as handle:
        for i, text in enumerate(texts):
            record = {"id": i + 1, "title": f"Copy {i + 1}", "text": text}
            handle.write(orjson.dumps(record) + b"\n")
    return texts, total


def cpu_seconds(function) -> tuple[float, float]:  # noqa: ANN001
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workers", default="2", help="comma-separated worker counts (or '')")
    parser.add_argument("--texts", default=None, help="a full.jsonl to use instead")
    parser.add_argument("--spacy-model", default=DEFAULT_MODEL)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tw_jax_bench_ssm_") as scratch:
        work = Path(scratch)
        source = Path(args.texts) if args.texts else sample_texts(work)
        full_nlp, _ = load_ner_pipeline(args.spacy_model, prune=False)
        nlp, info = load_ner_pipeline(args.spacy_model)
        folder = work / "in"
        texts, tokens = repeated(source, nlp.tokenizer, args.tokens, folder / "full.jsonl")
        options = SsmOptions()
        labels = frozenset(options.resolve_labels(info.ner_labels))
        jobs = list(iter_jobs("full", str(folder / "full.jsonl")))
        for text in texts[:20]:  # warm both pipelines up
            full_nlp(text)
        process_job(nlp, labels, jobs[0]._replace(articles=jobs[0].articles[:20]), options)

        def plain_loop() -> None:
            for text in texts:
                full_nlp(text)

        def stage() -> None:
            for job in jobs:
                process_job(nlp, labels, job, options)

        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeat):
            for name, function in (("plain_loop", plain_loop), ("stage_1_process", stage)):
                cpu, wall = cpu_seconds(function)
                if name not in best or cpu < best[name][0]:
                    best[name] = (cpu, wall)
        rows = []
        for name, (cpu, wall) in best.items():
            rows.append(
                {
                    "measure": name,
                    "tokens": tokens,
                    "cpu_seconds": round(cpu, 2),
                    "wall_seconds": round(wall, 2),
                    "tokens_per_s_per_core": round(tokens / cpu),
                }
            )
            print(json.dumps(rows[-1]))
        for workers in [int(w) for w in args.workers.split(",") if w.strip()]:
            started = time.perf_counter()
            build_ssm(
                folder, work / f"out{workers}", inputs=["full"], workers=workers, progress=False
            )
            wall = time.perf_counter() - started
            rows.append(
                {
                    "measure": f"stage_{workers}_workers",
                    "tokens": tokens,
                    "wall_seconds": round(wall, 2),
                    "tokens_per_s_per_core": round(tokens / wall / workers),
                    "note": "whole stage incl. spaCy load, reading, writing; wall / workers",
                }
            )
            print(json.dumps(rows[-1]))

    per_core = {row["measure"]: row["tokens_per_s_per_core"] for row in rows}
    print(
        json.dumps(
            {
                "bench": "ssm",
                "cpu": platform.processor() or platform.machine(),
                "cores": os.cpu_count(),
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "spacy_model": f"{info.model} {info.version} (spaCy {info.spacy_version})",
                "texts": len(texts),
                "tokens": tokens,
                "tokens_per_s_per_core": per_core,
                "ratio_per_core": round(per_core["stage_1_process"] / per_core["plain_loop"], 2),
                "ratio_per_core_wall": round(best["plain_loop"][1] / best["stage_1_process"][1], 2),
                "target_ratio": 3.0,
            }
        )
    )


if __name__ == "__main__":
    main()
