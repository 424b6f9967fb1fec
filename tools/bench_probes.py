"""Benchmark: entities per second per core through TWiki-Probes categorisation.

Generates a pair of Wikidata dumps (``wikidata-*-all.json.bz2`` in the real one-entity-a-line
format: labels, sitelinks, statements with mainsnak/datavalue/rank) of ``--entities`` items with
a handful of claims each, a share of them changed in the second dump (an updated object, a new
relation, a deleted statement). Then times, in one process:

1. indexing the old dump into the on-disk subject store (read + parse + insert);
2. categorising the new dump against it (read + parse + lookup + Algorithm 2 + down-sampling),

and reports each as entities per wall second and per CPU second (the reader decompresses on a
helper thread, so CPU seconds are the honest "per core" denominator). Target: 5,000 entities/s
per core through categorisation.

With ``--workers N`` (N > 1) both steps run as ``build_probes(workers=N)`` runs them: the main
process reads raw lines, N forked workers parse (and categorise); CPU seconds then include the
workers', each step getting its own pool so that they are reaped and counted.

With ``--stage`` it measures memory instead: the same dumps plus what the whole stage reads
besides (the new Wikipedia dump's titles, one page per entity, and a DiffSet folder whose
``full.jsonl`` article of each entity names its item objects, and whose ``diffset.jsonl`` holds the
articles of the entities that changed, so that most of their facts pass alignment), then
``build_probes`` run whole in a fresh child process, whose peak resident set is reported:
``peak_rss_main_mib`` (``getrusage(RUSAGE_SELF).ru_maxrss``, the main process: readers, indexes,
kept probes, the category-wide steps and the writers) and ``peak_rss_workers_mib``
(``RUSAGE_CHILDREN``: the largest worker), with ``rss_after_imports_mib`` (the child's peak before
the stage starts) and the kept and final probe counts. Several ``--entities`` sizes show how the
peak grows with the number of kept probes; ``--unchanged-rate 1`` keeps every aligned UNCHANGED
fact, as the README's command does.

    python tools/bench_probes.py --entities 200000 [--workers N] [--workdir DIR] [--keep]
    python tools/bench_probes.py --stage --entities 25000 100000 --unchanged-rate 1 [--workers N]
        [--jsonl FILE]

Each size prints one JSON object (``--jsonl FILE`` appends it to a file too).
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

PROPS_ITEM = ["P31", "P17", "P27", "P106", "P54", "P69", "P108", "P19"]
TIME_PROP, QTY_PROP, STR_PROP = "P569", "P1082", "P856"
# The relations' labels (what the whole stage renders probes with; throughput mode needs none).
PROPERTY_LABELS = {
    "P31": "instance of", "P17": "country", "P27": "country of citizenship",
    "P106": "occupation", "P54": "member of sports team", "P69": "educated at",
    "P108": "employer", "P19": "place of birth", "P569": "date of birth",
    "P1082": "population", "P856": "official website",
}


def _snak(prop: str, value: tuple) -> dict:
    if value[0] == "item":
        dv = {
            "value": {"entity-type": "item", "numeric-id": int(value[1][1:]), "id": value[1]},
            "type": "wikibase-entityid",
        }
        dt = "wikibase-item"
    elif value[0] == "time":
        dv = {
            "value": {
                "time": value[1],
                "timezone": 0,
                "before": 0,
                "after": 0,
                "precision": 11,
                "calendarmodel": "http://www.wikidata.org/entity/Q1985727",
            },
            "type": "time",
        }
        dt = "time"
    elif value[0] == "quantity":
        dv = {"value": {"amount": value[1], "unit": "1"}, "type": "quantity"}
        dt = "quantity"
    else:
        dv = {"value": value[1], "type": "string"}
        dt = "url"
    return {"snaktype": "value", "property": prop, "datavalue": dv, "datatype": dt}


def _entity(n: int, claims: dict[str, list[tuple]]) -> dict:
    qid = f"Q{n}"
    return {
        "type": "item",
        "id": qid,
        "labels": {"en": {"language": "en", "value": f"Entity {n}"}},
        "descriptions": {},
        "aliases": {},
        "claims": {
            prop: [
                {
                    "mainsnak": _snak(prop, v),
                    "type": "statement",
                    "id": f"{qid}${prop}-{i}",
                    "rank": "normal",
                }
                for i, v in enumerate(values)
            ]
            for prop, values in claims.items()
        },
        "sitelinks": {"enwiki": {"site": "enwiki", "title": f"Entity {n}", "badges": []}},
    }


def _claims(rng: random.Random, n: int, entities: int) -> dict[str, list[tuple]]:
    claims: dict[str, list[tuple]] = {}
    for prop in rng.sample(PROPS_ITEM, 4):
        claims[prop] = [("item", f"Q{rng.randint(1, entities)}")]
    claims[TIME_PROP] = [
        ("time", f"+19{rng.randint(10, 99)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T00:00:00Z")
    ]
    claims[QTY_PROP] = [("quantity", f"+{rng.randint(100, 10**7)}")]
    return claims


def _evolve(rng: random.Random, claims: dict[str, list[tuple]], entities: int) -> dict:
    claims = {k: list(v) for k, v in claims.items()}
    roll = rng.random()
    if roll < 0.05:  # updated object
        prop = rng.choice([p for p in claims if p in PROPS_ITEM])
        claims[prop] = [("item", f"Q{rng.randint(1, entities)}")]
    elif roll < 0.08:  # new relation
        claims[STR_PROP] = [("string", f"https://example.org/{rng.randint(0, 10**9)}")]
    elif roll < 0.10:  # deleted statement
        claims.pop(QTY_PROP, None)
    return claims


Claims = dict[str, list[tuple]]
OnEntity = Callable[[int, "Claims | None", Claims], None]


def _property(pid: str) -> dict:
    datatype = {TIME_PROP: "time", QTY_PROP: "quantity", STR_PROP: "url"}.get(pid)
    return {
        "type": "property",
        "datatype": datatype or "wikibase-item",
        "id": pid,
        "labels": {"en": {"language": "en", "value": PROPERTY_LABELS[pid]}},
        "claims": {},
    }


def write_pair(
    workdir: str, entities: int, seed: int = 0, on_entity: OnEntity | None = None
) -> tuple[str, str]:
    """Writes old and new dumps (bz2, one entity a line between ``[`` and ``]``). With
    ``on_entity`` (the whole stage's world), the dumps start with the relations' properties and
    ``on_entity`` is told each entity's number, old claims (None: new this month) and new ones."""
    rng = random.Random(seed)
    old_path = os.path.join(workdir, "wikidata-20210801-all.json.bz2")
    new_path = os.path.join(workdir, "wikidata-20210901-all.json.bz2")
    # bz2 is slowest on repetitive text at high levels; level 1 keeps generation short.
    with (
        bz2.open(old_path, "wt", encoding="utf-8", compresslevel=1) as old,
        bz2.open(new_path, "wt", encoding="utf-8", compresslevel=1) as new,
    ):
        old.write("[\n")
        new.write("[\n")
        if on_entity is not None:
            for pid in PROPERTY_LABELS:
                line = json.dumps(_property(pid), separators=(",", ":")) + ",\n"
                old.write(line)
                new.write(line)
        for n in range(1, entities + 1):
            before = _claims(rng, n, entities)
            after = _evolve(rng, before, entities)
            tail = ",\n" if n < entities else "\n"
            old.write(json.dumps(_entity(n, before), separators=(",", ":")) + tail)
            new.write(json.dumps(_entity(n, after), separators=(",", ":")) + tail)
            if on_entity is not None:
                on_entity(n, before, after)
        for n in range(entities + 1, entities + 1 + entities // 50):  # entities new this month
            new_tail = ",\n" if n < entities + entities // 50 else "\n"
            claims = _claims(rng, n, entities)
            new.write(json.dumps(_entity(n, claims), separators=(",", ":")) + new_tail)
            if on_entity is not None:
                on_entity(n, None, claims)
        old.write("]\n")
        new.write("]\n")
    return old_path, new_path


def _article(n: int, claims: Claims) -> str:
    """An article that names the entity's item objects ("Entity 17"), one sentence each."""
    objects = [value[1] for values in claims.values() for value in values if value[0] == "item"]
    return f"Entity {n} is an entity." + "".join(
        f" It is linked to Entity {qid[1:]}." for qid in objects
    )


def write_world(workdir: str, entities: int, seed: int = 0) -> dict[str, str]:
    """The dump pair of :func:`write_pair`, the new Wikipedia dump (titles only: one page
    ``Entity n`` per entity) and a DiffSet folder (``full.jsonl``: every entity's
    :func:`_article`; ``diffset.jsonl``: those of the entities whose claims changed)."""
    from types import SimpleNamespace

    from tw_jax.sample_world.dumps import XML_FOOTER, page_xml, xml_header

    wiki_path = os.path.join(workdir, "enwiki-20210901-pages-articles.xml.bz2")
    diffset = os.path.join(workdir, "diffset")
    os.makedirs(diffset, exist_ok=True)
    with (
        bz2.open(wiki_path, "wb", compresslevel=1) as wiki,
        open(os.path.join(diffset, "full.jsonl"), "w", encoding="utf-8") as full,
        open(os.path.join(diffset, "diffset.jsonl"), "w", encoding="utf-8") as diff,
    ):
        wiki.write(xml_header().encode())

        def on_entity(n: int, before: Claims | None, after: Claims) -> None:
            title, text = f"Entity {n}", _article(n, after)
            page = SimpleNamespace(
                page_id=n, ns=0, title=title, text="stub", target=None, rev_id=n,
                parent_id=None, timestamp="2021-09-01T00:00:00Z",
                contributor=("user", "Bench", 1), comment="", minor=False,
            )
            wiki.write(page_xml(page).encode())
            record = json.dumps({"id": n, "title": title, "text": text}) + "\n"
            full.write(record)
            if before != after:
                diff.write(record)

        old_path, new_path = write_pair(workdir, entities, seed, on_entity)
        wiki.write(XML_FOOTER.encode())
    Path(diffset, "stats.json").write_text("{}\n", encoding="utf-8")  # a finished DiffSet
    return {"old": old_path, "new": new_path, "wikipedia": wiki_path, "diffset": diffset}


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


def stage_child(spec: str) -> None:
    """In a fresh process: ``build_probes`` once, then its peak RSS and counts as JSON."""
    from tw_jax.preprocess.probes.finish import ProbeOptions
    from tw_jax.preprocess.probes.local import build_probes

    args = json.loads(spec)
    at_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    stats = build_probes(
        args["old"], args["new"], args["wikipedia"], args["diffset"], args["out"],
        options=ProbeOptions(unchanged_rate=args["rate"]), progress=False,
        workers=args["workers"],
    )
    wall = time.perf_counter() - started
    categories = stats["categories"]
    print(json.dumps({
        "wall_s": round(wall, 1),
        "rss_after_imports_kib": at_start,
        "peak_rss_main_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "peak_rss_workers_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
        "kept": {c: v["after_rules"] for c, v in categories.items()},
        "final": {c: v["final"] for c, v in categories.items()},
    }))


def bench_stage(world: dict[str, str], workdir: str, rate: float, workers: int) -> dict:
    """``build_probes`` on ``world`` in a child process: its peak RSS, time and counts."""
    spec = dict(world, out=os.path.join(workdir, "probes"), rate=rate, workers=workers)
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--stage-child", json.dumps(spec)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench_probes: the stage failed:\n{done.stderr[-3000:]}")
    child = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "wall_s": child["wall_s"],
        "rss_after_imports_mib": _mib(child["rss_after_imports_kib"]),
        "peak_rss_main_mib": _mib(child["peak_rss_main_kib"]),
        "peak_rss_workers_mib": _mib(child["peak_rss_workers_kib"]),
        "kept_probes": sum(child["kept"].values()),
        "final_probes": sum(child["final"].values()),
        "kept": child["kept"],
        "final": child["final"],
    }


def emit(record: dict, jsonl: str | None) -> None:
    """One JSON object on stdout; appended to ``jsonl`` too when given."""
    line = json.dumps(record)
    if jsonl:
        Path(jsonl).parent.mkdir(parents=True, exist_ok=True)
        with open(jsonl, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    print(line, flush=True)


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the pool workers)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def bench(old_path: str, new_path: str, workdir: str, rate: float, workers: int = 1) -> dict:
    from tw_jax.preprocess.probes.finish import ProbeOptions
    from tw_jax.preprocess.probes.local import (
        Categoriser,
        StorePaths,
        WorkerConfig,
        categorise_dump,
        index_sides,
        iter_sides,
        start_pool,
    )
    from tw_jax.preprocess.probes.stats import ProbeStats
    from tw_jax.preprocess.probes.store import OldSnapshot
    from tw_jax.preprocess.runners.accounting import Skips

    stats = ProbeStats()
    options = ProbeOptions(unchanged_rate=rate)
    old_store = os.path.join(workdir, "old.sqlite")
    config = WorkerConfig(StorePaths(old_store, None, None), new_path, options, False)
    store = OldSnapshot(old_store, create=True)
    wall, cpu = time.perf_counter(), _cpu()
    if workers > 1:
        pool = start_pool(workers, config)
        n_old = store.add_all(index_sides(old_path, stats, pool, workers))
        pool.close()
        pool.join()
    else:
        n_old = store.add_all(iter_sides(old_path, Skips(), stats, "old"))
    index = (n_old, time.perf_counter() - wall, _cpu() - cpu)
    wall, cpu = time.perf_counter(), _cpu()
    if workers > 1:
        pool = start_pool(workers, config)
        categorise_dump(new_path, options, stats, pool, workers, lambda probes: None)
        pool.close()
        pool.join()
        n_new = stats.entities["new"]
    else:
        work = Categoriser(store, None, None, options, stats, False)
        n_new = 0
        for entity_id, side in iter_sides(new_path, Skips(), stats, "new"):
            work.categorise(entity_id, side)
            n_new += 1
    cat = (n_new, time.perf_counter() - wall, _cpu() - cpu)
    store.close()
    return {
        "index_old": {
            "entities": index[0],
            "wall_s": round(index[1], 2),
            "cpu_s": round(index[2], 2),
            "entities_per_s": round(index[0] / index[1]),
            "entities_per_cpu_s": round(index[0] / index[2]),
        },
        "categorise": {
            "entities": cat[0],
            "wall_s": round(cat[1], 2),
            "cpu_s": round(cat[2], 2),
            "entities_per_s": round(cat[0] / cat[1]),
            "entities_per_cpu_s": round(cat[0] / cat[2]),
        },
        "categorised": {c: v["categorised"] for c, v in stats.as_dict()["categories"].items()},
        "workers": workers,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--entities", type=int, nargs="+", default=[200_000], help="one or more sizes"
    )
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the generated dumps")
    parser.add_argument("--unchanged-rate", type=float, default=0.001)
    parser.add_argument(
        "--workers", type=int, default=1, help="worker processes, as `tw-jax probes --workers`"
    )
    parser.add_argument(
        "--stage", action="store_true",
        help="peak RSS of the whole stage (build_probes in a child process), not throughput",
    )
    parser.add_argument("--jsonl", default=None, metavar="FILE", help="append each record here")
    parser.add_argument("--stage-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stage_child is not None:
        stage_child(args.stage_child)
        return
    for entities in args.entities:
        workdir = args.workdir or tempfile.mkdtemp(prefix="tw_jax_bench_probes_")
        if args.workdir is not None and len(args.entities) > 1:
            workdir = os.path.join(workdir, str(entities))
        os.makedirs(workdir, exist_ok=True)
        try:
            started = time.perf_counter()
            if args.stage:
                world = write_world(workdir, entities)
                old_path, new_path = world["old"], world["new"]
            else:
                old_path, new_path = write_pair(workdir, entities)
            generated = time.perf_counter() - started
            if args.stage:
                result = {"entities": entities, "unchanged_rate": args.unchanged_rate,
                          "workers": args.workers,
                          **bench_stage(world, workdir, args.unchanged_rate, args.workers)}
            else:
                result = bench(old_path, new_path, workdir, args.unchanged_rate, args.workers)
                result["target_entities_per_cpu_s"] = 5000
                result["meets_target"] = result["categorise"]["entities_per_cpu_s"] >= 5000
            result["generate_s"] = round(generated, 1)
            result["dump_bytes"] = {
                "old": os.path.getsize(old_path), "new": os.path.getsize(new_path)
            }
            emit(result, args.jsonl)
        finally:
            if not args.keep and args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
