"""The fast path past expat (tw_jax.preprocess.dumps.page_scan) reads every export exactly as
expat alone does: the same pages, the same skips, the same errors with the same positions, for
odd pages among ordinary ones and whatever the chunk boundaries. Each case is read twice, with
the fast path and with expat only, and the fast path is checked to have read the ordinary
pages, so that agreeing is not for want of trying."""

from __future__ import annotations

import contextlib
from xml.sax.saxutils import escape, quoteattr

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps import mediawiki, page_scan
from tw_jax.preprocess.dumps.mediawiki import Page, parse_export
from tw_jax.preprocess.dumps.page_scan import SharedPages, unescape
from tw_jax.preprocess.runners.accounting import Skips

HEADER = (
    '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">\n'
    "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <namespaces>\n"
    '      <namespace key="0" case="first-letter" />\n'
    "    </namespaces>\n  </siteinfo>\n"
)
FOOTER = "</mediawiki>\n"


def page(page_id: int, title: str, text: str | None = "body", *, raw_text: str | None = None,
         extra: str = "", redirect: str | None = None) -> str:
    """A <page> as MediaWiki writes it; ``raw_text`` is put in <text> unescaped."""
    parts = [f"  <page>\n    <title>{escape(title)}</title>\n    <ns>0</ns>\n"
             f"    <id>{page_id}</id>\n"]
    if redirect is not None:
        parts.append(f"    <redirect title={quoteattr(redirect)} />\n")
    parts.append(
        "    <revision>\n      <id>99</id>\n      <parentid>98</parentid>\n"
        "      <timestamp>2021-08-01T00:00:00Z</timestamp>\n"
        "      <contributor>\n        <username>Someone &amp; co</username>\n"
        "        <id>42</id>\n      </contributor>\n      <minor />\n"
        "      <comment>fix -&gt; [[x]]</comment>\n"
        "      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
    )
    if raw_text is not None:
        parts.append(f'      <text bytes="1" xml:space="preserve">{raw_text}</text>\n')
    elif text is not None:
        parts.append(f'      <text bytes="{len(text)}" xml:space="preserve">{escape(text)}</text>\n')
    parts.append(f"      <sha1>abc</sha1>\n{extra}    </revision>\n  </page>\n")
    return "".join(parts)


def ordinary(start: int, n: int = 3) -> str:
    return "".join(page(i, f"Ordinary {i}", f"Text of {i}.\n\nMore & <b>more</b>.")
                   for i in range(start, start + n))


def read(data: bytes, chunk: int, fast: bool, monkeypatch) -> tuple[list[Page], dict, str | None]:
    """(pages, skips, error) of ``data`` fed in chunks of ``chunk`` bytes."""
    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(mediawiki, "scan_page", lambda *args: None)
        skips = Skips()
        pages: list[Page] = []
        error = None
        chunks = iter([data[i : i + chunk] for i in range(0, len(data), chunk)])
        try:
            pages.extend(parse_export(chunks, "dump.xml", skips))
        except DumpError as exc:
            error = str(exc)
        return pages, skips.as_dict(), error


def fast_reads(data: bytes, monkeypatch) -> int:
    """How many pages the fast path read in one pass over ``data``."""
    count = 0
    scan = page_scan.scan_page

    def counting(*args):
        nonlocal count
        found = scan(*args)
        count += found is not None
        return found

    monkeypatch.setattr(mediawiki, "scan_page", counting)
    with contextlib.suppress(DumpError):
        list(parse_export(iter([data]), "dump.xml", Skips()))
    monkeypatch.undo()
    return count


CHUNKS = [1 << 20, 1, 7, 64, 333]

# name -> the odd part put between ordinary pages (str, or bytes for what str cannot hold)
ODD: dict[str, str | bytes] = {
    "entities": page(50, "Q&A <test> \"x\" 'y'", raw_text=(
        "&amp;lt; &lt;ref&gt; &quot;q&quot; &apos;a&apos; &#65;&#x1F600;&#38;amp; "
        "&#x41;&#0000065; &#9;&#10;&#13;")),
    "undefined entity": page(50, "Bad", raw_text="a &nbsp; b"),
    "stray ampersand": page(50, "Bad", raw_text="a & b"),
    "reference to NUL": page(50, "Bad", raw_text="a &#0; b"),
    "reference to U+FFFE": page(50, "Bad", raw_text="a &#xFFFE; b"),
    "reference to a surrogate": page(50, "Bad", raw_text="&#xD800;"),
    "reference past Unicode": page(50, "Bad", raw_text="&#x110000;"),
    "huge reference": page(50, "Bad", raw_text="&#99999999999999999999;"),
    "reference in the comment": page(50, "C", extra="      <comment>&#1;</comment>\n"),
    "valid reference in the comment": page(50, "C", extra="      <origin>&#65;</origin>\n"),
    "CDATA": page(50, "C", raw_text="a <![CDATA[ <b> & ]]> b"),
    "cdata end": page(50, "C", raw_text="a ]]> b"),
    "raw >": page(50, "C", raw_text="a > b ]] > c"),
    "comment in text": page(50, "C", raw_text="a <!-- x --> b"),
    "comment in the page": page(50, "C").replace("<ns>", "<!-- c --><ns>"),
    "comment between pages": "  <!-- <page><title>Ghost</title><ns>0</ns><id>7</id>"
                             "<revision><text>boo</text></revision></page> -->\n",
    "comment around pages": "  <!--\n" + page(60, "Hidden") + page(61, "Hidden too")
                            + "  -->\n",
    "CDATA around a page": "  <![CDATA[\n" + page(60, "Hidden") + "  ]]>\n",
    "pages inside another element": "  <wrapper>\n" + page(60, "Nested") + "  </wrapper>\n",
    "processing instruction": "  <?pi x?>\n" + page(50, "After PI"),
    "text between pages": "  stray words\n",
    "element between pages": "  <other>x</other>\n",
    "redirect": page(50, "R", "#REDIRECT [[A]]", redirect='A & "B" <c>'),
    "redirect without title": page(50, "R").replace("<revision>", "<redirect /><revision>"),
    "redirect title with a tab": page(50, "R").replace(
        "<revision>", '<redirect title="a\tb" /><revision>'),
    "redirect title with a reference": page(50, "R").replace(
        "<revision>", '<redirect title="a&#10;b&#65;" /><revision>'),
    "redirect with content": page(50, "R").replace(
        "<revision>", '<redirect title="a">x</redirect><revision>'),
    "namespace 1": page(50, "Talk:X").replace("<ns>0</ns>", "<ns>1</ns>"),
    "namespace -1": page(50, "Special:X").replace("<ns>0</ns>", "<ns>-1</ns>"),
    "namespace with spaces": page(50, "X").replace("<ns>0</ns>", "<ns> 0 </ns>"),
    "bad namespace": page(50, "X").replace("<ns>0</ns>", "<ns>zero</ns>"),
    "bad id": page(50, "X").replace("<id>50</id>", "<id>5O</id>"),
    "id with leading zeros": page(50, "X").replace("<id>50</id>", "<id>0050</id>"),
    "missing id": page(50, "X").replace("<id>50</id>\n", ""),
    "missing title": page(50, "X").replace("<title>X</title>\n", ""),
    "empty title": page(50, ""),
    "missing text": page(50, "X", None),
    "self-closing text": page(50, "X").replace(
        '<text bytes="4" xml:space="preserve">body</text>', '<text bytes="0" />'),
    "deleted text": page(50, "X").replace(
        '<text bytes="4" xml:space="preserve">body</text>', '<text deleted="deleted" />'),
    "deleted text with content": page(50, "X").replace('<text bytes="4"', '<text deleted="1"'),
    "attributes reordered": page(50, "X").replace(
        '<text bytes="4" xml:space="preserve">', '<text xml:space="preserve" bytes="4">'),
    "attributes in single quotes": page(50, "X").replace('bytes="4"', "bytes='4'"),
    "repeated attribute": page(50, "X").replace('bytes="4"', 'bytes="4" bytes="5"'),
    "spaces in tags": page(50, "X").replace("<title>X</title>", "<title >X</title >"),
    "two revisions": page(50, "X", "old").replace(
        "    </revision>\n", "    </revision>\n    <revision><text>new</text></revision>\n"),
    "two texts": page(50, "X", "one").replace(
        "      <sha1>", '      <text xml:space="preserve">two</text>\n      <sha1>'),
    "title in the revision": page(50, "X").replace(
        "<sha1>abc</sha1>", "<sha1>abc</sha1><title>Y</title>"),
    "second title": page(50, "X").replace("<ns>0</ns>", "<title>Y</title><ns>0</ns>"),
    "page attributes": page(50, "X").replace("<page>", '<page id="1">'),
    "restrictions": page(50, "X").replace(
        "<revision>", "<restrictions>edit=sysop</restrictions>\n    <revision>"),
    "nested element in the page": page(50, "X").replace(
        "<revision>", "<upload><filename>a</filename></upload><revision>"),
    "page inside the revision": page(50, "X").replace("<minor />", "<page/>"),
    "deleted contributor": page(50, "X").replace(
        "<contributor>\n        <username>Someone &amp; co</username>\n        <id>42</id>\n"
        "      </contributor>", '<contributor deleted="deleted" />'),
    "carriage returns": page(50, "X", raw_text="a\r\nb\rc"),
    "tab and newline in the title": page(50, "a\tb\nc"),
    "unclosed element": page(50, "X").replace("<sha1>abc</sha1>", "<sha1>abc"),
    "mismatched tag": page(50, "X").replace("</title>", "</titel>"),
    "prefixed elements": page(50, "X").replace("<title>", '<mw:title xmlns:mw="u">').replace(
        "</title>", "</mw:title>"),
    "control character": page(50, "X", raw_text="a\x01b"),
    "control character in the comment": page(50, "X").replace("fix -&gt;", "fix\x0b"),
    "U+FFFE": page(50, "X", raw_text="a\ufffeb"),
    "U+FFFF in the title": page(50, "a\uffffb"),
    "U+FFFD": page(50, "\ufffd", raw_text="\ufffd \u00e9 \U0001d11e"),
    "unicode": page(50, "Caf\u00e9 \u6771\u4eac", "na\u00efve \u20ac \U0001f600"),
    "page close at once": page(50, "X").replace("</page>\n", "</page>"),
    "invalid UTF-8 in a page": page(50, "caf").encode().replace(b"caf", b"caf\xe9"),
    "invalid UTF-8 between pages": b"  \xff\n",
}


@pytest.mark.parametrize("name", list(ODD))
def test_the_fast_path_reads_like_expat(name, monkeypatch):
    odd = ODD[name]
    data = (HEADER + ordinary(1)).encode() + (odd if isinstance(odd, bytes) else odd.encode())
    data += (ordinary(100) + FOOTER).encode()
    expected = read(data, 1 << 20, False, monkeypatch)
    for chunk in CHUNKS:
        fast = read(data, chunk, True, monkeypatch)
        assert fast == read(data, chunk, False, monkeypatch), chunk
        # Chunks decide only how many pages come out before an error, never what comes out.
        shorter, longer = sorted((fast[0], expected[0]), key=len)
        assert fast[1:] == expected[1:] and longer[: len(shorter)] == shorter, chunk
        if expected[2] is None:
            assert fast[0] == expected[0]
    assert fast_reads(data, monkeypatch) >= 2  # ordinary pages after the one with the header


def test_cases_cover_pages_errors_and_skips(monkeypatch):
    """The cases above are not all alike: some read, some skip, some are errors."""
    errors, skipped = set(), set()
    for name, odd in ODD.items():
        data = (HEADER + ordinary(1)).encode() + (odd if isinstance(odd, bytes) else odd.encode())
        pages, skips, error = read(data + (ordinary(100) + FOOTER).encode(), 1 << 20, True,
                                   monkeypatch)
        if error:
            errors.add(name)
        elif skips["by_reason"]:
            skipped.add(name)
    assert {"undefined entity", "cdata end", "repeated attribute", "control character",
            "U+FFFE", "mismatched tag"} <= errors
    assert {"bad id", "bad namespace", "missing title", "invalid UTF-8 in a page"} <= skipped


def test_expat_positions_stay_right_after_pages_read_on_the_fast_path(monkeypatch):
    data = (HEADER + ordinary(1, 40) + page(50, "X").replace("</title>", "</titel>")
            + ordinary(100) + FOOTER).encode()
    _, _, error = read(data, 1 << 20, True, monkeypatch)
    line = data[: data.index(b"</titel>")].count(b"\n") + 1
    column = data.index(b"</titel>") - data.rindex(b"\n", 0, data.index(b"</titel>")) - 1
    assert error == (
        f"dump.xml, line {line}, column {column + 2} (decompressed byte "
        f"{data.index(b'</titel>') + 2}), after page id=40 'Ordinary 40': "
        "malformed XML: mismatched tag")
    assert fast_reads(data, monkeypatch) == 39  # all but the one read with the header


def test_a_cut_dump_is_an_error_naming_the_file_and_the_last_page(monkeypatch):
    data = (HEADER + ordinary(1, 5)).encode()
    cut = data[: data.index(b"<title>Ordinary 5") + 10]
    for chunk in CHUNKS:
        pages, _, error = read(cut, chunk, True, monkeypatch)
        assert [p.id for p in pages] == [1, 2, 3, 4]
        assert error is not None and error.startswith("dump.xml, line ")
        assert error.endswith("after page id=4 'Ordinary 4': malformed XML: no element found")
        assert (pages, _, error) == read(cut, 1 << 20, False, monkeypatch)


def test_skips_on_the_expat_path_keep_their_line(monkeypatch):
    data = (HEADER + ordinary(1, 10) + page(50, "X").replace("<id>50</id>", "<id>x</id>")
            + FOOTER).encode()
    _, skips, _ = read(data, 1 << 20, True, monkeypatch)
    line = data[: data.index(b"<title>X")].count(b"\n")  # the line of its <page>
    assert skips == {"by_reason": {"bad_id": 1},
                     "examples": {"bad_id": [f"dump.xml:{line} (id 'x', title 'X')"]}}


@pytest.mark.parametrize(
    ("doctype", "text", "expected"),
    [
        ('<!DOCTYPE mediawiki [<!ENTITY who "the editors">]>\n', "by &who;", "by the editors"),
        ('<!DOCTYPE mediawiki [<!ATTLIST text deleted CDATA "yes">]>\n', "body", None),
    ],
)
def test_a_document_with_a_dtd_is_read_by_expat_alone(doctype, text, expected, monkeypatch):
    data = (doctype + HEADER + ordinary(1) + page(50, "X", raw_text=text) + FOOTER).encode()
    pages, skips, error = read(data, 1 << 20, True, monkeypatch)
    assert (pages, skips, error) == read(data, 1 << 20, False, monkeypatch)
    assert error is None and pages[-1].text == expected  # the entity, or the default attribute
    assert fast_reads(data, monkeypatch) == 0


def test_unescape_is_exact():
    assert unescape("a &amp;lt; &lt;b&gt; &quot;&apos; &#65;&#x263A; &#38;amp;") == (
        "a &lt; <b> \"' A\u263a &amp;")
    assert unescape("no references") == "no references"
    for bad in ("a & b", "&nbsp;", "&#0;", "&#xFFFF;", "&#xDFFF;", "&amp", "&#;", "&#x;"):
        assert unescape(bad) is None, bad


def test_shared_pages_are_read_once_and_hold_one_text(monkeypatch):
    old = (HEADER + ordinary(1, 5) + FOOTER).encode()
    new = (HEADER + ordinary(1, 4) + page(5, "Ordinary 5", "Changed.") + FOOTER).encode()
    alone = [list(parse_export(iter([d]), "d", Skips())) for d in (old, new)]
    shared = SharedPages()
    old_pages = parse_export(iter([old]), "old", Skips(), shared=shared)
    new_pages = parse_export(iter([new]), "new", Skips(), shared=shared)
    pairs = list(zip(old_pages, new_pages, strict=True))
    assert [a for a, _ in pairs] == alone[0] and [b for _, b in pairs] == alone[1]
    # the first pages go to the fast path once the header's page is behind
    assert [a.text is b.text for a, b in pairs] == [False, True, True, True, False]


def test_shared_pages_forget_the_oldest_beyond_their_budget():
    buf = b"<page><id>1</id></page><page><id>2</id></page>"
    first, second = (0, 23), (23, 46)
    assert SharedPages.key(buf, *first) == b"1" and SharedPages.key(buf, *second) == b"2"
    assert SharedPages.key(b"<page></page>", 0, 13) == b""
    reader, other = object(), object()
    shared = SharedPages(max_bytes=30)
    shared.offer(reader, b"1", buf, *first, "page one")
    shared.offer(reader, b"2", buf, *second, "page two")  # 46 bytes kept > 30: one dropped
    assert shared.take(other, b"1", buf, *first) is None
    assert shared.take(other, b"2", buf, *second) == "page two"
    shared.offer(reader, b"1", buf, *first, "page one")
    assert shared.take(reader, b"1", buf, *first) is None  # never from the same reader
    shared.offer(reader, b"1", buf, *first, "page one")
    assert shared.take(other, b"1", buf, *second) is None  # other bytes
    assert shared.take(other, b"1", buf, *first) is None  # forgotten by the failed take
