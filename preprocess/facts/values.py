"""A normalised Wikidata value (:class:`~tw_jax.preprocess.dumps.wikidata.Claim`) as probe text.

The probe's object is what a reader of the article would write: an item's English label,
a date as ``12 March 1990`` / ``March 1990`` / ``1990`` by precision, a quantity as its plain
amount plus the unit's label (``48631.9 square kilometre``), text as itself. This must agree
with the sample world's ground truth (``tw_jax.sample_world.truth.render_value``) on every fact,
which the tests check month by month.

Choices the truth does not cover:

- precisions coarser than a year (decade 8, century 7, millennium 6, ...) print the stored year,
  since the probe compares strings and the year is what the statement literally holds;
- a day or month precision whose day/month is ``00`` (malformed but present in real dumps)
  falls back to the coarser form that the string can support;
- years before the common era (a leading ``-``) print as ``500 BC``; Wikidata's year 0 (which
  should not occur) prints as ``0``;
- years are printed without leading zeros and may have more than four digits.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation

__all__ = ["MONTH_NAMES", "render", "render_quantity", "render_time"]

MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December")
_DAY, _MONTH = 11, 10


def _year_text(year: int) -> str:
    return f"{-year} BC" if year < 0 else str(year)


def render_time(time: str, precision: int) -> str | None:
    """``12 March 1990`` (precision ≥ 11), ``March 1990`` (10), ``1990`` (9 or coarser)."""
    sign = -1 if time.startswith("-") else 1
    body = time.lstrip("+-")
    date = body.split("T", 1)[0]
    parts = date.split("-")
    if len(parts) != 3:
        return None
    try:
        year, month, day = sign * int(parts[0]), int(parts[1]), int(parts[2])
    except ValueError:
        return None
    year_text = _year_text(year)
    if precision >= _DAY and 1 <= month <= 12 and day >= 1:
        return f"{day} {MONTH_NAMES[month - 1]} {year_text}"
    if precision >= _MONTH and 1 <= month <= 12:
        return f"{MONTH_NAMES[month - 1]} {year_text}"
    return year_text


def render_amount(amount: str) -> str | None:
    """``+1234`` → ``1234``, ``+48631.90`` → ``48631.9``, ``-3`` → ``-3``; None if not a number."""
    try:
        number = Decimal(amount)
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    if number == number.to_integral_value():
        return str(int(number))
    return format(number.normalize(), "f")


def render_quantity(amount: str, unit: str | None, label_of: Callable[[str], str | None]) -> str | None:
    """The amount, then a space and the unit's label; None if the unit has no label."""
    text = render_amount(amount)
    if text is None or unit is None:
        return text
    unit_label = label_of(unit)
    return None if unit_label is None else f"{text} {unit_label}"


def render(value: tuple, label_of: Callable[[str], str | None]) -> str | None:
    """The probe text of ``value``; None when it cannot be printed (an item without a label)."""
    kind = value[0]
    if kind == "item":
        return label_of(value[1])
    if kind == "time":
        return render_time(value[1], value[2])
    if kind == "quantity":
        return render_quantity(value[1], value[2], label_of)
    if kind in ("string", "monolingualtext"):
        return value[1]
    return None
