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

    python tools/bench_probes.py --entities 200000 [--workers N] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import random
import resource
import shutil
import tempfile
import time

PROPS_ITEM = ["P31", "P17", "P27", "P106", "P54", "P69", "P108", "P19"]
TIME_PROP, QTY_PROP, STR_PROP = "P569", "P1082", "P856"


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


def write_pair(workdir: str, entities: int, seed: int = 0) -> tuple[str, str]:
    """Writes old and new dumps (bz2, one entity a line between ``[`` and ``]``)."""
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
        for n in range(1, entities + 1):
            before = _claims(rng, n, entities)
            after = _evolve(rng, before, entities)
            tail = ",\n" if n < entities else "\n"
            old.write(json.dumps(_entity(n, before), separators=(",", ":")) + tail)
            new.write(json.dumps(_entity(n, after), separators=(",", ":")) + tail)
        for n in range(entities + 1, entities + 1 + entities // 50):  # entities new this month
            new_tail = ",\n" if n < entities + entities // 50 else "\n"
            new.write(
                json.dumps(_entity(n, _claims(rng, n, entities)), separators=(",", ":")) + new_tail
            )
        old.write("]\n")
        new.write("]\n")
    return old_path, new_path


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
        categorise_dump(new_path, options, stats, pool, workers)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=200_000)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the generated dumps")
    parser.add_argument("--unchanged-rate", type=float, default=0.001)
    parser.add_argument(
        "--workers", type=int, default=1, help="worker processes, as `tw-jax probes --workers`"
    )
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="tw_jax_bench_probes_")
    os.makedirs(workdir, exist_ok=True)
    try:
        started = time.perf_counter()
        old_path, new_path = write_pair(workdir, args.entities)
        generated = time.perf_counter() - started
        result = bench(old_path, new_path, workdir, args.unchanged_rate, args.workers)
        result["generate_s"] = round(generated, 1)
        result["dump_bytes"] = {"old": os.path.getsize(old_path), "new": os.path.getsize(new_path)}
        result["target_entities_per_cpu_s"] = 5000
        result["meets_target"] = result["categorise"]["entities_per_cpu_s"] >= 5000
        print(json.dumps(result, indent=2))
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
