"""The sample world's calendar: the monthly snapshots it spans and how its files name them.

A world starts at the first of a month (``--start``, default 2021-08, TemporalWiki's first dump)
and has a snapshot on the first of each of ``months`` consecutive months (default 4). Its dumps
are named by :attr:`~tw_jax.time.Snapshot.dump` (``enwiki-20211101-pages-articles.xml.bz2``),
its per-month truth files by :attr:`~tw_jax.time.Snapshot.iso` (``articles-2021-11.jsonl``) and
its per-period ones by :attr:`~tw_jax.time.Period.name` as :func:`~tw_jax.time.benchmark_spelling`
spells the build: the default world keeps the 2021 layout (``diffset-0809.jsonl``), a world that
reaches past 2021-12 is dated (``diffset-2021-12_2022-01.jsonl``).

The generator's history (birth years, foundings, old revisions) is written against the default
world, which starts in 2021; :meth:`Span.year` moves such a year by as many years as this world
starts after 2021, so a world starting in 2030 has footballers born in the 2000s and the default
world keeps every byte it always had.
"""

from __future__ import annotations

from dataclasses import dataclass

from tw_jax.time import Period, Snapshot, TimeError, benchmark_spelling, periods_between

DEFAULT_START = Snapshot.month(2021, 8)
DEFAULT_MONTHS = 4
MIN_MONTHS = 2
# The years the generator writes are the default world's; it starts in this year.
DEFAULT_YEAR = DEFAULT_START.date.year
# The generator's oldest history (a city founded in 1100) must stay a positive year, and the
# last snapshot a date.
FIRST_YEAR, LAST_YEAR = 1000, 9000


class SpanError(ValueError):
    """A start or a number of months the sample world cannot have; says what it needs."""


@dataclass(frozen=True)
class Span:
    """``months`` monthly snapshots from ``start`` (the first of a month, spelled with its year)."""

    start: Snapshot = DEFAULT_START
    months: int = DEFAULT_MONTHS

    def __post_init__(self) -> None:
        if self.start.date.day != 1:
            raise SpanError(f"the sample world starts on the first of a month, not on "
                            f"{self.start.iso} (give YYYY-MM)")
        if not FIRST_YEAR <= self.start.date.year <= LAST_YEAR:
            raise SpanError(f"the sample world starts in a year from {FIRST_YEAR} to "
                            f"{LAST_YEAR}, not {self.start.date.year}")
        if isinstance(self.months, bool) or not isinstance(self.months, int) \
                or self.months < MIN_MONTHS:
            raise SpanError(f"the sample world spans at least {MIN_MONTHS} months (one period), "
                            f"not {self.months}")
        object.__setattr__(self, "start", self.start.dated())

    @classmethod
    def parse(cls, start: str, months: int | str = DEFAULT_MONTHS) -> Span:
        """A span from the command line's ``--start YYYY-MM`` and ``--months N``."""
        try:
            snapshot = Snapshot.parse(start)
        except TimeError as error:
            raise SpanError(f"--start {start}: {error}") from None
        if snapshot.legacy:
            raise SpanError(f"--start {start}: give the month with its year (YYYY-MM)")
        try:
            cls(snapshot, MIN_MONTHS)
        except SpanError as error:
            raise SpanError(f"--start {start}: {error}") from None
        try:
            return cls(snapshot, int(months))
        except ValueError as error:  # SpanError too
            reason = error if isinstance(error, SpanError) else "not a whole number of months"
            raise SpanError(f"--months {months}: {reason}") from None

    @property
    def snapshots(self) -> tuple[Snapshot, ...]:
        """The world's snapshots in order, spelled with their years."""
        return tuple(self.snapshot(i) for i in range(self.months))

    @property
    def spelled(self) -> list[Snapshot]:
        """The snapshots as the world's period names spell them (the 2021 layout for the
        benchmark's own months)."""
        return benchmark_spelling(self.snapshots)

    @property
    def periods(self) -> list[Period]:
        """The periods between consecutive snapshots, spelled as the world names them."""
        return periods_between(self.spelled)

    def snapshot(self, index: int) -> Snapshot:
        """The first of the month ``index`` months after the start (before it when negative)."""
        return self.start.plus_months(index)

    def year(self, default_year: int) -> int:
        """``default_year`` of the default world (which starts in 2021) in this world: as many
        years before or after this world's start year."""
        return default_year + self.start.date.year - DEFAULT_YEAR


DEFAULT_SPAN = Span()
