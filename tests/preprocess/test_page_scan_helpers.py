"""The shortcuts of the fast path past expat give the answers of the plain ways they replace:
unescape that of expat, page_end that of one search for "</page>", scan_chunk those of a regular
expression and a count; and pages read among odd ones, in any chunks, read as with expat alone
(line numbers of later errors and skips included)."""

from __future__ import annotations

import random
import re
from xml.parsers import expat

import pytest
from test_page_scan import FOOTER, HEADER, ODD, ordinary, read

from tw_jax.preprocess.dumps.page_scan import page_end, scan_chunk, unescape

ATOMS = ["a", " ", "&", ";", "lt", "gt", "amp", "quot", "apos", "#", "x", "65", "0", "1F600",
         "#38;", "&lt;", "&gt;", "&amp;", "&quot;", "&apos;", "&#10;", "&#x0;", "&nbsp;",
         "\u00e9", "\u263a", "&#1114112;", "&#xD800;", "&#xFFFE;"]


def expat_text(text: str) -> str | None:
    """What expat reads as the character data of ``<r>text</r>`` (None: malformed)."""
    parser = expat.ParserCreate()
    found: list[str] = []
    parser.CharacterDataHandler = found.append
    try:
        parser.Parse(f"<r>{text}</r>".encode(), True)
    except expat.ExpatError:
        return None
    return "".join(found)


def test_unescape_reads_references_as_expat_does():
    rnd = random.Random(0)
    texts = ["".join(rnd.choice(ATOMS) for _ in range(rnd.randint(0, 12))) for _ in range(3000)]
    assert [unescape(t) for t in texts] == [expat_text(t) for t in texts]
    assert unescape("&lt;ref name=&quot;a&quot;&gt;&amp;amp;") == '<ref name="a">&amp;'
    assert unescape("&lt;b&gt; & c") is None  # named entities, then a stray "&"


def test_page_end_finds_what_one_search_finds():
    rnd = random.Random(1)
    pieces = [b"<page>", b"</page>", b"<text>", b"<text ", b"</text>", b"<", b"x", b"\n", b"&lt;"]
    for _ in range(5000):
        buf = b"<page>" + b"".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 10)))
        assert page_end(buf, 0) == buf.find(b"</page>", 6), buf


def test_scan_chunk_marks_unsafe_bytes_and_counts_newlines():
    rnd = random.Random(2)
    unsafe = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\r]")
    alphabet = b"ab <&\n\n\t\r\x01\x1f\x7f\xc3\xa9\xff"  # 0xFF: never in checked UTF-8, harmless
    for _ in range(2000):
        data = bytes(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40)))
        assert scan_chunk(data) == ([m.start() for m in unsafe.finditer(data)], data.count(b"\n"))


@pytest.mark.parametrize("seed", range(40))
def test_pages_among_odd_ones_read_as_with_expat_alone(seed, monkeypatch):
    """Ordinary pages (read on the fast path, their lines counted only when expat is fed next)
    mixed with odd ones, comments and blank lines, sometimes cut short: the same pages, skips
    and errors, with the same lines, as expat alone, whatever the chunks."""
    rnd = random.Random(seed)
    parts = [HEADER.encode()]
    for number in range(rnd.randint(3, 25)):
        choice = rnd.random()
        if choice < 0.6:
            parts.append(ordinary(10 * number, rnd.randint(1, 3)).encode())
        elif choice < 0.7:
            parts.append(b"  <!-- a comment\n between pages -->\n")
        elif choice < 0.75:
            parts.append(b"\n\n  \n")
        else:
            odd = ODD[rnd.choice(sorted(ODD))]
            parts.append(odd if isinstance(odd, bytes) else odd.encode())
    parts.append(FOOTER.encode())
    data = b"".join(parts)
    if rnd.random() < 0.2:
        data = data[: rnd.randint(0, len(data))]
    for chunk in (1 << 20, 1, 5, 64, 333, 4096, rnd.randint(2, 3000)):
        assert read(data, chunk, True, monkeypatch) == read(data, chunk, False, monkeypatch)
