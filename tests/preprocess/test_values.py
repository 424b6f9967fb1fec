"""render: dates by precision, quantities with and without units, items and text."""

from __future__ import annotations

import pytest

from tw_jax.preprocess.facts.values import render, render_amount

LABELS = {"Q5": "human", "Q712226": "square kilometre", "Q4917": "United States dollar"}


def r(value: tuple) -> str | None:
    return render(value, LABELS.get)


@pytest.mark.parametrize(
    ("time", "precision", "expected"),
    [
        ("+1990-03-12T00:00:00Z", 11, "12 March 1990"),
        ("+1990-03-02T00:00:00Z", 11, "2 March 1990"),  # no leading zero on the day
        ("+1990-03-12T14:30:00Z", 14, "12 March 1990"),  # finer than a day prints the day
        ("+1990-03-00T00:00:00Z", 10, "March 1990"),
        ("+1990-00-00T00:00:00Z", 9, "1990"),
        ("+1990-00-00T00:00:00Z", 8, "1990"),  # decade: the stored year
        ("+1901-00-00T00:00:00Z", 7, "1901"),  # century: the stored year
        ("+0800-12-25T00:00:00Z", 11, "25 December 800"),  # no leading zeros on the year
        ("-0500-00-00T00:00:00Z", 9, "500 BC"),
        ("-0044-03-15T00:00:00Z", 11, "15 March 44 BC"),
        ("+13798000000-00-00T00:00:00Z", 3, "13798000000"),
        ("+1990-00-00T00:00:00Z", 11, "1990"),  # day precision without month/day: the year
        ("+1990-07-00T00:00:00Z", 11, "July 1990"),  # day precision without a day: the month
    ],
)
def test_time(time, precision, expected):
    assert r(("time", time, precision)) == expected


def test_malformed_time_is_none():
    assert r(("time", "yesterday", 11)) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (("quantity", "+1234", None), "1234"),
        (("quantity", "+1234567", None), "1234567"),
        (("quantity", "+1234.000", None), "1234"),
        (("quantity", "+48631.90", "Q712226"), "48631.9 square kilometre"),
        (("quantity", "+0.0005", None), "0.0005"),
        (("quantity", "-12.50", None), "-12.5"),
        (("quantity", "-3", None), "-3"),
        (("quantity", "+2500000000", "Q4917"), "2500000000 United States dollar"),
        (("quantity", "+10", "Q99999"), None),  # the unit has no label
        (("quantity", "many", None), None),
    ],
)
def test_quantity(value, expected):
    assert r(value) == expected


def test_amount_never_uses_exponents():
    assert render_amount("+1E+3") == "1000"
    assert render_amount("+1.5E+3") == "1500"
    assert render_amount("+0.00000001") == "0.00000001"


def test_items_and_text():
    assert r(("item", "Q5")) == "human"
    assert r(("item", "Q404")) is None
    assert r(("string", "https://example.org/")) == "https://example.org/"
    assert r(("monolingualtext", "Republic of Varnholt", "en")) == "Republic of Varnholt"
    assert r(("globe", 1.0, 2.0)) is None
