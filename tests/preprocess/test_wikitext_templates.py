"""Inline templates rendered as Wikipedia shows them: one test per family, exact strings."""

from __future__ import annotations

import time

import pytest

from tw_jax.preprocess.plaintext.wikitext import to_paragraphs
from tw_jax.preprocess.plaintext.wikitext_quantities import (
    age_at,
    format_date,
    format_number,
    parse_date,
    unit_symbol,
)
from tw_jax.preprocess.plaintext.wikitext_templates import canonical_name, split_arguments


def render(wikitext: str) -> str:
    """The one paragraph ``wikitext`` renders to."""
    paragraphs = to_paragraphs(wikitext)
    assert len(paragraphs) == 1, paragraphs
    return paragraphs[0]


# -- names and arguments -----------------------------------------------------------------------


def test_names_fold_the_first_letter_underscores_and_prefixes():
    assert canonical_name("Convert") == "convert"
    assert canonical_name(" Birth_date  and_age ") == "birth date and age"
    assert canonical_name("Template:Nowrap") == "nowrap"
    assert canonical_name("subst:convert") == "convert"
    assert canonical_name("IPA") == "iPA"  # only the first letter folds
    assert render("a {{convert<!-- why -->\n|5|km}} b") == "a 5 km b"
    # NOWRAP is another page than Nowrap (only the first letter folds): unknown, dropped
    assert render("A {{Template:Nowrap|b}} {{NOWRAP|c}} {{subst:nowrap|d}} {{nowrap_|e}}.") == (
        "A b d e."
    )


def test_arguments_split_outside_nested_templates_and_links():
    assert split_arguments("lang|fr|[[Paris|la ville]] {{x|y=z}}|text= a = b ") == [
        (None, "lang"),
        (None, "fr"),
        (None, "[[Paris|la ville]] {{x|y=z}}"),
        ("text", "a = b"),
    ]
    assert split_arguments("=") == [(None, "=")]


def test_explicit_numbered_argument_wins():
    assert render("{{nowrap|first|1=second}}") == "second"


def test_unknown_templates_drop_and_nested_ones_render_first():
    assert render("A {{cn|date=May 2020}}{{efn|note}} b {{nowrap|c {{convert|5|km|mi}}}} d.") == (
        "A b c 5 km d."
    )
    assert render("{{nowrap|x {{unknown|y}} z}}") == "x z"


# -- text templates ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("{{lang|fr|le [[français]]}}", "le français"),
        ("{{lang-sq|Shqipëri}}", "Shqipëri"),
        ("{{Lang-ar|{{big|المعلم الأول}}}}", "المعلم الأول"),
        ("{{langx|de|Kraftwerk}}", "Kraftwerk"),
        ("{{transl|ar|al-Jazā'ir}}", "al-Jazā'ir"),
        ("{{transl|ar|DIN|al-Ǧazāʾir}}", "al-Ǧazāʾir"),
        ("{{nowrap|[[Pope Clement IV]]}}", "Pope Clement IV"),
        ("{{small|(1st)}} {{smaller|x}} {{sc|bc}} {{resize|70%|y}}", "(1st) x bc y"),
        ("{{script|Copt|Ⲁ ⲁ}}", "Ⲁ ⲁ"),
        ("{{Nihongo|'''Aikido'''|合気道|Aikidō|lead=yes}}", "Aikido (合気道, Aikidō)"),
        ("{{nihongo||東京|Tōkyō}}", "東京 (Tōkyō)"),
        ("{{flag|China}} and {{flagcountry|France}}", "China and France"),
        ("{{flagicon|ECU}} Quito", "Quito"),
        ("{{chem|C|''n''|H|2''n''+2}}", "CnH2n+2"),
        ("HA {{eqm}} H<sup>+</sup>", "HA ⇌ H+"),
        ("the letter {{angbr|a}}", "the letter ⟨a⟩"),
        ("{{IPA|/a/}}", "/a/"),
        ("{{USS|Hornet|CV-12}} and {{HMS|Ajax|22}}", "USS Hornet (CV-12) and HMS Ajax (22)"),
        ("{{tooltip|SR|Strike rate}}", "SR"),
        ("{{sic|hte}} and {{sic}} x", "hte and x"),
        ("{{lit|counting tray}}", "lit. 'counting tray'"),
        ("{{ill|Foo|de|Foo (Begriff)}}", "Foo"),
    ],
)
def test_text_templates(wikitext, expected):
    assert render(wikitext) == expected


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("Apollo{{'}}s", "Apollo's"),
        ("Apollo 11{{'s}} crew", "Apollo 11's crew"),
        ("a{{·}}b", "a · b"),
        ("1914{{ndash}}1918", "1914–1918"),
        ("a{{mdash}}b", "a—b"),
        ("a{{snd}}b", "a – b"),
        ("5{{nbsp}}km 6{{thinsp}}m", "5 km 6 m"),
        ("x {{!}} y {{=}} z", "x | y = z"),
    ],
)
def test_punctuation_templates(wikitext, expected):
    assert render(wikitext) == expected


def test_quote_is_a_paragraph_of_its_own():
    text = "He said:\n{{quote|We are not [[enemy|enemies]].|Abraham Lincoln|Speech}}\nAfter."
    assert to_paragraphs(text) == ["He said:", "We are not enemies.", "After."]
    assert to_paragraphs("{{quote|text=Named text.|sign=X}}") == ["Named text."]


# -- numbers and units -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("{{convert|150|cm|ft}}", "150 cm"),
        ("{{convert|190|cm|ft}}", "190 cm"),
        ("{{convert|1300|mi|km}}", "1,300 mi"),
        ("{{Convert|2,381,741|km2|sqmi}}", "2,381,741 km²"),
        ("{{convert|52419|sqmi|km2}}", "52,419 sq mi"),
        ("{{convert|2413|ft|0|abbr=on}}", "2,413 ft"),
        ("{{convert|-27|°F}}", "−27 °F"),
        ("{{convert|50.6|C|F}}", "50.6 °C"),
        ("{{convert|1|to|3|km}}", "1 to 3 km"),
        ("{{convert|20|-|25|cm|in}}", "20–25 cm"),
        ("{{convert|20|-|25|cm}}", "20–25 cm"),
        ("{{convert|60|and(-)|80|kg}}", "60 and 80 kg"),
        ("{{convert|0.99|by|0.92|AU|Gm}}", "0.99 by 0.92 AU"),
        ("{{convert|25|x|36|cm|0|abbr=on}}", "25 × 36 cm"),
        ("{{convert|6|ft|4|in|cm|0}}", "6 ft 4 in"),
        ("{{convert|22|e6acre|ha}}", "22 million acres"),
        ("{{convert|160|Tcuft|km3}}", "160 trillion cu ft"),
        ("{{convert|2.3|Moilbbl/d|m3/d}}", "2.3 Mbbl/d"),
        ("{{convert|1|USgal|L}}", "1 US gal"),
        ("{{convert|94|PD/sqmi|PD/km2}}", "94/sq mi"),
        ("{{convert|1+1/2|in|mm}}", "1 1/2 in"),
        ("{{cvt|5|km}}", "5 km"),
    ],
)
def test_convert_shows_the_value_and_unit_written(wikitext, expected):
    assert render(f"a {wikitext} b") == f"a {expected} b"


@pytest.mark.parametrize(
    "wikitext",
    [
        "{{convert|about|5|km}}",  # not a number
        "{{convert|5}}",  # no unit
        "{{convert|5|to|x|km}}",  # a range to no number
        "{{convert|5|km|mi|disp=out}}",  # only the converted value would show
        "{{convert}}",
    ],
)
def test_convert_with_bad_arguments_is_dropped(wikitext):
    assert render(f"a {wikitext} b") == "a b"


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("{{val|1.5|u=kg}}", "1.5 kg"),
        ("{{val|1.5|0.2|u=kg}}", "1.5 ± 0.2 kg"),
        ("{{val|1.5|+0.2|-0.1}}", "1.5 +0.2 −0.1"),
        ("{{val|6.241|e=18}}", "6.241×10^18"),
        ("{{val|9.8|ul=m/s2}}", "9.8 m/s²"),
        ("{{val|12345}}", "12345"),
        ("{{val|45|u=%}}", "45%"),
        ("{{val|30|u=°}} {{val|30|u=°C}}", "30° 30 °C"),
        ("{{val|3|u=m|up=s}}", "3 m/s"),
        ("6.02{{e|23}}", "6.02×10^23"),
        ("{{frac|3}}", "1/3"),
        ("{{frac|1|2}}", "1/2"),
        ("{{sfrac|3|1|2}}", "3 1/2"),
        ("{{formatnum:1234567}}", "1,234,567"),
        ("{{formatnum:1,234|R}}", "1234"),
        ("{{formatnum:n/a}}", "n/a"),
        (
            "{{ordinal|1}} {{ordinal|2}} {{ordinal|3}} {{ordinal|11}} {{ordinal|22}}",
            "1st 2nd 3rd 11th 22nd",
        ),
    ],
)
def test_number_templates(wikitext, expected):
    assert render(wikitext) == expected


# -- dates -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("{{start date|1976|7|4}}", "July 4, 1976"),
        ("{{start date|1976|7|4|df=y}}", "4 July 1976"),
        ("{{Start date and age|1976|07|04|df=yes}}", "4 July 1976"),
        ("{{birth date|1905|02|02|mf=yes}}", "February 2, 1905"),
        ("{{birth date and age|1950|1|2}}", "January 2, 1950"),
        ("{{death date|1982|3|6}}", "March 6, 1982"),
        ("{{start date|1993|2}}", "February 1993"),
        ("{{start date|1993}}", "1993"),
        ("{{death date and age|1993|2|24|1920|3|1}}", "February 24, 1993 (aged 72)"),
        ("{{death date and age|1993|2|24|1920|2|24|df=y}}", "24 February 1993 (aged 73)"),
        ("{{death date and age|1993|2|24|1920}}", "February 24, 1993 (aged 72–73)"),
        ("{{death year and age|2000|1920}}", "2000 (aged 79–80)"),
        ("{{birth year and age|1950}}", "1950"),
        ("{{as of|2010}}", "As of 2010"),
        ("{{as of|2014|lc=y}}", "as of 2014"),
        ("{{As of|2015|6|30}}", "As of 30 June 2015"),
        ("{{as of|2015|6|30|df=US}}", "As of June 30, 2015"),
        ("{{as of|2015|6|since=y}}", "Since June 2015"),
        ("{{as of|2015|alt=In mid-2015}}", "In mid-2015"),
        ("{{circa|1850}}", "c. 1850"),
        ("{{c.|1200|1250}}", "c. 1200 – c. 1250"),
        ("{{fl.|1200}}", "fl. 1200"),
        ("{{BC|384}}–{{BCE|322}}", "384 BC–322 BCE"),
        ("{{AD|800}} and {{CE|900}}", "AD 800 and 900 CE"),
        ("{{OldStyleDate|February 2|1905|January 21}}", "February 2 [O.S. January 21] 1905"),
    ],
)
def test_date_templates(wikitext, expected):
    assert render(wikitext) == expected


@pytest.mark.parametrize(
    "wikitext",
    [
        "{{age|1950|1|2}}",  # needs today's date: left out
        "{{start date|1976|13|4}}",  # no month 13
        "{{start date|1977|2|29}}",  # not a leap year
        "{{birth date|May 1950}}",  # not numeric
        "{{start date||7|4}}",
        "{{start date|" + "9" * 5000 + "}}",  # no 5000-digit year (nor int() of one)
        "{{start date|٢٠٠٠}}",  # Arabic-Indic digits are not what the template takes
        "{{ordinal|²}}",
    ],
)
def test_dates_needing_a_clock_or_invalid_are_dropped(wikitext):
    assert render(f"a {wikitext} b") == "a b"


def test_quantities_helpers():
    assert format_number("1234567.25") == "1,234,567.25"
    assert format_number("1234567", group=False) == "1234567"
    assert format_number("-1.5e-3") == "−1.5×10^−3"
    assert format_number("12a") is None
    assert format_number(".") is None
    assert unit_symbol("e9m3") == "billion m³"
    assert unit_symbol("koilbbl/d") == "kbbl/d"
    assert parse_date("2000", "2", "29") == (2000, 2, 29)
    assert parse_date("1900", "2", "29") is None
    assert format_date((1976, 7, 4), day_first=False) == "July 4, 1976"
    assert age_at((1920, 5, None), (1993, 2, 24)) == "72"  # month decides
    assert age_at((1920, 2, None), (1993, 2, 24)) == "72–73"  # same month, day unknown
    assert age_at((2000, 1, 1), (1990, 1, 1)) is None


# -- the template pass stays linear ------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        "{{nowrap|" * 3000 + "x" + "}}" * 3000,
        "{{convert|" * 3000 + "1|km" + "}}" * 3000,
        "{{lang|fr|" * 10_000,
        "{{nowrap|a|" + "|" * 100_000 + "}}",
    ],
    ids=["deep nowrap", "deep convert", "unclosed lang", "many pipes"],
)
def test_nested_garbage_is_bounded(garbage):
    start = time.process_time()  # CPU time: other work on the machine does not count
    to_paragraphs(garbage)
    assert time.process_time() - start < 2.0


def test_numbered_arguments_far_out_are_not_iterated():
    start = time.process_time()  # CPU time: other work on the machine does not count
    assert render("{{chem|H|2|O|99999999=x}}") == "H2O"
    assert render("{{chem|H|3=O}}") == "HO"  # 2 is empty
    assert render("{{chem|H|2|O|" + "9" * 5000 + "=x}}") == "H2O"
    assert time.process_time() - start < 1.0


def test_nesting_beyond_the_depth_limit_is_dropped():
    inner = "{{nowrap|" * 8 + "x" + "}}" * 8
    assert render(f"a {inner} b") == "a x b"
    assert render("a " + "{{nowrap|" * 9 + "x" + "}}" * 9 + " b") == "a b"
