"""ODIE mining: Wikidata items with an origination date, as ECBD §2.2 describes.

An entity's origination date is the first of its *start time* (P580), *inception* (P571),
*point in time* (P585), *time of discovery or invention* (P575), *announcement date* (P6949) and
*introduced on* (P9448) main statements, taken in that order: the first property that has a
usable date gives it (the earliest of that property's values, "the earliest date the entity
could have appeared in any pretraining corpus"). Only main statements count: a person's club
membership qualified by P580 says when the membership started, not when the person appeared.

A date needs at least year precision (Wikidata precision 9) to index an entity by year; coarser
values (decades, centuries) are skipped and counted (``imprecise_date``) and the next value or
property is tried. Deprecated statements never reach this module (the reader drops them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from tw_jax.preprocess.dumps.wikidata import Entity, iter_entities
from tw_jax.preprocess.runners.accounting import Skips
from tw_jax.time import parse_years as years_of
from tw_jax.time import wikidata_date

# In the order their dates are preferred.
ORIGINATION_PROPERTIES: tuple[str, ...] = ("P580", "P571", "P585", "P575", "P6949", "P9448")
YEAR_PRECISION = 9


@dataclass(frozen=True, slots=True)
class OriginEntity:
    """An item with its origination date and the names its article may mention it by."""

    qid: str
    label: str
    aliases: tuple[str, ...]
    enwiki: str
    property: str  # which of ORIGINATION_PROPERTIES gave the date
    date: str  # Wikidata's time string, e.g. "+2019-07-01T00:00:00Z"
    precision: int
    year: int

    @property
    def subset(self) -> str:
        """The ECBD subset the entity belongs to: its origination year."""
        return str(self.year)


def _parse_time(value: str) -> tuple[int, int, int] | None:
    """(year, month, day) of a Wikidata time string (month/day 0 when unknown)."""
    return wikidata_date(value)


def origination(entity: Entity, skips: Skips | None = None) -> tuple[str, str, int, int] | None:
    """``(property, time, precision, year)`` of the entity's origination date, or None.

    Dates of coarser than year precision are counted in ``skips`` as ``imprecise_date``.
    """
    for prop in ORIGINATION_PROPERTIES:
        best: tuple[tuple[int, int, int], str, int] | None = None
        for claim in entity.claims:
            if claim.property != prop or claim.value[0] != "time":
                continue
            _, time, precision = claim.value
            parsed = _parse_time(time)
            if parsed is None:
                continue
            if precision < YEAR_PRECISION:
                if skips is not None:
                    skips.add("imprecise_date", f"{entity.id} {prop} {time} precision {precision}")
                continue
            if best is None or parsed < best[0]:
                best = (parsed, time, precision)
        if best is not None:
            return prop, best[1], best[2], best[0][0]
    return None


def parse_years(text: str | None) -> tuple[int, int] | None:
    """``"2017-2021"`` → (2017, 2021), ``"2019"`` → (2019, 2019), ``"all"``/None → None (any)."""
    if text is None or text.strip().lower() in ("", "all"):
        return None
    found = years_of(text)
    if found is None:
        raise ValueError(f"years {text!r}: expected YEAR, FIRST-LAST or 'all'")
    first, last = found
    if last < first:
        raise ValueError(f"years {text!r}: {last} is before {first}")
    return first, last


def iter_origin_entities(
    path: str | os.PathLike[str], skips: Skips, years: tuple[int, int] | None = None,
    dated_years: list[int] | None = None,
) -> Iterator[OriginEntity]:
    """The dump's items with an origination date in ``years`` (inclusive; None: any), an English
    label and an enwiki sitelink, in dump order. Items that have a date but fail a later
    condition are counted: ``year_out_of_range``, ``no_label``, ``no_enwiki``; ``dated_years``
    (if given) receives every dated item's year, so an empty result can say what the dump has."""
    for entity in iter_entities(path, skips):
        if entity.kind != "item":
            continue
        found = origination(entity, skips)
        if found is None:
            continue
        prop, time, precision, year = found
        if dated_years is not None:
            dated_years.append(year)
        if years is not None and not years[0] <= year <= years[1]:
            skips.add("year_out_of_range", f"{entity.id} {year}")
            continue
        if not entity.label:
            skips.add("no_label", entity.id)
            continue
        if not entity.enwiki:
            skips.add("no_enwiki", entity.id)
            continue
        yield OriginEntity(
            qid=entity.id,
            label=entity.label,
            aliases=tuple(a for a in entity.aliases if a),
            enwiki=entity.enwiki,
            property=prop,
            date=time,
            precision=precision,
            year=year,
        )
