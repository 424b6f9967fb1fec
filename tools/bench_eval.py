"""Evaluation throughput: probes scored per second and decoded per second, for a month of probes.

    python tools/bench_eval.py --model gpt2_large --method diff --probes 13000 --batch 256

A TemporalWiki month has about 13,000 probes (UNCHANGED + UPDATED + NEW). This builds
``--probes`` synthetic rows in the TWiki-Probes CSV format (``subject,relation,object,
previous_object,text,cloze``; written as a CSV and read back with the tasks' own reader), a
vocabulary (``--vocab`` a local tokenizer folder / SentencePiece model, else a tiny one trained on
the rows themselves, nothing downloaded), and a model from the same gin files as
``bench_train.py`` (random weights: the figures are about speed), then times

- scoring: per-instance perplexities of all rows, the model's ``probe_example`` of each scored by
  ``model.score`` (``--variant``, ``text`` by default: GPT-2 scores the whole probe, T5 the
  object given ``subject relation <extra_id_0>``), as ``tw-jax lifelong`` scores a month;
- decoding: :func:`tw_jax.evaluate.qa.decode_answers` of every row's ``probe_prompt``, greedy,
  ``--max-new-tokens`` (random weights rarely emit EOS, so every batch decodes all of them: the
  worst case).

Each is run ``--repeats`` times: the first includes jit compilation (``*_cold_s``), the best of
the others is the steady figure (``*_s``, and the per-second rates). ``month_score_s`` is the
steady time scaled to 13,000 probes. One JSON line at the end.
"""

from __future__ import annotations

import argparse
import csv
import io
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common  # noqa: E402
from bench_common import BenchError  # noqa: E402

MONTH_PROBES = 13_000
FIRST = ["Anna", "Boris", "Carla", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas",
         "Kira", "Luca", "Mona", "Nils", "Olga", "Pavel", "Rosa", "Stefan", "Tara", "Viktor"]
LAST = ["Albers", "Brandt", "Costa", "Dalton", "Eriksen", "Fischer", "Garcia", "Horvat", "Ivanova",
        "Jensen", "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Quinn", "Rossi",
        "Silva", "Tanaka", "Ueda", "Varga", "Weber", "Yilmaz", "Zhang"]
PLACES = ["Trurmouth", "Dravminster", "Graltport", "Helsby", "Ostrava", "Valmora", "Kessington",
          "Port Adler", "Lindau", "Marrowgate", "Sel Harbor", "Brightwater"]
CLUBS = ["Real Graltport", "FC Dravminster", "Trurmouth United", "Helsby Rovers",
         "Valmora Athletic", "Kessington City"]
RELATIONS: list[tuple[str, str]] = [
    ("member of sports team", "club"), ("head coach", "person"), ("chief executive officer", "person"),
    ("head of government", "person"), ("place of birth", "place"), ("residence", "place"),
    ("population", "number"), ("country of citizenship", "place"), ("employer", "club"),
    ("educated at", "place"), ("spouse", "person"), ("owned by", "person"),
    ("headquarters location", "place"), ("date of birth", "date"), ("award received", "award"),
    ("position held", "office"), ("capital", "place"), ("director", "person"),
]
AWARDS = ["Golden Boot", "Ballon d'Or", "Order of Merit", "Nobel Prize in Physics", "Pulitzer Prize"]
OFFICES = ["Mayor of Trurmouth", "Minister of Finance", "President of Valmora", "Senator"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
PROBE_HEADER = ("subject", "relation", "object", "previous_object", "text", "cloze")


def _value(rng: random.Random, kind: str) -> str:
    if kind == "person":
        return f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    if kind == "place":
        return rng.choice(PLACES)
    if kind == "club":
        return rng.choice(CLUBS)
    if kind == "number":
        return str(rng.randint(1_000, 9_000_000))
    if kind == "date":
        return f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.randint(1950, 2005)}"
    if kind == "award":
        return rng.choice(AWARDS)
    return rng.choice(OFFICES)


def synthetic_probe_csv(count: int, seed: int = 0) -> str:
    """``count`` probe rows as a TWiki-Probes CSV (a third UPDATED-like, with a previous object)."""
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(PROBE_HEADER)
    for _ in range(count):
        subject = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if rng.random() < 0.3:
            subject = rng.choice(PLACES + CLUBS)
        relation, kind = rng.choice(RELATIONS)
        obj = _value(rng, kind)
        previous = _value(rng, kind) if rng.random() < 0.33 else ""
        text = f"{subject} {relation} {obj}"
        cloze = f"The {relation} of {subject} is {obj}."
        writer.writerow((subject, relation, obj, previous, text, cloze))
    return out.getvalue()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench_common.add_run_arguments(parser, shapes=False)
    parser.add_argument("--probes", type=int, default=MONTH_PROBES, help="probe rows to score")
    parser.add_argument("--decode-probes", type=int, default=None,
                        help="rows to decode (default: all --probes; 0 skips decoding)")
    parser.add_argument("--batch", type=int, default=32,
                        help="scoring and decoding batch (tw-jax lifelong's default is 32)")
    parser.add_argument("--variant", choices=("text", "object", "cloze"), default="text")
    parser.add_argument("--max-new-tokens", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2,
                        help="passes over the probes; the first compiles")
    parser.add_argument("--vocab", default=None,
                        help="local vocabulary: GPT-2 tokenizer folder or T5 spiece.model")
    args = parser.parse_args(argv)
    if args.probes < 1 or args.batch < 1 or args.repeats < 1:
        parser.error("--probes, --batch and --repeats must be >= 1")
    return args


def _vocabulary(args: argparse.Namespace, model: Any, texts: list[str], work: Path) -> Any:
    """The model's vocabulary (its ``load_vocabulary``): --vocab, or one of its kind trained on
    the probe texts."""
    if args.vocab:
        return model.load_vocabulary(args.vocab)
    from tw_jax.data.vocab_training import write_demo_vocabularies

    return model.load_vocabulary(
        write_demo_vocabularies(texts, work / "vocab")[model.vocabulary_kind])


def _probe_perplexities(model: Any, params: Any, vocabulary: Any, rows: list[dict[str, str]],
                        variant: str, batch_size: int) -> Any:
    """Per-instance perplexities of probe rows: the model's examples, scored."""
    from tw_jax.tasks.metrics import instance_perplexities

    examples = [model.probe_example(vocabulary, row, variant) for row in rows]
    scores = model.score(params, examples, batch_size=batch_size)
    return instance_perplexities(scores.log_likelihood, scores.num_tokens)


def _timed(repeats: int, run: Any) -> tuple[float, float | None, Any]:
    """``(cold seconds, best warm seconds or None, last result)`` of ``repeats`` calls."""
    times = []
    result = None
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return times[0], (min(times[1:]) if len(times) > 1 else None), result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; prints and returns the JSON record."""
    args = parse_args(argv)
    cpus = bench_common.limit_threads(args.threads, jax_flags=True)
    import datetime

    import jax
    import numpy as np

    from tw_jax.evaluate.qa import decode_answers
    from tw_jax.models import model_for
    from tw_jax.models.sharding import activate
    from tw_jax.preprocess.probes.probe_csv import read_probe_rows
    from tw_jax.runtime.run_model import build_run_model

    setup = bench_common.load_setup(args, jax.default_backend())
    config = setup.config
    text = synthetic_probe_csv(args.probes, setup.seed)
    rows = read_probe_rows(io.StringIO(text, newline=""), "synthetic_probes.csv")
    decode_rows = rows[: args.probes if args.decode_probes is None else args.decode_probes]
    with tempfile.TemporaryDirectory(prefix="bench_eval_") as work:
        vocabulary = _vocabulary(args, model_for(config), [r["text"] for r in rows], Path(work))
    if vocabulary.vocab_size > config.vocab_size:
        raise BenchError(f"the vocabulary has {vocabulary.vocab_size} ids, the model "
                         f"{config.vocab_size}")
    examples = [model_for(config).probe_example(vocabulary, row, args.variant) for row in rows]
    lengths = [len(e.tokens) if hasattr(e, "tokens") else len(e.inputs) + len(e.targets)
               for e in examples]

    run = build_run_model(config, setup.mesh_shape)
    with activate(run.mesh):
        params = run.init_params(setup.seed)
        score_cold, score_warm, perplexities = _timed(args.repeats, lambda: _probe_perplexities(
            run.model, params, vocabulary, rows, args.variant, args.batch))
        prompts = [run.model.probe_prompt(r) for r in decode_rows]
        decode_cold = decode_warm = None
        if prompts:
            decode_cold, decode_warm, _ = _timed(args.repeats, lambda: decode_answers(
                run.module, params, vocabulary, prompts, max_new_tokens=args.max_new_tokens,
                batch_size=args.batch))

    score_s = score_warm if score_warm is not None else score_cold
    decode_s = decode_warm if decode_warm is not None else decode_cold
    device = jax.devices()[0]
    record = {
        "stack": "jax",
        "benchmark": "eval",
        "model": setup.model_name,
        "method": setup.method,
        "device": jax.default_backend(),
        "device_kind": getattr(device, "device_kind", "unknown"),
        "date": datetime.date.today().isoformat(),
        "dtype": config.dtype,
        "variant": args.variant,
        "batch": args.batch,
        "probes": len(rows),
        "decode_probes": len(prompts),
        "max_new_tokens": args.max_new_tokens,
        "vocab": args.vocab or "tiny, trained on the probes",
        "vocab_size": vocabulary.vocab_size,
        "tokens_per_probe_mean": float(np.mean(lengths)),
        "repeats": args.repeats,
        "threads": args.threads,
        "cpu_affinity": cpus,
        "score_cold_s": score_cold,
        "score_s": score_s,
        "probes_scored_per_second": len(rows) / score_s,
        "month_score_s": MONTH_PROBES * score_s / len(rows),
        "decode_cold_s": decode_cold,
        "decode_s": decode_s,
        "probes_decoded_per_second": len(prompts) / decode_s if decode_s else None,
        "month_decode_s": MONTH_PROBES * decode_s / len(prompts) if decode_s else None,
        "finite_perplexities": int(np.isfinite(np.asarray(perplexities)).sum()),
        "load_average_1m": bench_common.load_average(),
        "gin_files": setup.gin_files,
        "gin_bindings": setup.gin_bindings,
        "jax": jax.__version__,
    }
    bench_common.emit(record, args.jsonl)
    return record


if __name__ == "__main__":
    sys.exit(bench_common.run_main(main))
