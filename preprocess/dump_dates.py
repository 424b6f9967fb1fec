"""The dates of dumps, read from their Wikimedia file names, and the data folders they name.

Wikimedia names every dump by the day it was taken (``enwiki-20241201-pages-articles-
multistream.xml.bz2``, ``wikidata-20241202-all.json.bz2``; :meth:`tw_jax.time.Snapshot.of_dump`).
A MediaWiki dump's ``<siteinfo>`` holds no such date (sitename, dbname, base, generator, case,
namespaces), so the file name is the only record of it: a dump renamed without its date needs
the period or snapshot given by hand (``--period``, ``--snapshot``).

Wikipedia is dumped on the 1st and the 20th of a month and Wikidata's JSON weekly, so the
Wikidata dump of a snapshot is the one at most a few days from it (:data:`DEFAULT_MAX_DATE_GAP`).
``tw-jax diffset``, ``tw-jax probes`` and ``tw-jax build`` check and name through this module, so
the three say the same thing about the same dumps and write the same folders.
"""

from __future__ import annotations

import contextlib
import os

from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.time import Period, Snapshot, TimeError, benchmark_spelling

DEFAULT_MAX_DATE_GAP = 7  # days: Wikidata's JSON dumps are weekly

NO_DATE = ("has no date in its name (Wikimedia names dumps enwiki-YYYYMMDD-pages-articles..., "
           "wikidata-YYYYMMDD-all.json...; a dump's <siteinfo> holds none)")


def dump_date(path: str | os.PathLike[str]) -> Snapshot | None:
    """The date in a dump's file (or folder) name, None when it has none."""
    return Snapshot.of_dump(os.path.basename(os.fspath(path).rstrip("/")))


def check_order(old: str | None, new: str | None, what: str = "dump") -> None:
    """An old dump whose date is not before the new one's is a one-line error; names without
    dates (or a missing dump) are not checked."""
    if old is None or new is None:
        return
    old_date, new_date = dump_date(old), dump_date(new)
    if old_date is not None and new_date is not None and not old_date < new_date:
        raise UsageError(f"the old {what} {old} ({old_date.date.isoformat()}) is not before the "
                         f"new one {new} ({new_date.date.isoformat()}): give the earlier dump "
                         "as --old")


def check_same_snapshot(wikidata: str, wikipedia: str | None,
                        max_gap: int = DEFAULT_MAX_DATE_GAP) -> None:
    """A Wikidata dump more than ``max_gap`` days from its Wikipedia dump is a one-line error:
    the facts would be checked against articles of another time."""
    if wikipedia is None:
        return
    data_date, wiki_date = dump_date(wikidata), dump_date(wikipedia)
    if data_date is None or wiki_date is None:
        return
    gap = abs((data_date.date - wiki_date.date).days)
    if gap > max_gap:
        raise UsageError(
            f"the Wikidata dump {wikidata} ({data_date.date.isoformat()}) is {gap} days from the "
            f"Wikipedia dump {wikipedia} ({wiki_date.date.isoformat()}), more than "
            f"--max-date-gap {max_gap}: give the dumps of one snapshot")


def period_of_dumps(old: str, new: str) -> Period | None:
    """The period between two dumps by their names' dates, spelled as a build spells it
    (:func:`tw_jax.time.benchmark_spelling`: the 2021 benchmark's dumps give ``0809``); None
    when a name has no date."""
    old_date, new_date = dump_date(old), dump_date(new)
    if old_date is None or new_date is None:
        return None
    check_order(old, new)
    return Period(*benchmark_spelling([old_date, new_date]))


def snapshot_of_dump(path: str) -> Snapshot | None:
    """The snapshot a dump's name dates, spelled as a build spells it."""
    date = dump_date(path)
    return None if date is None else benchmark_spelling([date])[0]


def _spellings(when: Period | Snapshot) -> list[str]:
    """The folder names ``when`` may have: as given, with years, in the 2021 layout."""
    names = [when.name, when.dated().name]
    with contextlib.suppress(TimeError):
        names.append(when.in_2021_layout().name)
    return list(dict.fromkeys(names))


def stage_folder(data: str, when: Period | Snapshot, stage: str) -> str:
    """``DATA/<when.name>/<stage>``, or the folder of the same dates in another spelling when
    DATA already has one (``0809/`` for ``2021-08_2021-09``), so one period never gets two
    folders (which the tasks' discovery refuses)."""
    names = _spellings(when)
    found = next((n for n in names if paths.isdir(paths.join(data, n))), names[0])
    return paths.join(data, found, stage)
