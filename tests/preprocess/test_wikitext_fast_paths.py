"""to_paragraphs' shortcuts (tw_jax.preprocess.plaintext.wikitext) give what the general rules
give: comments and <ref> elements removed in one substitution, plain [[Target]] and
[[Target|label]] links, category and interlanguage links, file links matched from the first one
on, templates and tables matched whole when no other brace is among them, quotes stripped line
by line, paragraphs already collapsed kept as they are (ASCII articles checked once whole),
marker characters in ASCII text. Each expected value is what the rules gave before the
shortcuts existed."""

from __future__ import annotations

import random

import pytest

from tw_jax.preprocess.plaintext import wikitext
from tw_jax.preprocess.plaintext.wikitext import to_paragraphs


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # four levels render fully; a fifth stays literal, though its inner links are simple
        ("[[o|" * 4 + "a" + "]]" * 4, ["a"]),
        ("[[o|" * 5 + "a" + "]]" * 5, ["[[o|a]]"]),
        ("[[o|" * 5 + "b:c" + "]]" * 5, ["[[o|b:c]]"]),
        ("[[" * 6 + "a" + "]]" * 6, ["[[[[a]]]]"]),
        # the trail stays after the label, whichever round renders the link
        ("[[x|[[y]]]][[z:w]]s", ["yz:ws"]),
        ("[[a]]s [[b:c|d]]e [[ x ]] [[ ]] [[|q]]", ["as de x [[ ]] [[|q]]"]),
        ("[[fr:Paris]] [[Category:X]] [[:Category:Y]] [[Help:Z (a)|]]", ["Category:Y Z"]),
        # interlanguage and category links, as written and otherwise
        ("[[zh-yue:X]] [[ami:Y|z]]s [[Fr:Z]] [[xx:W]] [[am:V]]", ["s xx:W"]),
        ("[[a|b [[Category:X]] c]] [[category:Y|k]]d", ["b c d"]),
        ("[[de:]]e [[ de:X]] [[be-x-old:Q|[[r]]]]", ["e"]),
    ],
)
def test_links_at_any_depth(text, expected):
    assert to_paragraphs(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x [[[File:a.jpg|cap [b] ]]] y", ["x [[[File:a.jpg|cap [b] ]]] y"]),
        ("a [[x]] b\nc [[File:a.jpg|thumb|[[river]] bank]] d [[y]]", ["a x b c d y"]),
        ("[[File:a.jpg|a\n\nb]] c\n[[Image:b.png]] d", ["c d"]),
        ("[[ file :a.jpg|x]] [[IMAGE:b]] e", ["e"]),
    ],
)
def test_file_links(text, expected):
    assert to_paragraphs(text) == expected


def test_quotes_only_on_their_lines():
    text = "A ''b''\nc ''' d\n'''d''' e\nf"
    assert to_paragraphs(text) == ["A b c d d e f"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\u00a0 b\tc ", ["a b c"]),
        ("a\u2003b", ["a b"]),
        ("plain words here", ["plain words here"]),
        ("a\x1f b", ["a b"]),  # a marker character in the input is removed
        ("caf\u00e9\x1fbar", ["caf\u00e9bar"]),
        ("x\ufdd0y", ["xy"]),
        # ASCII articles: paragraphs with entities, double spaces or a tab take the long way
        (" a  b &amp; c \n\n d\x7fe \n\nf\tg", ["a b & c", "d\x7fe", "f g"]),
        ("x &nbsp; y\n\n z \x1f\n\n\x1f", ["x y", "z"]),
        ("p &#9; q\n\n{{cn}} r  s ", ["p q", "r s"]),
        ("* a  b\n# &lt;c&gt;", ["a b", "<c>"]),
    ],
)
def test_whitespace_and_reserved_characters(text, expected):
    assert to_paragraphs(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # comments and <ref> elements only, all closed: removed in one substitution
        ('a<ref>x</ref> b<ref name=c/> d<!-- e --> f<REF NAME="g/h">i</Ref > j', ["a b d f j"]),
        ("<ref>a <!-- b</ref> c --> d", ["c --> d"]),
        # anything else first, or unclosed: read element by element
        ("<!-- <ref>x</ref> -->y", ["y"]),
        ("<!-- a <ref> --> b </ref> c", ["b </ref> c"]),
        ("<nowiki><ref>x</ref></nowiki> e", ["<ref>x</ref> e"]),
        ("a<ref>b\n\nc", ["a", "c"]),
    ],
)
def test_comments_and_references(text, expected):
    assert to_paragraphs(text) == expected


@pytest.mark.parametrize(
    ("text", "expected", "flat"),
    [
        # templates holding text, or templates holding only text; tables starting their line
        ("{{cn}} a {{convert|5|km}} b", ["a 5 km b"], True),
        (
            "{{Infobox x\n| pop = {{formatnum:1234}}\n| web = {{URL|http://x.example}}\n}}\n"
            "Text {{lang|fr|{{small|Bonjour}}}} here.",
            ["Text Bonjour here."],
            True,
        ),
        ("a\n{| class=x\n| {{flagicon|X}} y\n|}\nb", ["a", "b"], True),
        ("a\n:{|\n| x\n|}\nb", ["a", "b"], True),
        ("{{cn}}} x } y", ["} x } y"], True),  # a "}" outside them matches nothing
        ("{{convert|1|m}}{{convert|2|m}}", ["1 m2 m"], True),
        # anything else: every brace matched with its partner
        ("a {| b |} c", ["a {| b |} c"], False),  # "{|" inside a line is no table
        ("{{{1}}} a {{cn}}", ["a"], False),
        ("{{a|{{b|{{c}}}}}} x", ["x"], False),
        ("{{cn a\n\nb", ["b"], False),
        ("{{math|{x}}} y", ["{x} y"], False),
    ],
)
def test_templates_and_tables(text, expected, flat):
    assert to_paragraphs(text) == expected
    assert (wikitext._flat_braces(text) is not None) == flat
    _assert_flat_path_agrees(text)


def _assert_flat_path_agrees(text: str) -> None:
    """Where the whole-match path applies, it finds the constructs brace-by-brace matching
    finds, and the text comes out as that path would render it."""
    nested = wikitext._nested_braces(text)
    flat = wikitext._flat_braces(text)
    assert flat is None or flat == nested, text
    assert wikitext._strip_braces(text) == wikitext._replace_braces(text, nested, 0), text


def test_flat_braces_match_the_general_rule():
    """Random texts of braces, bars and newlines: wherever the shortcut applies, it gives what
    matching every brace with its partner gives."""
    rng = random.Random(0)
    pieces = ["{{", "}}", "{", "}", "{|", "|}", "|", "\n", " ", ":", "a", "{{cn}}", "{{{1}}}",
              "{{convert|5|km}}", "{{lang|fr|{{small|b}}}}", "\n{|", "\n:{|"]  # fmt: skip
    flat = 0
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        flat += wikitext._flat_braces(text) is not None
        _assert_flat_path_agrees(text)
    assert flat > 200  # the shortcut was exercised (242 of the 3,000)
