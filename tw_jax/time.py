"""Time in tw_jax: a snapshot is a dump's date, a period is (old snapshot, new snapshot).

Every other module asks this one: nothing else parses, formats or orders a month
(``tests/test_time_module.py`` fails on a month regular expression or slice elsewhere).

A :class:`Snapshot` is the day of a dump, as Wikimedia names its dumps
(``enwiki-20241201-pages-articles-multistream.xml.bz2``, ``wikidata-20241202-all.json.bz2``;
Wikipedia is dumped on the 1st and the 20th of each month). A month ``2024-12`` means its first
day. A :class:`Period` is what changed from one snapshot to a later one: a month, or the 19 days
from the 1st to the 20th. Periods order by date, and a period *follows* another when it starts
at the snapshot the other ends at, which is what a lifelong chain is.

How they are spelled, one way per use:

==============  ==========================  ================================================
use             snapshot                    period
==============  ==========================  ================================================
folders,        ``2024-12``, ``2024-02-20``  ``2024-12_2025-01``, ``2024-02_2024-02-20``
results rows    (:attr:`Snapshot.name`)     (:attr:`Period.name`)
task names,     ``202412``, ``20240220``    ``202412_202501`` (:attr:`Period.token`):
TFDS configs    (:attr:`Snapshot.token`)    ``twiki_diffset_202412_202501_ssm``
people          ``2024-12``                 ``2024-12→2025-01`` (:attr:`Period.label`)
dump files      ``20241201``                -
==============  ==========================  ================================================

**The 2021 layout**, read forever: TemporalWiki's release and every data folder, task name,
results file and gin file written before years existed name a month by two digits (``08``) and
a period by four (``0809``). They are one spelling of the same type: a two-digit month is one
of the twelve months from TemporalWiki's first dump (2021-08) on: ``08``-``12`` are 2021,
``01``-``07`` are 2022 (so ``1112, 1201, 0102`` is a chain in that order); ``00`` is the month
before, 2021-07 (the ``D_0`` of ``tw-jax ckl phases``, whose phases are the pseudo-periods
``0001, 0102, ...``). A period ``AABB`` runs from ``AA`` to the first ``BB`` after it. A
snapshot or period read in this spelling keeps it (``Snapshot.legacy``), so a 2021 folder's
tasks, tables and figures keep their names (``twiki_diffset_0809_ssm``, ``0809 Up``), and it
equals the same dates spelled with years. The 2021 benchmark's own dumps (the first of
2021-08 … 2021-12) are spelled this way when a build holds nothing else
(:func:`benchmark_spelling`), so the sample world and the demo at their default start write
the 2021 layout they always wrote.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace


class TimeError(ValueError):
    """A snapshot, period or year that cannot be read or does not fit; says what was expected."""


# --- snapshots -----------------------------------------------------------------------------

# The 2021 layout: two-digit months 08..12 are 2021, 01..07 are 2022, 00 is 2021-07.
LEGACY_START = _dt.date(2021, 8, 1)  # TemporalWiki's first dump, enwiki-20210801
LEGACY_BEFORE = "00"
# The dumps of the 2021 benchmark (TemporalWiki: 20210801 ... 20211201).
BENCHMARK_2021 = tuple(_dt.date(2021, month, 1) for month in range(8, 13))

_ISO = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")
_COMPACT = re.compile(r"^(\d{4})(\d{2})(\d{2})?$")
_LEGACY_MONTH = re.compile(r"^(\d{2})$")
_LEGACY_PERIOD = re.compile(r"^(\d{2})(\d{2})$")
# A Wikimedia dump's date in its file name: enwiki-20241201-pages-articles..., wikidata-20241202-all...
_DUMP_DATE = re.compile(r"(?<![0-9])((?:19|20)\d{2})(\d{2})(\d{2})(?![0-9])")
_YEAR = re.compile(r"^\s*(-?\d+)\s*$")
_YEARS = re.compile(r"^\s*(-?\d+)\s*(?:(?:-|\.\.|:)\s*(-?\d+)\s*)?$")
# A Wikidata time value: +2021-08-01T00:00:00Z (year, month and day 00 when unknown).
_WIKIDATA_TIME = re.compile(r"^([+-]?)(\d+)-(\d\d)-(\d\d)T")

SNAPSHOT_FORMS = "YYYY-MM, YYYY-MM-DD, YYYYMM, YYYYMMDD or a 2021 month MM"
PERIOD_FORMS = ("OLD_NEW (2024-12_2025-01, 202412_202501, 2024-02_2024-02-20) or a 2021 pair "
                "MMMM (0809)")


def _date(year: int, month: int, day: int, text: str) -> _dt.date:
    try:
        return _dt.date(year, month, day)
    except ValueError as error:
        raise TimeError(f"{text!r} is not a date ({error})") from None


def _legacy_date(two_digits: str) -> _dt.date:
    number = int(two_digits)
    if two_digits == LEGACY_BEFORE:
        return _dt.date(2021, 7, 1)
    if not 1 <= number <= 12:
        raise TimeError(f"{two_digits!r} is not a month of the 2021 layout (01-12, or 00)")
    return _dt.date(2021 if number >= LEGACY_START.month else 2022, number, 1)


@dataclass(frozen=True, order=True)
class Snapshot:
    """The day a dump was taken. ``legacy``: its two-digit name when it was read in (or
    written for) the 2021 layout; it is a spelling, not part of what the snapshot is."""

    date: _dt.date
    legacy: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        """``2024-12``, ``2024-12-20``, ``202412``, ``20241220`` or a 2021 month ``08``."""
        text = str(text).strip()
        if match := _LEGACY_MONTH.match(text):
            return cls(_legacy_date(match.group(1)), legacy=text)
        match = _ISO.match(text) or _COMPACT.match(text)
        if match is None:
            raise TimeError(f"{text!r} is not a snapshot ({SNAPSHOT_FORMS})")
        year, month, day = match.groups()
        return cls(_date(int(year), int(month), int(day or 1), text))

    @classmethod
    def month(cls, year: int, month: int) -> Snapshot:
        """The first day of a month."""
        return cls(_date(year, month, 1, f"{year}-{month}"))

    @classmethod
    def of_dump(cls, name: str) -> Snapshot | None:
        """The date in a Wikimedia dump's file name (``enwiki-20241201-pages-articles.xml.bz2``,
        ``wikidata-20241202-all.json.bz2``); None when the name has none."""
        match = _DUMP_DATE.search(str(name).rsplit("/", 1)[-1])
        if match is None:
            return None
        year, month, day = (int(g) for g in match.groups())
        try:
            return cls(_dt.date(year, month, day))
        except ValueError:
            return None

    @property
    def iso(self) -> str:
        """``2024-12`` (the first of a month) or ``2024-12-20``."""
        day = "" if self.date.day == 1 else f"-{self.date.day:02d}"
        return f"{self.date.year:04d}-{self.date.month:02d}{day}"

    @property
    def compact(self) -> str:
        """``202412`` or ``20241220``: the form inside task names and TFDS configs."""
        return self.iso.replace("-", "")

    @property
    def dump(self) -> str:
        """``20241201``: how Wikimedia names the dump of this day."""
        return f"{self.date.year:04d}{self.date.month:02d}{self.date.day:02d}"

    @property
    def name(self) -> str:
        """The folder and results form: ``2024-12`` (the 2021 layout: ``08``)."""
        return self.legacy or self.iso

    @property
    def token(self) -> str:
        """The task-name form: ``202412`` (the 2021 layout: ``08``)."""
        return self.legacy or self.compact

    @property
    def label(self) -> str:
        """What a person reads: ``2024-12`` (the 2021 layout keeps ``08``)."""
        return self.name

    @property
    def long_name(self) -> str:
        """``August 2021`` (``20 February 2024`` for a day other than the first), as prompts and
        articles name a snapshot."""
        month = f"{calendar.month_name[self.date.month]} {self.date.year}"
        return month if self.date.day == 1 else f"{self.date.day} {month}"

    def in_2021_layout(self) -> Snapshot:
        """This snapshot spelled as the 2021 layout spells it (``08``); :class:`TimeError` when
        it has no such name (not the first of a month from 2021-07 to 2022-07)."""
        for two in (LEGACY_BEFORE, *(f"{m:02d}" for m in range(1, 13))):
            if _legacy_date(two) == self.date:
                return replace(self, legacy=two)
        raise TimeError(f"{self.iso} has no name in the 2021 layout (2021-07 ... 2022-07)")

    def dated(self) -> Snapshot:
        """This snapshot spelled with its year."""
        return replace(self, legacy=None)

    def plus_months(self, months: int) -> Snapshot:
        """The same day ``months`` later (the first of a month stays the first), spelled with
        its year."""
        index = self.date.year * 12 + self.date.month - 1 + months
        year, month = divmod(index, 12)
        day = min(self.date.day, calendar.monthrange(year, month + 1)[1])
        return Snapshot(_dt.date(year, month + 1, day))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Snapshot({self.name!r})"


def benchmark_spelling(snapshots: Sequence[Snapshot]) -> list[Snapshot]:
    """``snapshots`` as a build names them: in the 2021 layout when every one is a dump of the
    2021 benchmark (the first of 2021-08 … 2021-12), so its folders, tasks and tables are the
    ones TemporalWiki's users know (``0809``); otherwise with years."""
    if snapshots and all(s.date in BENCHMARK_2021 for s in snapshots):
        return [s.in_2021_layout() for s in snapshots]
    return [s.dated() for s in snapshots]


# --- periods -------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Period:
    """What changed from the ``old`` snapshot to the ``new`` one (``old`` before ``new``)."""

    old: Snapshot
    new: Snapshot

    def __post_init__(self) -> None:
        if not self.old < self.new:
            raise TimeError(f"a period runs forward: {self.old.iso} is not before {self.new.iso}")

    @classmethod
    def parse(cls, text: str) -> Period:
        """``2024-12_2025-01``, ``202412_202501``, ``2024-02_2024-02-20`` or a 2021 pair
        ``0809``."""
        text = str(text).strip()
        if match := _LEGACY_PERIOD.match(text):
            old = Snapshot(_legacy_date(match.group(1)), legacy=match.group(1))
            return cls(old, _legacy_after(old, match.group(2), text))
        parts = text.split("_")
        if len(parts) != 2 or not all(parts):
            raise TimeError(f"{text!r} is not a period ({PERIOD_FORMS})")
        try:
            old, new = (Snapshot.parse(p) for p in parts)
        except TimeError:
            raise TimeError(f"{text!r} is not a period ({PERIOD_FORMS})") from None
        if old.legacy or new.legacy:
            raise TimeError(f"{text!r} is not a period ({PERIOD_FORMS})")
        if not old < new:
            raise TimeError(f"{text!r}: the old snapshot {old.iso} is not before the new one "
                            f"{new.iso}")
        return cls(old, new)

    @property
    def legacy(self) -> bool:
        """Spelled as the 2021 layout spells it (``0809``)."""
        return bool(self.old.legacy and self.new.legacy)

    @property
    def name(self) -> str:
        """The folder and results form: ``2024-12_2025-01`` (the 2021 layout: ``0809``)."""
        if self.legacy:
            return f"{self.old.legacy}{self.new.legacy}"
        return f"{self.old.iso}_{self.new.iso}"

    @property
    def token(self) -> str:
        """The task-name and TFDS-config form: ``202412_202501`` (2021: ``0809``)."""
        if self.legacy:
            return self.name
        return f"{self.old.compact}_{self.new.compact}"

    @property
    def label(self) -> str:
        """What a person reads in tables, figures and logs: ``2024-12→2025-01`` (the 2021
        layout keeps ``0809``)."""
        return self.name if self.legacy else f"{self.old.iso}→{self.new.iso}"

    @property
    def days(self) -> int:
        return (self.new.date - self.old.date).days

    def follows(self, previous: Period) -> bool:
        """Whether this period starts where ``previous`` ends (the next update of a chain)."""
        return self.old == previous.new

    def in_2021_layout(self) -> Period:
        """This period spelled as the 2021 layout spells it (``0809``)."""
        return Period(self.old.in_2021_layout(), self.new.in_2021_layout())

    def dated(self) -> Period:
        return Period(self.old.dated(), self.new.dated())

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Period({self.name!r})"


def _legacy_after(old: Snapshot, two_digits: str, text: str) -> Snapshot:
    """The first month ``two_digits`` after ``old`` (the new end of a 2021 pair)."""
    month = int(two_digits)
    if not 1 <= month <= 12:
        raise TimeError(f"{text!r}: {two_digits!r} is not a month of the 2021 layout")
    year = old.date.year if month > old.date.month else old.date.year + 1
    return Snapshot(_dt.date(year, month, 1), legacy=two_digits)


def period_named(name: str) -> Period | None:
    """The period a folder named ``name`` holds: ``name`` must be the period's own name
    (:attr:`Period.name`: ``2024-12_2025-01`` or ``0809``), so ``vocab`` or ``202412_202501``
    (a task-name token) are not period folders."""
    try:
        period = Period.parse(name)
    except TimeError:
        return None
    return period if period.name == name else None


def snapshot_named(name: str) -> Snapshot | None:
    """The snapshot a folder named ``name`` holds (its own name: ``2024-12``, ``08``)."""
    try:
        snapshot = Snapshot.parse(name)
    except TimeError:
        return None
    return snapshot if snapshot.name == name else None


def periods_between(snapshots: Sequence[Snapshot]) -> list[Period]:
    """The consecutive periods of snapshots in date order (``a, b, c`` → ``a_b, b_c``)."""
    ordered = sorted(snapshots)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if a == b:
            raise TimeError(f"snapshot {a.iso} is given twice")
    return [Period(a, b) for a, b in zip(ordered, ordered[1:], strict=False)]


def check_chain(periods: Sequence[Period]) -> list[Period]:
    """``periods`` as given, each following the one before it (a lifelong chain)."""
    for before, after in zip(periods, periods[1:], strict=False):
        if not after.follows(before):
            raise TimeError(
                f"{before.label} then {after.label}: a chain continues from the snapshot the "
                f"previous period ends at ({before.new.label})")
    return list(periods)


def parse_chain(items: Iterable[str]) -> list[Period]:
    """A chain from the command line: periods (``0809,0910`` or
    ``2024-12_2025-01,2025-01_2025-02``), or two or more snapshots (``2024-12,2025-01,2025-02``:
    the periods between consecutive ones)."""
    texts = [t.strip() for t in items if str(t).strip()]
    if not texts:
        raise TimeError("no periods given (e.g. 0809,0910 or 2024-12,2025-01,2025-02)")
    periods: list[Period] = []
    for text in texts:
        try:
            periods.append(Period.parse(text))
        except TimeError as error:
            periods = []
            first_error = error
            break
    else:
        return check_chain(periods)
    try:
        snapshots = [Snapshot.parse(t) for t in texts]
    except TimeError:
        raise first_error from None
    if len(snapshots) < 2:
        raise TimeError(f"{texts[0]!r}: one snapshot is no period; give two or more "
                        "(2024-12,2025-01) or periods (2024-12_2025-01)")
    if list(snapshots) != sorted(snapshots):
        raise TimeError(f"snapshots {', '.join(texts)} are not in date order")
    return check_chain(periods_between(snapshots))


# --- the typed sentinels of results rows ---------------------------------------------------


class Mark(enum.Enum):
    """What stands where a results row has no period. Marks order with periods: ``base`` before
    every period (a model before any update), ``-`` after them, so rows sort by time."""

    BASE = "base"  # trained through nothing: a model before any update (INITIAL, phase 0)
    NO_MONTH = "-"  # a number tied to no evaluation set (training time, ECBD's cells)

    def __str__(self) -> str:
        return self.value

    def _rank(self, other: object) -> tuple[int, int] | None:
        mine = 0 if self is Mark.BASE else 2
        if isinstance(other, Mark):
            return mine, 0 if other is Mark.BASE else 2
        if isinstance(other, Period):
            return mine, 1
        return None

    def __lt__(self, other: object) -> bool:
        ranks = self._rank(other)
        return NotImplemented if ranks is None else ranks[0] < ranks[1]

    def __le__(self, other: object) -> bool:
        ranks = self._rank(other)
        return NotImplemented if ranks is None else ranks[0] <= ranks[1]

    def __gt__(self, other: object) -> bool:
        ranks = self._rank(other)
        return NotImplemented if ranks is None else ranks[0] > ranks[1]

    def __ge__(self, other: object) -> bool:
        ranks = self._rank(other)
        return NotImplemented if ranks is None else ranks[0] >= ranks[1]


BASE = Mark.BASE
NO_MONTH = Mark.NO_MONTH
Trained = Period | Mark
Evaluated = Period | Mark


def _period_or_mark(text: str | Period | Mark, mark: Mark) -> Period | Mark:
    if isinstance(text, Period) or text is mark:
        return text
    if text == mark.value:
        return mark
    text = str(text)
    try:
        return Period.parse(text)
    except TimeError as error:
        if "_" in text or (len(text) == 4 and text.isdigit()):
            raise  # spelled as a period, so what is wrong with it is the period's error
        raise TimeError(f"{text!r} is neither a period ({PERIOD_FORMS}) nor "
                        f"{mark.value!r}") from error


def parse_trained(text: str | Trained) -> Trained:
    """``base`` or a period (a results row's ``trained_through``)."""
    return _period_or_mark(text, BASE)


def parse_evaluated(text: str | Evaluated) -> Evaluated:
    """``-`` or a period (a results row's ``eval_month``)."""
    return _period_or_mark(text, NO_MONTH)


def label(value: Trained) -> str:
    """What a person reads for a period or a mark (``base``, ``-``)."""
    return value.label if isinstance(value, Period) else value.value


# --- the names inside TemporalWiki's release ----------------------------------------------

_RELEASE_DAY = re.compile(r"^(\d{2})(\d{2})$")  # TWiki_Probes/0801-0901_*.csv: MMDD of 2021
_FOLDER_MONTHS = (  # Wikipedia_Full/<folder>/part*.csv: 08, wikipedia_08, 202108 or 0801
    (re.compile(r"(?<!\d)(\d{2})(?!\d)"), None),
    (re.compile(r"(?<!\d)(20\d{2})(\d{2})(?!\d)"), 2),
    (re.compile(r"(?<!\d)(\d{2})\d{2}(?!\d)"), 1),
)


def release_probe_period(old: str, new: str) -> Period:
    """The period of a released probes file ``MMDD-MMDD_<category>.csv`` (``0801-0901`` is
    ``0809``): the first of two months of the 2021 layout."""
    months = []
    for text in (old, new):
        match = _RELEASE_DAY.match(text)
        if match is None or match.group(2) != "01":
            raise TimeError(f"{text!r} is not the first of a month as MMDD (0801)")
        months.append(match.group(1))
    return Period.parse("".join(months))


def release_full_snapshot(folders: Sequence[str]) -> Snapshot | None:
    """The snapshot of a released ``Wikipedia_Full`` part from the folders above it: the first
    that names a month as two digits (``08``, ``wikipedia_08``), else as ``YYYYMM``, else as
    ``MMDD``; spelled in the 2021 layout. None when none does."""
    for pattern, group in _FOLDER_MONTHS:
        for folder in folders:
            match = pattern.search(folder)
            if match is None:
                continue
            two = match.group(group) if group else match.group(1)
            if 1 <= int(two) <= 12:
                return Snapshot.parse(two)
    return None


# --- years (Entity Cloze By Date's subsets) and Wikidata's time values ---------------------


def is_year(text: str) -> bool:
    """Whether ``text`` is a year (``2017``, ``-300``)."""
    return _YEAR.match(str(text)) is not None


def parse_year(text: str) -> int:
    match = _YEAR.match(str(text))
    if match is None:
        raise TimeError(f"{text!r} is not a year")
    return int(match.group(1))


def parse_years(text: str) -> tuple[int, int] | None:
    """``2017`` → (2017, 2017); ``2017-2019``, ``2017..2019``, ``2017:2019`` → (2017, 2019);
    None when ``text`` is not a year or a range of years."""
    match = _YEARS.fullmatch(str(text))
    if match is None:
        return None
    first = int(match.group(1))
    return first, int(match.group(2)) if match.group(2) is not None else first


def wikidata_date(value: str) -> tuple[int, int, int] | None:
    """(year, month, day) of a Wikidata time value (``+2021-08-01T00:00:00Z``; month and day 0
    when the value's precision has none); None when it is not one."""
    match = _WIKIDATA_TIME.match(str(value))
    if match is None:
        return None
    sign, year, month, day = match.groups()
    return (-int(year) if sign == "-" else int(year)), int(month), int(day)
