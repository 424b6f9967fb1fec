"""The dumps of a folder, found by their Wikimedia names and paired into snapshots.

Wikimedia names a dump by its wiki, its day and its content: ``enwiki-20241201-pages-articles-
multistream.xml.bz2`` (Wikipedia, on the 1st and the 20th of a month), ``wikidata-20241202-
all.json.bz2`` (Wikidata's JSON, weekly). A snapshot is a Wikipedia dump and the Wikidata dump
nearest its day, at most ``max_gap`` days away. What cannot be placed is an error naming the
file, not a smaller benchmark: a dump with no date in its name, a Wikipedia dump split into
parts (``…multistream1.xml-p1p41242.bz2``), a Wikipedia day with no Wikidata dump near it.
Copies of one dump in other compressions are counted and the preferred one is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.preprocess.dump_dates import DEFAULT_MAX_DATE_GAP, NO_DATE, dump_date
from tw_jax.time import Snapshot

# Most preferred first: a multistream dump is read in parallel through its index.
_WIKIPEDIA_ENDINGS = ("-multistream.xml.bz2", ".xml.bz2", "-multistream.xml", ".xml.gz", ".xml")
_WIKIDATA_ENDINGS = ("-all.json.bz2", "-all.json.gz", "-all.json")
_INDEX_MARK = "-multistream-index"  # the index beside a multistream dump: read with it


@dataclass(frozen=True)
class SnapshotDumps:
    """One snapshot's dumps: Wikipedia's of ``snapshot`` and the Wikidata dump paired with it."""

    snapshot: Snapshot
    wikipedia: str
    wikidata: str


@dataclass
class FoundDumps:
    """What a folder holds: the snapshots in date order, and what was not read and why."""

    snapshots: list[SnapshotDumps]
    copies: list[str] = field(default_factory=list)  # another compression of a read dump
    unpaired_wikidata: list[str] = field(default_factory=list)  # no Wikipedia dump near it


def _rank(name: str, endings: tuple[str, ...]) -> int | None:
    return next((i for i, end in enumerate(endings) if name.endswith(end)), None)


def _kind(name: str) -> str | None:
    """``wikipedia``, ``wikidata``, ``part`` (a piece of a split Wikipedia dump) or None."""
    if "-pages-articles" in name and _INDEX_MARK not in name:
        return "wikipedia" if _rank(name, _WIKIPEDIA_ENDINGS) is not None else "part"
    if _rank(name, _WIKIDATA_ENDINGS) is not None:  # wikidata-…, or Wikimedia's latest-all…
        return "wikidata"
    return None


def _files(folder: str) -> list[str]:
    """The files of ``folder`` and of its subfolders one level down (``wikipedia/``,
    ``wikidata/``, as the sample world and many mirrors lay dumps out)."""
    found = paths.glob(paths.join(folder, "*")) + paths.glob(paths.join(folder, "*", "*"))
    return sorted(p for p in found if not paths.isdir(p))


def _by_date(files: list[str], endings: tuple[str, ...],
             copies: list[str]) -> dict[Snapshot, str]:
    """The preferred file of each date; the others go to ``copies``."""
    chosen: dict[Snapshot, str] = {}
    for path in sorted(files, key=lambda p: _rank(os.path.basename(p), endings)):
        date = dump_date(path)
        assert date is not None  # undated files were refused before
        if date in chosen:
            copies.append(path)
        else:
            chosen[date] = path
    return chosen


def find_dumps(folder: str, max_gap: int = DEFAULT_MAX_DATE_GAP) -> FoundDumps:
    """The snapshots whose dumps ``folder`` holds, oldest first (at least two)."""
    kinds: dict[str, list[str]] = {"wikipedia": [], "wikidata": [], "part": []}
    for path in _files(folder):
        kind = _kind(os.path.basename(path))
        if kind is None:
            continue
        if dump_date(path) is None:
            raise UsageError(f"{path} {NO_DATE}: rename it with its dump's date")
        kinds[kind].append(path)
    if kinds["part"]:
        raise UsageError(f"{kinds['part'][0]} is one part of a split Wikipedia dump "
                         f"({len(kinds['part'])} such files): give the one-file dump "
                         "(…-pages-articles-multistream.xml.bz2) of that day")
    copies: list[str] = []
    wikipedia = _by_date(kinds["wikipedia"], _WIKIPEDIA_ENDINGS, copies)
    wikidata = _by_date(kinds["wikidata"], _WIKIDATA_ENDINGS, copies)
    if len(wikipedia) < 2:
        raise UsageError(f"{folder}: {len(wikipedia)} Wikipedia dump(s) found, a build needs "
                         "two days at least (enwiki-YYYYMMDD-pages-articles*.xml[.bz2])")
    snapshots, used = [], set()
    for day in sorted(wikipedia):
        gaps = {d: abs((d.date - day.date).days) for d in wikidata}
        near = sorted((d for d in wikidata if d not in used), key=lambda d: (gaps[d], d.date))
        if not near or gaps[near[0]] > max_gap:
            nearest = (f"the nearest unused is {wikidata[near[0]]}, {gaps[near[0]]} days away"
                       if near else "there are none left")
            raise UsageError(f"{wikipedia[day]}: no Wikidata dump within --max-date-gap "
                             f"{max_gap} days of {day.date.isoformat()} ({nearest}); add "
                             "wikidata-YYYYMMDD-all.json.bz2 of that week")
        used.add(near[0])
        snapshots.append(SnapshotDumps(day, wikipedia[day], wikidata[near[0]]))
    unpaired = [path for date, path in sorted(wikidata.items()) if date not in used]
    return FoundDumps(snapshots, copies, unpaired)
