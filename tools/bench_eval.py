"""Evaluation throughput: probes scored per second and decoded per second, for a month of probes.

    python tools/bench_eval.py --model gpt2_large --method diff --probes 13000 --batch 256

A TemporalWiki month has about 13,000 probes (UNCHANGED + UPDATED + NEW). This builds
``--probes`` synthetic rows in the TWiki-Probes CSV format (``subject,relation,object,
previous_object,text,cloze``; written as a CSV and read back with the tasks' own reader), a
vocabulary (``--vocab`` a local tokenizer folder / SentencePiece model, else a tiny one trained on
the rows themselves, nothing downloaded), and a model from the same gin files as
``bench_train.py`` (random weights: the figures are about speed), then times two paths.

The production path (the main figures): what ``tw-jax lifelong`` (and its ``--eval-matrix``)
and ``tw-jax eval`` run. The rows are a month's data folder (``DATA/0809/probes/<category>.csv``:
rows with a previous object are UPDATED, every fifth other row NEW, the rest UNCHANGED; CHANGED
is UPDATED then NEW, its own task, as in production), its probe tasks are registered, and
:func:`tw_jax.evaluate.month_eval.evaluate_month` measures each checkpoint through the probe
mixtures, ``seqio.Evaluator`` and tw_jax's ``score_fn``/``predict_fn``, the tasks' metric
functions included. One :class:`~tw_jax.evaluate.mixture_eval.MixtureEvaluators` serves every
checkpoint, as the runner's does. Each of ``--repeats`` passes is a *new checkpoint* (other
random weights):

- scoring: the ``--variant``'s perplexity group (``text``: ``ppl``, GPT-2 the whole probe, T5
  the object given ``subject relation <extra_id_0>``);
- decoding: the ``qa`` group under the model's QA protocol (GPT-2 teacher-forced, T5 greedy
  decoding of ``--max-new-tokens``), every probe (``--decode-probes 0`` skips it).

The first checkpoint (``score_cold_s``, ``decode_cold_s``) includes tokenising the month's
probes and jit compilation; the best of the later ones is the steady figure (``score_s``,
``decode_s`` and the per-second rates), what every further checkpoint of a lifelong run costs.

The row-by-row path (the baseline, ``rows_*``): per-instance perplexities of the model's
``probe_example`` of each row scored by ``model.score``, and
:func:`tw_jax.evaluate.qa.decode_answers` of the first ``--decode-probes`` rows'
``probe_prompt`` (greedy, ``--max-new-tokens``; random weights rarely emit EOS, so every batch
decodes all of them: the worst case), no metric. Within each pass the two paths take turns on
that pass's checkpoint, so a shared machine's load, and how early random weights emit EOS, fall
on both alike; the baseline's first pass compiles too.

``month_*_s`` scale a steady time to 13,000 probes. One JSON line at the end.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
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

from tw_jax.time import Period  # noqa: E402

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


MONTH = Period.parse("0809")  # the folder the benchmark writes its probes into
CATEGORY_FILES = ("unchanged", "updated", "new", "deleted")
# --variant -> the perplexity group of the probe mixtures that scores it
VARIANT_GROUPS = {"text": "ppl", "object": "ppl_object", "cloze": "ppl_cloze"}


def _vocabulary_files(args: argparse.Namespace, kind: str, texts: list[str], work: Path
                      ) -> dict[str, str]:
    """``{"gpt2": ..., "t5": ...}``, the vocabularies the probe tasks are registered with:
    tiny ones trained on the probe texts, the model's ``kind`` replaced by --vocab when given."""
    from tw_jax.data.vocab_training import write_demo_vocabularies

    files = {k: str(v) for k, v in write_demo_vocabularies(texts, work / "vocab").items()}
    if args.vocab:
        files[kind] = args.vocab
    return files


def month_folder(rows: list[dict[str, str]], data_dir: Path, month: Period = MONTH
                 ) -> dict[str, int]:
    """Writes ``rows`` as ``data_dir/<month>/probes/<category>.csv`` (with a previous object:
    UPDATED; every fifth other row NEW; the rest UNCHANGED; DELETED empty); returns the counts."""
    split: dict[str, list[dict[str, str]]] = {c: [] for c in CATEGORY_FILES}
    others = 0
    for row in rows:
        if row["previous_object"]:
            split["updated"].append(row)
            continue
        split["new" if others % 5 == 4 else "unchanged"].append(row)
        others += 1
    folder = data_dir / month.name / "probes"
    folder.mkdir(parents=True, exist_ok=True)
    for category, chosen in split.items():
        with open(folder / f"{category}.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(PROBE_HEADER)
            writer.writerows([r[k] for k in PROBE_HEADER] for r in chosen)
    counts = {c: len(r) for c, r in split.items()}
    # what tw-jax probes writes last: the readers check a probes folder's rows against it
    (folder / "stats.json").write_text(json.dumps(
        {"categories": {c: {"final": n} for c, n in counts.items()}, "lighttuning": {}}),
        encoding="utf-8")
    return counts


def _probe_perplexities(model: Any, params: Any, vocabulary: Any, rows: list[dict[str, str]],
                        variant: str, batch_size: int) -> Any:
    """Per-instance perplexities of probe rows: the model's examples, scored."""
    from tw_jax.tasks.metrics import instance_perplexities

    examples = [model.probe_example(vocabulary, row, variant) for row in rows]
    scores = model.score(params, examples, batch_size=batch_size)
    return instance_perplexities(scores.log_likelihood, scores.num_tokens)


def _cold_steady(times: Sequence[float]) -> tuple[float | None, float | None]:
    """``(first pass, best of the later ones)``; the steady figure is the first pass when there
    is no other."""
    if not times:
        return None, None
    return times[0], (min(times[1:]) if len(times) > 1 else times[0])


def _timed(times: list[float], run: Any) -> Any:
    started = time.perf_counter()
    result = run()
    times.append(time.perf_counter() - started)
    return result


def measure(args: argparse.Namespace, run: Any, checkpoints: list[Any], vocabulary: Any,
            data_dir: str, rows: list[dict[str, str]], decode_rows: list[dict[str, str]]
            ) -> dict[str, Any]:
    """Both paths' timings, one checkpoint per pass (see the module docstring). The paths take
    turns within a pass, on the same checkpoint (random weights that emit EOS early decode
    faster), so a shared machine's load falls on both alike."""
    from tw_jax.evaluate.mixture_eval import MixtureEvaluators
    from tw_jax.evaluate.month_eval import EvalSettings, evaluate_month
    from tw_jax.evaluate.qa import decode_answers

    evaluators = MixtureEvaluators()  # one for the run, as the lifelong runner's
    group = VARIANT_GROUPS[args.variant]
    prompts = [run.model.probe_prompt(r) for r in decode_rows]
    times: dict[str, list[float]] = {"score": [], "decode": [], "rows_score": [],
                                     "rows_decode": []}

    def month(groups: tuple[str, ...], params: Any) -> Any:
        settings = EvalSettings(groups=groups, batch_size=args.batch,
                                max_new_tokens=args.max_new_tokens)
        return evaluate_month(run.model, params, vocabulary, data_dir, MONTH, settings,
                              mesh=run.mesh, evaluators=evaluators)

    scored = answered = perplexities = None
    for params in checkpoints:
        scored = _timed(times["score"], lambda p=params: month((group,), p))
        perplexities = _timed(times["rows_score"], lambda p=params: _probe_perplexities(
            run.model, p, vocabulary, rows, args.variant, args.batch))
        if args.decode_probes != 0:
            answered = _timed(times["decode"], lambda p=params: month(("qa",), p))
        if prompts:
            _timed(times["rows_decode"], lambda p=params: decode_answers(
                run.module, p, vocabulary, prompts, max_new_tokens=args.max_new_tokens,
                batch_size=args.batch))
    out: dict[str, Any] = {}
    for name, passes in times.items():
        out[f"{name}_cold_s"], out[f"{name}_s"] = _cold_steady(passes)
    out["examples_scored"] = sum(len(s) for (_, g), s in scored.probes.items() if g == group)
    out["perplexities"] = {c: v for (c, g), v in sorted(scored.values.items()) if g == group}
    out["em"] = ({c: v for (c, m), v in sorted(answered.values.items()) if m == "em"}
                 if answered is not None else None)
    out["rows_decode_probes"] = len(prompts)
    out["finite"] = int(sum(1 for v in perplexities if v == v and abs(v) != float("inf")))
    return out


def _rate(count: int, seconds: float | None) -> float | None:
    return count / seconds if seconds else None


def _month(count: int, seconds: float | None) -> float | None:
    return MONTH_PROBES * seconds / count if seconds and count else None


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; prints and returns the JSON record."""
    args = parse_args(argv)
    cpus = bench_common.limit_threads(args.threads, jax_flags=True)
    import datetime

    import jax
    import numpy as np

    import tw_jax.tasks
    from tw_jax.models import model_for
    from tw_jax.models.sharding import activate
    from tw_jax.preprocess.probes.probe_csv import read_probe_rows
    from tw_jax.runtime.run_model import build_run_model

    setup = bench_common.load_setup(args, jax.default_backend())
    config = setup.config
    text = synthetic_probe_csv(args.probes, setup.seed)
    rows = read_probe_rows(io.StringIO(text, newline=""), "synthetic_probes.csv")
    decode_rows = rows[: args.probes if args.decode_probes is None else args.decode_probes]
    model = model_for(config)
    with tempfile.TemporaryDirectory(prefix="bench_eval_") as work:
        files = _vocabulary_files(args, model.vocabulary_kind, [r["text"] for r in rows],
                                  Path(work))
        vocabulary = model.load_vocabulary(files[model.vocabulary_kind])
        if vocabulary.vocab_size > config.vocab_size:
            raise BenchError(f"the vocabulary has {vocabulary.vocab_size} ids, the model "
                             f"{config.vocab_size}")
        data_dir = Path(work) / "data"
        counts = month_folder(rows, data_dir)
        tw_jax.tasks.register_all(str(data_dir), t5_vocab=files["t5"], gpt2_vocab=files["gpt2"])
        examples = [model.probe_example(vocabulary, row, args.variant) for row in rows]
        lengths = [len(e.tokens) if hasattr(e, "tokens") else len(e.inputs) + len(e.targets)
                   for e in examples]
        run = build_run_model(config, setup.mesh_shape)
        try:
            with activate(run.mesh):
                checkpoints = [run.init_params(setup.seed + i) for i in range(args.repeats)]
                found = measure(args, run, checkpoints, vocabulary, str(data_dir), rows,
                                decode_rows)
        finally:
            tw_jax.tasks.register_all(None)

    device = jax.devices()[0]
    decoded = len(rows) if args.decode_probes != 0 else 0
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
        "categories": counts,
        "examples_scored": found["examples_scored"],
        "qa_protocol": model.qa_protocol,
        "decode_probes": decoded,
        "max_new_tokens": args.max_new_tokens,
        "vocab": args.vocab or "tiny, trained on the probes",
        "vocab_size": vocabulary.vocab_size,
        "tokens_per_probe_mean": float(np.mean(lengths)),
        "repeats": args.repeats,
        "threads": args.threads,
        "cpu_affinity": cpus,
        # the production path: the probe mixtures through seqio.Evaluator, one checkpoint a pass
        "score_cold_s": found["score_cold_s"],
        "score_s": found["score_s"],
        "probes_scored_per_second": _rate(len(rows), found["score_s"]),
        "month_score_s": _month(len(rows), found["score_s"]),
        "decode_cold_s": found["decode_cold_s"],
        "decode_s": found["decode_s"],
        "probes_decoded_per_second": _rate(decoded, found["decode_s"]),
        "month_decode_s": _month(decoded, found["decode_s"]),
        "perplexities": found["perplexities"],
        "em": found["em"],
        # the row-by-row baseline: model.score and decode_answers, no metric
        "rows_score_cold_s": found["rows_score_cold_s"],
        "rows_score_s": found["rows_score_s"],
        "rows_probes_scored_per_second": _rate(len(rows), found["rows_score_s"]),
        "rows_decode_probes": found["rows_decode_probes"],
        "rows_decode_cold_s": found["rows_decode_cold_s"],
        "rows_decode_s": found["rows_decode_s"],
        "rows_probes_decoded_per_second": _rate(found["rows_decode_probes"],
                                                found["rows_decode_s"]),
        "finite_perplexities": found["finite"],
        "load_average_1m": bench_common.load_average(),
        "gin_files": setup.gin_files,
        "gin_bindings": setup.gin_bindings,
        "jax": jax.__version__,
    }
    bench_common.emit(record, args.jsonl)
    return record


if __name__ == "__main__":
    sys.exit(bench_common.run_main(main))
