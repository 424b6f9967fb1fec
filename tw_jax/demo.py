"""``tw-jax demo``: the whole loop on the embedded sample world, on a laptop CPU.

The loop: generate the sample world (four monthly Wikipedia and Wikidata dumps with
their ground truth), then for every month pair build the TWiki-DiffSet and the TWiki-Probes into
the data layout the tasks read (``DATA/<MMMM>/diffset``, ``DATA/<MMMM>/probes``), scoring the
DiffSet against the ground truth; export the initial snapshot (``DATA/<MM>/full``); train tiny
vocabularies on the world's text (``DATA/vocab/{t5,gpt2}``: nothing is downloaded); and write the
salient-span-masked T5 inputs (``DATA/<MMMM>/ssm``, ``DATA/<MM>/ssm``). ``tw_jax.tasks`` registers
its tasks from exactly this folder (``TW_JAX_DATA_DIR=DATA``). Then (unless ``--no-train``)
:mod:`tw_jax.demo_training` trains a tiny GPT-2 INITIAL on the first snapshot, updates it with
DIFF, K-Adapter, LoRA and Mix-Review over the first two month pairs, scores every checkpoint on
every month's probes and corpora, and writes the report (``OUT/report/report.md`` and figures).

The sample world is small, so its probes keep every UNCHANGED fact (``--unchanged-rate 1``)
instead of the 0.1% that suits a full Wikidata dump. What ``tw-jax demo`` builds is
:data:`DEMO_WORLD`: each month applies the world's set of changes three times, so a month's
DiffSet is about 45 blocks of 128 tokens instead of about 15 and an update that passes over it
once (TemporalWiki's regime) makes more than a handful of steps; and the per-relation and
per-object caps of the probes are a quarter of a category instead of a twentieth, since the
world has only a few relations and a twentieth of ~150 CHANGED facts leaves about a dozen.
``run_demo`` without a ``world`` builds the plain sample world (the pipeline tests' data).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tw_jax import demo_record
from tw_jax.demo_training import DEMO_METHODS, DemoTraining
from tw_jax.io import jsonl
from tw_jax.io.cli_paths import output_path
from tw_jax.sample_world.span import DEFAULT_SPAN, Span, SpanError
from tw_jax.time import Period


@dataclass(frozen=True)
class DemoWorld:
    """The sample world the demo builds and how its probes are capped (module docstring)."""

    entities: int | None = None  # None: the sample world's default (180 main entities)
    change_rounds: int = 1
    max_object_frac: float = 0.05  # ProbeOptions' defaults: TemporalWiki's caps
    max_relation_frac: float = 0.05


DEMO_WORLD = DemoWorld(entities=360, change_rounds=3, max_object_frac=0.25, max_relation_frac=0.25)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the pipeline end to end on the embedded sample world",
        description="Build the sample world's data, train INITIAL and each method month after "
                    "month, score every checkpoint and write the report. A rerun into the same "
                    "OUT reuses its data and finished updates when the settings are those OUT "
                    "records (OUT/demo.json), and is refused, naming the differences, when they "
                    "are not. Ctrl-C (or SIGTERM) saves a checkpoint of the training under way "
                    "and exits 0 with one line; the same command resumes there.",
    )
    parser.add_argument("--out", default="demo_out", type=output_path,
                        help="output folder (default: demo_out)")
    parser.add_argument("--seed", type=int, default=0, help="sample world seed")
    parser.add_argument("--start", default=DEFAULT_SPAN.start.iso, metavar="YYYY-MM",
                        help="the sample world's first month (default "
                             f"{DEFAULT_SPAN.start.iso}, TemporalWiki's; four monthly snapshots "
                             "from it, e.g. 2021-11 to cross a year)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes per stage")
    parser.add_argument("--no-train", action="store_true",
                        help="build the data only: no training, evaluation or report")
    parser.add_argument("--methods", default=",".join(DEMO_METHODS), metavar="M,M",
                        help=f"methods to update INITIAL with (default {','.join(DEMO_METHODS)})")
    parser.add_argument("--initial-steps", type=_steps, default=DemoTraining.initial_steps,
                        help="training steps of INITIAL on the first snapshot")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--update-epochs", type=_epochs, default=DemoTraining.update_epochs,
                        metavar="E", help="passes over its training data per monthly update "
                        f"(default {DemoTraining.update_epochs:g}; Mix-Review: new + review data)")
    budget.add_argument("--update-steps", type=_steps, default=None, metavar="N",
                        help="a fixed number of training steps per monthly update instead")
    parser.add_argument("--max-probes", type=int, default=None, metavar="N",
                        help="score only the first N probes of each category")
    parser.add_argument("--fresh", action="store_true",
                        help="replace what OUT holds (its data, runs and report) instead of "
                             "continuing it; a rerun with other settings needs this or another "
                             "--out")
    parser.set_defaults(func=run)


def _epochs(text: str) -> float:
    """Passes per update: a positive number (the lifelong runner's TRAIN_EPOCHS)."""
    epochs = float(text)
    if not 0 < epochs < float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: passes per update must be a positive number")
    return epochs


def _steps(text: str) -> int:
    """A step count for GPT-2's one-cycle schedule, which needs at least 4 steps."""
    steps = int(text)
    if steps < 4:
        raise argparse.ArgumentTypeError(f"{steps}: the one-cycle schedule needs at least 4 steps")
    return steps


def run_demo(out: str | Path, seed: int = 0, workers: int = 1,
             world: DemoWorld = DemoWorld(), span: Span = DEFAULT_SPAN) -> dict[str, Any]:
    from tw_jax.preprocess.diffset.local import build_diffset
    from tw_jax.preprocess.diffset.score import score
    from tw_jax.preprocess.probes.finish import ProbeOptions
    from tw_jax.preprocess.probes.local import build_probes
    from tw_jax.sample_world.build import build_sample_world, wikidata_dump, wikipedia_dump

    out = Path(out)
    world_dir, data_dir = out / "sample_world", out / "data"
    started = time.perf_counter()
    size = {} if world.entities is None else {"n_entities": world.entities}
    built = build_sample_world(world_dir, seed=seed, change_rounds=world.change_rounds,
                               span=span, **size)
    summary: dict[str, Any] = {"sample_world": str(world_dir), "data": str(data_dir), "pairs": {}}
    months = built["months"]
    for old_month, new_month, pair in zip(months, months[1:], built["pairs"], strict=False):
        target = data_dir / pair / "diffset"
        stats = build_diffset(
            wikipedia_dump(world_dir, old_month),
            wikipedia_dump(world_dir, new_month),
            target,
            workers=workers,
            progress=False,
        )
        quality = score(target / "diffset.jsonl", world_dir / "truth" / f"diffset-{pair}.jsonl")
        probes = build_probes(
            wikidata_dump(world_dir, old_month),
            wikidata_dump(world_dir, new_month),
            wikipedia_dump(world_dir, new_month),
            target,
            data_dir / pair / "probes",
            options=ProbeOptions(unchanged_rate=1.0, seed=seed,
                                 max_object_frac=world.max_object_frac,
                                 max_relation_frac=world.max_relation_frac),
            old_wikipedia=wikipedia_dump(world_dir, old_month),
            progress=False,
        )
        summary["pairs"][pair] = {
            "articles": stats["articles"],
            "diffset_tokens": stats["diffset"]["tokens"],
            "precision": quality["precision"],
            "recall": quality["recall"],
            "probes": {c: v["final"] for c, v in probes["categories"].items()},
        }
    first = months[0]
    initial = data_dir / _snapshot_folder(built["pairs"]) / "full"
    build_diffset(None, wikipedia_dump(world_dir, first), initial, workers=workers, progress=False)
    summary["vocab"] = {k: str(v) for k, v in _vocabularies(data_dir, initial,
                                                            built["pairs"]).items()}
    summary["ssm"] = _salient_spans(data_dir, initial, built["pairs"], workers)
    summary["seconds"] = round(time.perf_counter() - started, 2)
    return summary


def _snapshot_folder(pairs: list[str]) -> str:
    """The data folder of the world's first snapshot, spelled as its periods spell it (``08``
    for the 2021 benchmark's months, else ``2021-11``)."""
    return Period.parse(pairs[0]).old.name


def _vocabularies(data_dir: Path, initial: Path, pairs: list[str]) -> dict[str, Path]:
    """Tiny T5 and GPT-2 vocabularies trained on every article text of the world."""
    from tw_jax.data.vocab_training import write_demo_vocabularies

    sources = [initial / "full.jsonl"]
    sources += [data_dir / pair / "diffset" / "full.jsonl" for pair in pairs]

    def texts():
        for source in sources:
            for record in jsonl.records(source, ("text",)):
                yield record["text"]

    return write_demo_vocabularies(texts(), data_dir / "vocab")


def _salient_spans(
    data_dir: Path, initial: Path, pairs: list[str], workers: int
) -> dict[str, int]:
    """SSM examples for T5: every pair's DiffSet and snapshot, and the initial snapshot."""
    from tw_jax.preprocess.ssm.local import build_ssm

    counts = {}
    jobs = [(initial, initial.parent / "ssm", ("full",))]
    jobs += [(data_dir / p / "diffset", data_dir / p / "ssm", ("diffset", "full")) for p in pairs]
    for source, target, inputs in jobs:
        stats = build_ssm(source, target, inputs=inputs, workers=workers, progress=False)
        counts[str(target.relative_to(data_dir))] = stats["examples"]
    return counts


def _span(args: argparse.Namespace) -> Span:
    return Span.parse(args.start, DEFAULT_SPAN.months)


def _settings(args: argparse.Namespace, span: Span = DEFAULT_SPAN) -> DemoTraining:
    """The training settings: the world's first two periods, and the CLI's knobs."""
    return DemoTraining(
        months=tuple(p.name for p in span.periods[:2]),
        methods=tuple(m.strip() for m in args.methods.split(",") if m.strip()),
        initial_steps=args.initial_steps, update_steps=args.update_steps,
        update_epochs=None if args.update_steps else args.update_epochs,
        max_probes=args.max_probes,
    )


def run(args: argparse.Namespace) -> int:
    from tw_jax.demo_training import check_settings
    from tw_jax.lifelong.runner import LifelongError
    from tw_jax.text.spacy_pipeline import DEFAULT_MODEL, resolve_model
    from tw_jax.train.preemption import TrainingPreempted

    resolve_model(DEFAULT_MODEL)  # the SSM files need it: fail now, not after the data
    try:
        span = _span(args)
    except SpanError as error:
        print(f"tw-jax demo: error: {error}", file=sys.stderr)
        return 2
    settings = _settings(args, span)
    if not args.no_train:
        try:  # every argument checked before the data is built or anything trains
            check_settings(settings)
        except (ValueError, LifelongError) as error:
            print(f"tw-jax demo: error: {error}", file=sys.stderr)
            return 2
    out = Path(args.out)
    world = {"seed": args.seed, **dataclasses.asdict(DEMO_WORLD)}
    if span != DEFAULT_SPAN:  # recorded only when not the default: older records are that
        world["start"] = span.start.iso
    training = None if args.no_train else dataclasses.asdict(settings)
    try:
        if args.fresh:
            demo_record.clear(out)
        record = demo_record.check_rerun(out, world, training)
    except demo_record.DemoRerunError as error:
        print(f"tw-jax demo: error: {error}", file=sys.stderr)
        return 2
    try:
        return _run(args, settings, record or {"world": world}, span)
    except TrainingPreempted as stopped:
        # Ctrl-C (or SIGTERM) saved a checkpoint: one line, exit 0, as tw-jax train and lifelong.
        print(f"demo: {stopped}", file=sys.stderr)
        return 0


def _run(args: argparse.Namespace, settings: DemoTraining, record: dict[str, Any],
         span: Span = DEFAULT_SPAN) -> int:
    started = time.perf_counter()
    out = Path(args.out)
    summary = record.get("data")
    reused = summary is not None
    if summary is None:
        summary = run_demo(out, seed=args.seed, workers=args.workers, world=DEMO_WORLD, span=span)
        record = {**record, "data": summary}
        demo_record.write_record(out, record)  # the data is complete
    for pair, figures in summary["pairs"].items():
        articles = figures["articles"]
        pair = Period.parse(pair).label
        print(
            f"DiffSet {pair}: {articles['new']} new + {articles['changed']} changed articles, "
            f"{figures['diffset_tokens']} tokens; vs ground truth: "
            f"precision {figures['precision']:.3f}, recall {figures['recall']:.3f}"
        )
        counts = ", ".join(f"{n} {c}" for c, n in figures["probes"].items())
        print(f"Probes {pair}: {counts}")
    if reused:
        print(f"Data reused (built in {summary['seconds']} s with the same settings): "
              f"{summary['data']}")
    else:
        print(f"Data built in {summary['seconds']} s: {summary['data']}")
    if args.no_train:
        print(json.dumps(summary, indent=2))
        return 0
    from tw_jax.demo_training import train_and_report

    # Recorded before anything trains: an interrupted run's checkpoints belong to these settings.
    demo_record.write_record(out, {**record, "training": dataclasses.asdict(settings)})
    summary = dict(summary)
    trained = train_and_report(summary["data"], out, settings)
    summary["training"] = trained
    with open(Path(args.out) / "summary.json", "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2)
    print(trained["table"])
    timings = ", ".join(f"{m} {s:.0f} s" for m, s in trained["method_seconds"].items())
    print(f"Training and evaluation: {timings}")
    print(f"Done in {time.perf_counter() - started:.0f} s. Report: {trained['report']} "
          f"({len(trained['figures'])} figures beside it); results: {trained['runs']}")
    return 0
