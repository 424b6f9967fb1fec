"""Where ``tw-jax evolvingqa`` puts things: one folder that is also a TemporalWiki data folder.

::

    OUT/<MMMM>/diffset/      the Changed set: the DiffSet stage with --min-changed-chars 500
    OUT/<MMMM>/ssm/          its salient-span-masked T5 corpus (diffset.tfrecord-*), which
                             tw_jax.tasks registers as twiki_diffset_<MMMM>_ssm
    OUT/<MMMM>/evolvingqa/   new.jsonl, edited.jsonl, stats.json: QA-generation inputs
    OUT/evolvingqa/          unchanged.jsonl, stats.json (the window's unchanged articles),
                             build.json (months, pairs, options; written last)
    OUT/qa/                  the QA sets in the released CSV format (``tw-jax evolvingqa
                             generate``): unchanged_train.csv (QA fine-tuning),
                             unchanged_eval.csv, new_<MMMM>.csv, edited_<MMMM>.csv

Months are snapshots (:class:`tw_jax.time.Snapshot`, written ``YYYY-MM``, or ``YYYY-MM-DD`` for
a dump of a day other than the first) so prompts can say "written in August 2021"; a month pair
is a period named as everywhere in tw_jax (:attr:`tw_jax.time.Period.name`: ``2023-11_2023-12``
across any window, and ``0809`` for the 2021 benchmark's months, which every build of them
wrote). A build folder's pairs are the names its ``build.json`` and folders hold, never
recomputed, so a build written before periods had years (``0102`` for 2023-01 → 2023-02)
reads as it was written. ``OUT`` is a local folder or a
``gs://`` URL: the folders below are strings joined by :func:`tw_jax.io.paths.join`, never
:mod:`pathlib` paths (which would turn ``gs://b/x`` into the local ``gs:/b/x``).
"""

from __future__ import annotations

import os

from tw_jax.io import paths
from tw_jax.io.paths import PathLike
from tw_jax.time import Snapshot, TimeError, benchmark_spelling, period_named, periods_between

EXTRACTION = "evolvingqa"
# The gin file each training stage starts from (the paper's settings): "qa" built the reader
# that `tw-jax evolvingqa eval` scores, so evaluation parses it first too.
STAGE_GIN = {"continual": "evolvingqa.gin", "qa": "evolvingqa_qa.gin"}
QA = "qa"
BUILD_FILE = "build.json"
STATS_FILE = "stats.json"
UNCHANGED_PASSAGES = "unchanged.jsonl"
NEW_PASSAGES = "new.jsonl"
EDITED_PAIRS = "edited.jsonl"
UNCHANGED_TRAIN = "unchanged_train.csv"
UNCHANGED_EVAL = "unchanged_eval.csv"


class LayoutError(ValueError):
    """Months or folders that do not fit the layout."""


def check_month(month: str) -> str:
    """A month as the build writes it (``2021-08``; ``2024-02-20`` for a day other than the
    first)."""
    try:
        snapshot = Snapshot.parse(month)
    except TimeError:
        snapshot = None
    if snapshot is None or snapshot.legacy is not None:
        raise LayoutError(f"month {month!r} is not YYYY-MM (e.g. 2021-08) or YYYY-MM-DD")
    return snapshot.iso


def month_of_dump(path: str | os.PathLike[str]) -> str:
    """``2021-08`` from a dump name such as ``enwiki-20210801-pages-articles.xml.bz2``."""
    found = Snapshot.of_dump(paths.as_path(path).name)
    if found is None:
        raise LayoutError(f"cannot tell the month of {path} from its name; pass --months")
    return found.iso


def month_name(month: str) -> str:
    """``2021-08`` → ``August 2021``, as the paper's prompts name snapshots."""
    return Snapshot.parse(check_month(month)).long_name


def is_pair(name: str) -> bool:
    """Whether a build folder's child named ``name`` is a month pair's folder."""
    return period_named(name) is not None


def pairs_of(months: list[str]) -> list[tuple[str, str, str]]:
    """(old month, new month, pair name) of consecutive months, checked to increase; the pairs
    named as :func:`tw_jax.time.benchmark_spelling` names them."""
    months = [check_month(m) for m in months]
    if len(months) < 2:
        raise LayoutError("EvolvingQA needs at least two snapshots (one month pair)")
    snapshots = [Snapshot.parse(m) for m in months]
    for old, new in zip(snapshots, snapshots[1:], strict=False):
        if not old < new:
            raise LayoutError(f"months must increase: {old.iso} then {new.iso}")
    periods = periods_between(benchmark_spelling(snapshots))
    return [(p.old.iso, p.new.iso, p.name) for p in periods]


def diffset_dir(out: PathLike, pair: str) -> str:
    return paths.join(out, pair, "diffset")


def ssm_dir(out: PathLike, pair: str) -> str:
    return paths.join(out, pair, "ssm")


def extraction_dir(out: PathLike, pair: str) -> str:
    return paths.join(out, pair, EXTRACTION)


def window_dir(out: PathLike) -> str:
    return paths.join(out, EXTRACTION)


def qa_dir(out: PathLike) -> str:
    return paths.join(out, QA)


def new_qa(pair: str) -> str:
    return f"new_{pair}.csv"


def edited_qa(pair: str) -> str:
    return f"edited_{pair}.csv"
