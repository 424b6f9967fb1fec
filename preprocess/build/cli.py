"""``tw-jax build --dumps DIR --data DATA``: every period of a folder of dumps.

Finds the dumps by their Wikimedia names (:mod:`.dumps`), orders the snapshots by date, and
runs what :mod:`.plan` lays out, skipping every stage whose folder is complete (its
``stats.json`` exists) and fresh (the dumps and DiffSet files it records reading are unchanged),
so an interrupted build, or one given next month's dumps, does only what is left, and one given
a replaced dump rebuilds what was made from it, saying why. Each stage prints one line as it ends; each runs exactly what its own command
(``tw-jax diffset``, ``probes``, ``ssm``) would, with the same options, and holds its folder
while it writes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from tw_jax.cli_parser import add_rebuild_flag
from tw_jax.errors import UsageError
from tw_jax.io.cli_paths import InputFolder, InputPath, claimed_output, input_folder, output_path
from tw_jax.preprocess.build.dumps import FoundDumps, find_dumps
from tw_jax.preprocess.build.plan import Stage, plan
from tw_jax.preprocess.diffset import cli as diffset_cli
from tw_jax.preprocess.probes import cli as probes_cli
from tw_jax.preprocess.probes.categorise import CATEGORIES
from tw_jax.preprocess.runners.cli_options import add_runner_arguments
from tw_jax.preprocess.ssm import cli as ssm_cli

if TYPE_CHECKING:
    from tw_jax.preprocess.probes.finish import ProbeOptions


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "build",
        help="every period of a folder of dumps: DiffSets, Probes and SSM, named from the "
        "dumps' dates, finished stages skipped",
        description=(
            "Finds enwiki-YYYYMMDD-pages-articles*.xml[.bz2|.gz] and wikidata-YYYYMMDD-all.json"
            "[.bz2|.gz] in DIR (and its subfolders one level down), pairs each Wikipedia day "
            "with the nearest Wikidata dump within --max-date-gap days, orders them by date "
            "and writes, under DATA: the first snapshot's export (<first>/full) and its SSM, "
            "then for each consecutive period its DiffSet, Probes and SSM (<period>/diffset, "
            "probes, ssm). Folders are named with years (2024-12_2025-01; a twice-monthly "
            "dump: 2024-02_2024-02-20), or 0809 ... for TemporalWiki's 2021 dumps. A stage "
            "whose stats.json exists is complete and skipped, unless an input it records (a dump, "
            "the DiffSet it read) changed since: then it is built again, saying why. One line "
            "per stage."
        ),
    )
    parser.add_argument("--dumps", required=True, type=input_folder, metavar="DIR",
                        help="the folder of dumps (local or gs://)")
    parser.add_argument("--data", required=True, type=output_path,
                        help="the data folder the tasks read (local or gs://)")
    parser.add_argument("--ssm", action=argparse.BooleanOptionalAction, default=True,
                        help="the T5 stages (salient span masking; spaCy): --no-ssm for "
                        "causal LMs only (default: on)")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the dumps found and every stage, complete or to build; "
                        "write nothing")
    add_rebuild_flag(parser, "build every stage again, complete ones included")
    diffset_cli.add_diffset_options(parser)
    probes_cli.add_probe_options(parser)
    ssm_cli.add_ssm_options(parser)
    parser.add_argument("--seed", type=int, default=0,
                        help="seeds the UNCHANGED sample of Probes and the spans SSM masks")
    add_runner_arguments(parser, "local worker processes of each stage (0: one per core)")
    parser.set_defaults(func=run)


def _say(line: str) -> None:
    print(f"tw-jax build: {line}", flush=True)


def _found(found: FoundDumps) -> str:
    days = ", ".join(s.snapshot.date.isoformat() for s in found.snapshots)
    extra = []
    if found.copies:
        extra.append(f"{len(found.copies)} copies in another compression not read")
    if found.unpaired_wikidata:
        extra.append(f"{len(found.unpaired_wikidata)} Wikidata dumps with no Wikipedia day "
                     "near them not read")
    return (f"{len(found.snapshots)} snapshots ({days}), {len(found.snapshots) - 1} periods"
            + (f"; {'; '.join(extra)}" if extra else ""))


def _inputs(stage: Stage) -> dict[str, object]:
    """What the stage reads, for the claim's overlap check."""
    named: dict[str, object] = {"--new": InputPath(stage.new.wikipedia),
                                "--new-wikidata": InputPath(stage.new.wikidata)}
    if stage.old is not None:
        named |= {"--old": InputPath(stage.old.wikipedia),
                  "--old-wikidata": InputPath(stage.old.wikidata)}
    if stage.source is not None:
        named["--in"] = InputFolder(stage.source)
    return named


def _run_stage(args: argparse.Namespace, stage: Stage,
               options: ProbeOptions) -> tuple[str, dict[str, Any]]:
    """Runs one stage; (how it ran, its stats)."""
    if stage.kind in ("full", "diffset"):
        old = None if stage.kind == "full" else stage.old.wikipedia
        if old is None and args.runner == "beam":  # Beam compares two dumps; one is exported
            local = argparse.Namespace(**{**vars(args), "runner": "local"})
            return "locally (Beam needs two dumps)", diffset_cli.build(
                local, None, stage.new.wikipedia, stage.folder)
        return "", diffset_cli.build(args, old, stage.new.wikipedia, stage.folder)
    if stage.kind == "probes":
        return "", probes_cli.build(
            args, options, (stage.old.wikidata, stage.new.wikidata),
            stage.new.wikipedia, stage.old.wikipedia, stage.source, stage.folder)
    return "", ssm_cli.build(args, stage.source, stage.folder, stage.inputs)


def _figures(stage: Stage, stats: dict[str, Any]) -> str:
    """The few numbers that say a stage did what it should."""
    if stage.kind == "full":
        return f"{stats['articles']['new']} articles, {stats['full']['tokens']} tokens"
    if stage.kind == "diffset":
        articles = stats["articles"]
        return (f"{articles['new']} new + {articles['changed']} changed articles, "
                f"{stats['diffset']['tokens']} tokens")
    if stage.kind == "probes":
        categories = stats["categories"]
        return ", ".join(f"{categories[c]['final']} {c}" for c in CATEGORIES if c in categories)
    return ", ".join(f"{stats[name]['examples']} {name} examples" for name in stats["inputs"])


def _check(args: argparse.Namespace) -> ProbeOptions:
    """Every option checked before any stage runs (a bad one is one line, not a failure
    hours in)."""
    from tw_jax.text.spacy_pipeline import resolve_model

    if args.workers < 0:
        raise UsageError("--workers must be >= 0 (0: one per core)")
    if args.min_changed_chars < 0:
        raise UsageError("--min-changed-chars must be >= 0")
    options = probes_cli.probe_options(args)
    if args.ssm and not args.dry_run:
        resolve_model(args.spacy_model)
    return options


def run(args: argparse.Namespace) -> int:
    options = _check(args)
    args.workers = args.workers or os.cpu_count() or 1
    found = find_dumps(args.dumps, args.max_date_gap)
    _say(f"{args.dumps}: {_found(found)}")
    stages = plan(args.data, found.snapshots, ssm=args.ssm)
    started, built, skipped = time.perf_counter(), 0, 0
    for number, stage in enumerate(stages, start=1):
        head = f"[{number}/{len(stages)}] {stage.title}"
        stale = stage.stale() if stage.complete and not args.rebuild else None
        if stage.complete and not args.rebuild and stale is None:
            skipped += 1
            _say(f"{head}: complete, skipped ({stage.folder})")
            continue
        why = f"stale ({stale}), " if stale else ""
        if args.dry_run:
            _say(f"{head}: {why}to build ({stage.folder})")
            continue
        stage_started = time.perf_counter()
        with claimed_output(stage.folder, f"tw-jax build ({stage.kind})", _inputs(stage)):
            how, stats = _run_stage(args, stage, options)
        built += 1
        _say(f"{head}: {why}built{' ' + how if how else ''} in "
             f"{time.perf_counter() - stage_started:.1f} s: {_figures(stage, stats)} "
             f"({stage.folder})")
    if not args.dry_run:
        _say(f"{built} stages built, {skipped} complete, in {time.perf_counter() - started:.1f} "
             f"s: {args.data}")
    sys.stdout.flush()
    return 0
