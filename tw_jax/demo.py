"""``tw-jax demo``: the whole loop on the embedded sample world, on a laptop CPU.

For now the loop is: generate the sample world (four monthly Wikipedia and Wikidata dumps with
their ground truth), then for every month pair build the TWiki-DiffSet and the TWiki-Probes into
the data layout the tasks read (``DATA/<MMMM>/diffset``, ``DATA/<MMMM>/probes``), scoring the
DiffSet against the ground truth; export the initial snapshot (``DATA/<MM>/full``); train tiny
vocabularies on the world's text (``DATA/vocab/{t5,gpt2}``: nothing is downloaded); and write the
salient-span-masked T5 inputs (``DATA/<MMMM>/ssm``, ``DATA/<MM>/ssm``). ``tw_jax.tasks`` registers
its tasks from exactly this folder (``TW_JAX_DATA_DIR=DATA``). Training and evaluation stages join
here as they land.

The sample world is small, so its probes keep every UNCHANGED fact (``--unchanged-rate 1``)
instead of the 0.1% that suits a full Wikidata dump.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the pipeline end to end on the embedded sample world"
    )
    parser.add_argument("--out", default="demo_out", help="output folder (default: demo_out)")
    parser.add_argument("--seed", type=int, default=0, help="sample world seed")
    parser.add_argument("--workers", type=int, default=1, help="worker processes per stage")
    parser.set_defaults(func=run)


def run_demo(out: str | Path, seed: int = 0, workers: int = 1) -> dict[str, Any]:
    from tw_jax.preprocess.diffset.local import build_diffset
    from tw_jax.preprocess.diffset.score import score
    from tw_jax.preprocess.probes.finish import ProbeOptions
    from tw_jax.preprocess.probes.local import build_probes
    from tw_jax.sample_world.build import build_sample_world, wikidata_dump, wikipedia_dump

    out = Path(out)
    world_dir, data_dir = out / "sample_world", out / "data"
    started = time.perf_counter()
    world = build_sample_world(world_dir, seed=seed)
    summary: dict[str, Any] = {"sample_world": str(world_dir), "data": str(data_dir), "pairs": {}}
    months = world["months"]
    for old_month, new_month, pair in zip(months, months[1:], world["pairs"], strict=False):
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
            options=ProbeOptions(unchanged_rate=1.0, seed=seed),
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
    initial = data_dir / _month_folder(first) / "full"
    build_diffset(None, wikipedia_dump(world_dir, first), initial, workers=workers, progress=False)
    summary["vocab"] = {k: str(v) for k, v in _vocabularies(data_dir, months, world["pairs"]).items()}
    summary["ssm"] = _salient_spans(data_dir, initial, world["pairs"], workers)
    summary["seconds"] = round(time.perf_counter() - started, 2)
    return summary


def _month_folder(month: str) -> str:
    """``2021-08`` → ``08``: the data folder of one snapshot."""
    return month[-2:]


def _vocabularies(data_dir: Path, months: list[str], pairs: list[str]) -> dict[str, Path]:
    """Tiny T5 and GPT-2 vocabularies trained on every article text of the world."""
    from tw_jax.data.vocab_training import write_demo_vocabularies

    sources = [data_dir / _month_folder(months[0]) / "full" / "full.jsonl"]
    sources += [data_dir / pair / "diffset" / "full.jsonl" for pair in pairs]

    def texts():
        for source in sources:
            with open(source, encoding="utf-8") as handle:
                for line in handle:
                    yield json.loads(line)["text"]

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


def run(args: argparse.Namespace) -> int:
    summary = run_demo(args.out, seed=args.seed, workers=args.workers)
    for pair, figures in summary["pairs"].items():
        articles = figures["articles"]
        print(
            f"DiffSet {pair}: {articles['new']} new + {articles['changed']} changed articles, "
            f"{figures['diffset_tokens']} tokens; vs ground truth: "
            f"precision {figures['precision']:.3f}, recall {figures['recall']:.3f}"
        )
        counts = ", ".join(f"{n} {c}" for c, n in figures["probes"].items())
        print(f"Probes {pair}: {counts}")
    print(json.dumps(summary, indent=2))
    print(f"Done in {summary['seconds']} s. Data in {summary['data']}")
    return 0
