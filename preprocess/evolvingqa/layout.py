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

Month pairs are named ``MMMM`` (old month, new month) as everywhere in tw_jax; months are
``YYYY-MM`` so prompts can say "written in August 2021". ``OUT`` is a local folder or a
``gs://`` URL: the folders below are strings joined by :func:`tw_jax.io.paths.join`, never
:mod:`pathlib` paths (which would turn ``gs://b/x`` into the local ``gs:/b/x``).
"""

from __future__ import annotations

import calendar
import os
import re

from tw_jax.io import paths
from tw_jax.io.paths import PathLike

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

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_DUMP_DATE = re.compile(r"(?<!\d)(\d{4})(\d{2})\d{2}(?!\d)")


class LayoutError(ValueError):
    """Months or folders that do not fit the layout."""


def check_month(month: str) -> str:
    match = _MONTH.match(month.strip())
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise LayoutError(f"month {month!r} is not YYYY-MM (e.g. 2021-08)")
    return month.strip()


def month_of_dump(path: str | os.PathLike[str]) -> str:
    """``2021-08`` from a dump name such as ``enwiki-20210801-pages-articles.xml.bz2``."""
    match = _DUMP_DATE.search(paths.as_path(path).name)
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise LayoutError(f"cannot tell the month of {path} from its name; pass --months")
    return f"{match.group(1)}-{match.group(2)}"


def month_name(month: str) -> str:
    """``2021-08`` → ``August 2021``, as the paper's prompts name snapshots."""
    year, number = check_month(month).split("-")
    return f"{calendar.month_name[int(number)]} {year}"


def pair_name(old: str, new: str) -> str:
    return old[-2:] + new[-2:]


def pairs_of(months: list[str]) -> list[tuple[str, str, str]]:
    """(old month, new month, pair name) of consecutive months, checked to increase."""
    months = [check_month(m) for m in months]
    if len(months) < 2:
        raise LayoutError("EvolvingQA needs at least two snapshots (one month pair)")
    for old, new in zip(months, months[1:], strict=False):
        if new <= old:
            raise LayoutError(f"months must increase: {old} then {new}")
    names = [pair_name(o, n) for o, n in zip(months, months[1:], strict=False)]
    if len(set(names)) != len(names):
        raise LayoutError(f"month pairs {names} repeat; use a window of at most 12 months")
    return [(o, n, p) for (o, n), p in zip(zip(months, months[1:], strict=False), names,
                                          strict=True)]


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
