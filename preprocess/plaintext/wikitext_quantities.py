"""Numbers, units and dates as English Wikipedia's templates print them (for wikitext_templates).

The templates that carry quantities -- ``{{convert}}``, ``{{val}}``, ``{{start date}}``,
``{{death date and age}}``, ``{{as of}}`` … -- are rendered here from their arguments alone: no
clock (nothing says "today", so an article renders the same whatever day it is read), no unit
conversion (the converted value in brackets is left out; the value the editor typed is the one
that carries the fact, and an edit to it must show in the text).

Every function returns None when its input is not what the template accepts (a value that is
not a number, a month 13); the caller drops such a template, as it drops unknown ones.
"""

from __future__ import annotations

import calendar
import re

__all__ = [
    "MONTHS",
    "age_at",
    "format_date",
    "format_number",
    "group_thousands",
    "parse_date",
    "unit_symbol",
]

MONTHS = tuple(
    str.split(
        "January February March April May June July August September October November December"
    )
)
# A number as templates take it: sign, digits (with or without thousands commas), decimals and an
# optional exponent. Wikipedia prints the minus sign as U+2212.
_NUMBER = re.compile(r"([-−+]?)((?:\d{1,3}(?:,\d{3})+|\d*))((?:\.\d+)?)(?:[eE]([-+−]?\d+))?")
# A mixed fraction as {{convert}} takes it: 1+1/2, 3/4.
_FRACTION = re.compile(r"([-−]?)(?:(\d+)\+)?(\d+)/(\d+)")

# {{convert}} unit codes whose symbol (what abbr=on shows) differs from the code. A code not
# listed here is shown as written, with a final 2 or 3 after a letter as a superscript
# (m2 -> m², m3/d -> m³/d).
UNIT_SYMBOLS = {
    "C": "°C",
    "F": "°F",
    "K": "K",
    "C-change": "°C",
    "F-change": "°F",
    "K-change": "K",
    "sqmi": "sq mi",
    "sqft": "sq ft",
    "sqin": "sq in",
    "sqyd": "sq yd",
    "sqkm": "km²",
    "sqm": "m²",
    "ft2": "sq ft",
    "in2": "sq in",
    "yd2": "sq yd",
    "mi2": "sq mi",
    "cuft": "cu ft",
    "cuin": "cu in",
    "cuyd": "cu yd",
    "cumi": "cu mi",
    "ft3": "cu ft",
    "in3": "cu in",
    "yd3": "cu yd",
    "mi3": "cu mi",
    "acre": "acres",
    "acres": "acres",
    "oilbbl": "bbl",
    "Tcuft": "trillion cu ft",
    "Gcuft": "billion cu ft",
    "USgal": "US gal",
    "usgal": "US gal",
    "impgal": "imp gal",
    "USqt": "US qt",
    "impqt": "imp qt",
    "USoz": "US fl oz",
    "impoz": "imp fl oz",
    "LT": "long tons",
    "ST": "short tons",
    "MT": "t",
    "tonne": "t",
    "kph": "km/h",
    "kmh": "km/h",
    "knot": "kn",
    "PD/sqmi": "/sq mi",
    "PD/km2": "/km²",
    "PD/sqkm": "/km²",
    "PD/ha": "/ha",
    "PD/acre": "/acre",
    "ftlb": "ft⋅lb",
    "lbft": "lb⋅ft",
    "Nm": "N⋅m",
    "kWh": "kW⋅h",
}
# Code prefixes that scale the unit: e6acre -> "million acres".
_SCALE_PREFIXES = (("e12", "trillion"), ("e9", "billion"), ("e6", "million"), ("e3", "thousand"))
_SUPERSCRIPT_POWER = re.compile(r"(?<=[A-Za-z])([23])(?![0-9])")
_SUPERSCRIPTS = {"2": "²", "3": "³"}


def unit_symbol(code: str) -> str:
    """The symbol {{convert}} (with abbr=on) and {{val}} print for a unit code."""
    code = code.strip()
    for prefix, word in _SCALE_PREFIXES:
        if code.startswith(prefix) and len(code) > len(prefix):
            return f"{word} {unit_symbol(code[len(prefix) :])}"
    if code in UNIT_SYMBOLS:
        return UNIT_SYMBOLS[code]
    code = code.replace("oilbbl", "bbl")
    return _SUPERSCRIPT_POWER.sub(lambda m: _SUPERSCRIPTS[m.group(1)], code)


def group_thousands(digits: str) -> str:
    """``1234567`` -> ``1,234,567``; digits that already hold commas are kept as written."""
    if "," in digits or len(digits) < 4:
        return digits
    head = len(digits) % 3 or 3
    return ",".join([digits[:head]] + [digits[i : i + 3] for i in range(head, len(digits), 3)])


def format_number(value: str, *, group: bool = True) -> str | None:
    """A template's number as Wikipedia prints it, or None if ``value`` is not a number.

    The minus sign becomes U+2212, thousands are grouped with commas (``group``; {{convert}} and
    ``formatnum`` do so, {{val}} separates groups with gaps that are not characters), an exponent
    is printed as ``×10^n`` and a mixed fraction ``1+1/2`` as ``1 1/2``.
    """
    value = value.strip()
    m = _NUMBER.fullmatch(value)
    if m is None or not any(c.isdigit() for c in m.group(2) + m.group(3)):
        f = _FRACTION.fullmatch(value)
        if f is None:
            return None
        sign, whole, num, den = f.groups()
        sign = "−" if sign else ""
        return f"{sign}{whole} {num}/{den}" if whole else f"{sign}{num}/{den}"
    sign, integer, decimals, exponent = m.groups()
    sign = "−" if sign in "-−" and sign else sign
    if group:
        integer = group_thousands(integer)
    text = f"{sign}{integer}{decimals}"
    if exponent is not None:
        text += "×10^" + exponent.replace("-", "−")
    return text


def _int(value: str | None, low: int, high: int) -> int | None:
    if value is None:
        return None
    value = value.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 4:
        return None
    n = int(value)
    return n if low <= n <= high else None


def parse_date(
    year: str | None, month: str | None = None, day: str | None = None
) -> tuple[int, int | None, int | None] | None:
    """``(year, month, day)`` from a date template's numeric arguments; month and day may be
    absent or empty (a year, or a month of a year). None if any given part is not valid."""
    y = _int(year, 1, 9999)
    if y is None:
        return None
    if month is None or not month.strip():
        return (y, None, None) if day is None or not day.strip() else None
    m = _int(month, 1, 12)
    if m is None:
        return None
    if day is None or not day.strip():
        return y, m, None
    d = _int(day, 1, calendar.monthrange(y, m)[1])
    return None if d is None else (y, m, d)


def format_date(date: tuple[int, int | None, int | None], *, day_first: bool) -> str:
    """``July 4, 1976`` (month first, the default of Wikipedia's date templates) or, with
    ``day_first`` (their ``df=y``), ``4 July 1976``; ``July 1976``; ``1976``."""
    year, month, day = date
    if month is None:
        return str(year)
    if day is None:
        return f"{MONTHS[month - 1]} {year}"
    if day_first:
        return f"{day} {MONTHS[month - 1]} {year}"
    return f"{MONTHS[month - 1]} {day}, {year}"


def age_at(
    born: tuple[int, int | None, int | None], at: tuple[int, int | None, int | None]
) -> str | None:
    """Whole years from ``born`` to ``at``: ``"73"``, or ``"72–73"`` when a month or day is
    missing and either is possible (as {{death date and age}} prints it). None if ``at`` is
    before ``born``."""
    years = at[0] - born[0]
    (_, born_month, born_day), (_, month, day) = born, at
    if born_month is None or month is None:
        before = None  # whether the birthday had come yet that year is unknown
    elif born_month != month:
        before = month < born_month
    elif born_day is None or day is None:
        before = None
    else:
        before = day < born_day
    if before is None:
        if years < 0:
            return None
        return "0" if years == 0 else f"{years - 1}–{years}"
    if before:
        years -= 1
    return None if years < 0 else str(years)
