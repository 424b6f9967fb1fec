"""MediaWiki XML reader, the dump dispatcher and the article filter, on small exports."""

from __future__ import annotations

import bz2
import gzip
import threading
from xml.sax.saxutils import escape, quoteattr

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps import mediawiki
from tw_jax.preprocess.dumps.mediawiki import Page, iter_pages
from tw_jax.preprocess.dumps.wikipedia import (
    IdBitmap,
    iter_articles,
    iter_dump_pages,
    paragraphs_of,
    sniff_format,
)
from tw_jax.preprocess.runners.accounting import Skips

NS_010 = "http://www.mediawiki.org/xml/export-0.10/"
NS_011 = "http://www.mediawiki.org/xml/export-0.11/"


def page_xml(
    page_id: object,
    title: str,
    text: str | None = "",
    ns: object = 0,
    redirect: str | None = None,
    deleted: bool = False,
) -> str:
    """One <page> element shaped like a pages-articles dump's."""
    parts = [f"  <page>\n    <title>{escape(title)}</title>\n"]
    if ns is not None:
        parts.append(f"    <ns>{ns}</ns>\n")
    if page_id is not None:
        parts.append(f"    <id>{page_id}</id>\n")
    if redirect is not None:
        parts.append(f"    <redirect title={quoteattr(redirect)} />\n")
    parts.append(
        "    <revision>\n      <id>999</id>\n      <parentid>998</parentid>\n"
        "      <timestamp>2021-08-01T00:00:00Z</timestamp>\n"
        "      <contributor>\n        <username>Someone</username>\n        <id>42</id>\n"
        "      </contributor>\n      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
    )
    if deleted:
        parts.append('      <text bytes="0" deleted="deleted" />\n')
    elif text is not None:
        parts.append(
            f'      <text bytes="{len(text)}" xml:space="preserve">{escape(text)}</text>\n'
        )
    parts.append("      <sha1>abc</sha1>\n    </revision>\n  </page>\n")
    return "".join(parts)


def export_xml(*pages: str, namespace: str = NS_010) -> str:
    version = namespace.rstrip("/").rsplit("-", 1)[-1]
    return (
        f'<mediawiki xmlns="{namespace}" version="{version}" xml:lang="en">\n'
        "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <namespaces>\n"
        '      <namespace key="0" case="first-letter" />\n'
        '      <namespace key="1" case="first-letter">Talk</namespace>\n'
        "    </namespaces>\n  </siteinfo>\n" + "".join(pages) + "</mediawiki>\n"
    )


SAMPLE_PAGES = (
    page_xml(10, "Anarchism", "'''Anarchism''' is a [[political philosophy]].\n\nSecond."),
    page_xml(11, "Talk:Anarchism", "talk", ns=1),
    page_xml(
        12,
        "AccessibleComputing",
        "#REDIRECT [[Computer accessibility]]",
        redirect="Computer accessibility",
    ),
    page_xml(13, "Gone", deleted=True),
    page_xml(14, "Q&A <test>", "A & B < C"),
)
EXPECTED = [
    Page(10, 0, "Anarchism", "'''Anarchism''' is a [[political philosophy]].\n\nSecond.", None),
    Page(11, 1, "Talk:Anarchism", "talk", None),
    Page(
        12,
        0,
        "AccessibleComputing",
        "#REDIRECT [[Computer accessibility]]",
        "Computer accessibility",
    ),
    Page(13, 0, "Gone", None, None),
    Page(14, 0, "Q&A <test>", "A & B < C", None),
]


def _multistream(data: bytes, piece: int) -> bytes:
    return b"".join(bz2.compress(data[i : i + piece]) for i in range(0, len(data), piece))


@pytest.mark.parametrize("kind", ["plain", "bz2", "multistream", "gzip"])
def test_reads_pages_from_every_container(tmp_path, kind):
    data = export_xml(*SAMPLE_PAGES).encode()
    path = tmp_path / "dump.xml"
    if kind == "bz2":
        path, data = tmp_path / "dump.xml.bz2", bz2.compress(data)
    elif kind == "multistream":
        path, data = tmp_path / "dump.xml.bz2", _multistream(data, 300)
    elif kind == "gzip":
        path, data = tmp_path / "dump.xml.gz", gzip.compress(data)
    path.write_bytes(data)
    skips = Skips()
    assert list(iter_pages(path, skips)) == EXPECTED
    assert skips.total == 0


@pytest.mark.parametrize(
    "namespace",
    [NS_010, NS_011, "http://www.mediawiki.org/xml/export-0.9/", ""],
)
def test_schema_versions_read_alike(tmp_path, namespace):
    xml = export_xml(*SAMPLE_PAGES, namespace=namespace)
    if not namespace:
        xml = xml.replace(' xmlns=""', "")
    path = tmp_path / "dump.xml"
    path.write_text(xml, encoding="utf-8")
    assert list(iter_pages(path, Skips())) == EXPECTED


def test_prefixed_namespace_matches_local_names(tmp_path):
    xml = export_xml(page_xml(5, "A", "text"))
    xml = xml.replace(f'xmlns="{NS_010}"', f'xmlns:mw="{NS_010}"')
    xml = xml.replace("<", "<mw:").replace("<mw:/", "</mw:")
    path = tmp_path / "dump.xml"
    path.write_text(xml, encoding="utf-8")
    assert list(iter_pages(path, Skips())) == [Page(5, 0, "A", "text", None)]


def test_page_details(tmp_path):
    two_revisions = page_xml(7, "Multi", "old text").replace(
        "    </revision>\n", "    </revision>\n    <revision><text>new text</text></revision>\n"
    )
    xml = export_xml(
        page_xml(5, "No text", None),
        two_revisions,
        page_xml(8, "Empty", ""),
        page_xml(9, "Spaces", "  line\n\n  kept  "),
    )
    path = tmp_path / "dump.xml"
    path.write_text(xml, encoding="utf-8")
    assert list(iter_pages(path, Skips())) == [
        Page(5, 0, "No text", None, None),
        Page(7, 0, "Multi", "new text", None),
        Page(8, 0, "Empty", "", None),
        Page(9, 0, "Spaces", "  line\n\n  kept  ", None),
    ]


def test_bad_ids_are_skipped_and_counted(tmp_path):
    xml = export_xml(
        page_xml(1, "Good", "a"),
        page_xml("x12", "Letters", "b"),
        page_xml(None, "Missing", "c"),
        page_xml("-4", "Negative", "d"),
        page_xml(2, "No ns", "e", ns=None),
        page_xml(3, "Good too", "f"),
    )
    path = tmp_path / "dump.xml"
    path.write_text(xml, encoding="utf-8")
    skips = Skips()
    pages = list(iter_pages(path, skips))
    assert [p.id for p in pages] == [1, 3]
    assert dict(skips.counts) == {"bad_id": 3, "bad_ns": 1}
    line = xml.splitlines().index("    <title>Letters</title>")  # 1-based: its <page> line
    assert skips.examples["bad_id"][0] == f"{path}:{line} (id 'x12', title 'Letters')"
    assert skips.examples["bad_id"][1].endswith("(id None, title 'Missing')")
    assert skips.examples["bad_ns"] == [
        f"{path}:{xml.splitlines().index('    <title>No ns</title>')} (id 2, ns None)"
    ]


def test_malformed_xml_names_line_and_last_page(tmp_path):
    xml = export_xml(page_xml(1, "First", "a"), page_xml(2, "Second", "b"))
    xml = xml.replace("<title>Second</title>", "<title>Second</titel>")
    path = tmp_path / "dump.xml"
    path.write_text(xml, encoding="utf-8")
    skips = Skips()
    with pytest.raises(DumpError) as info:
        list(iter_pages(path, skips))
    err = info.value
    line = xml.splitlines().index("    <title>Second</titel>") + 1
    assert err.path == str(path)
    assert err.record.startswith(f"line {line}, column 19 (decompressed byte ")
    assert err.record.endswith("after page id=1 'First'")
    assert err.message == "malformed XML: mismatched tag"


@pytest.mark.parametrize("chunk", [1 << 20, 5, 1])
def test_invalid_utf8_in_a_page_skips_that_page(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(mediawiki, "CHUNK_BYTES", chunk)  # also bad and good sequences cut
    data = export_xml(page_xml(1, "First", "a \u00e9\u20ac"), page_xml(2, "Second", "caf\u00e9"),
                      page_xml(3, "Third", "\U0001d11e b")).encode()
    data = data.replace("caf\u00e9".encode(), b"caf\xe9")  # Latin-1 byte in a UTF-8 file
    path = tmp_path / "dump.xml"
    path.write_bytes(data)
    skips = Skips()
    pages = list(iter_pages(path, skips))
    assert [(p.id, p.text) for p in pages] == [(1, "a \u00e9\u20ac"), (3, "\U0001d11e b")]
    line = data[: data.index(b"<title>Second")].count(b"\n")  # the line of its <page>
    assert skips.as_dict() == {"by_reason": {"bad_utf8": 1},
                               "examples": {"bad_utf8": [f"{path}:{line} page id=2 'Second'"]}}


def test_invalid_utf8_outside_a_page_or_in_markup_is_named(tmp_path):
    data = export_xml(page_xml(1, "First", "a"), page_xml(2, "Second", "b")).encode()
    path = tmp_path / "dump.xml"
    path.write_bytes(data.replace(b"<sitename>Wiki", b"<sitename>Wi\xffki"))
    with pytest.raises(DumpError) as info:
        list(iter_pages(path, Skips()))
    assert info.value.message == "malformed XML: invalid UTF-8 outside any page"
    byte = data.index(b"<sitename>") + len(b"<sitename>Wi")
    assert info.value.record == f"decompressed byte {byte}, before the first complete page"

    path.write_bytes(data.replace(b"<title>Second", b"<tit\xe9le>Second"))
    with pytest.raises(DumpError) as info:
        list(iter_pages(path, Skips()))
    assert info.value.message == "malformed XML: invalid UTF-8"
    assert "after page id=1 'First'" in info.value.record
    assert f"(decompressed byte {data.index(b'<title>Second') + 4})" in info.value.record


def test_a_document_in_another_encoding_is_left_to_expat(tmp_path):
    xml = export_xml(page_xml(1, "Caf\u00e9", "na\u00efve"))
    path = tmp_path / "latin1.xml"
    path.write_bytes(('<?xml version="1.0" encoding="ISO-8859-1"?>\n' + xml).encode("latin-1"))
    skips = Skips()
    assert [(p.title, p.text) for p in iter_pages(path, skips)] == [("Caf\u00e9", "na\u00efve")]
    assert skips.total == 0


def test_unterminated_document(tmp_path):
    xml = export_xml(page_xml(1, "First", "a"))
    path = tmp_path / "dump.xml"
    path.write_text(xml[: xml.index("</mediawiki>")], encoding="utf-8")
    with pytest.raises(DumpError, match=r"after page id=1 'First': malformed XML: no element"):
        list(iter_pages(path, Skips()))


def test_not_an_export(tmp_path):
    path = tmp_path / "other.xml"
    path.write_text("<html><page/></html>", encoding="utf-8")
    with pytest.raises(DumpError, match=r"not a MediaWiki XML export \(root element <html>\)"):
        list(iter_pages(path, Skips()))


@pytest.mark.parametrize("prefetch", [0, 4])
def test_truncated_bz2_after_good_streams_names_last_page(tmp_path, monkeypatch, prefetch):
    monkeypatch.setattr(mediawiki, "CHUNK_BYTES", 256)
    data = export_xml(*[page_xml(i, f"Page {i}", "text " * 20) for i in range(1, 6)]).encode()
    cut = data.index(b"<page>", data.index(b"<title>Page 3</title>"))  # pages 1-3 complete
    blob = bz2.compress(data[:cut]) + bz2.compress(data[cut:])[:-30]
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(blob)
    got = []
    with pytest.raises(DumpError) as info:
        for page in iter_pages(path, Skips(), prefetch=prefetch):
            got.append(page.id)
    assert got == [1, 2, 3]
    err = info.value
    assert err.path == str(path)
    assert err.record.startswith("decompressed byte ")
    assert err.record.endswith("after page id=3 'Page 3'")
    assert err.message.startswith("truncated bz2 archive")


def test_stopping_early_stops_the_prefetch_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(mediawiki, "CHUNK_BYTES", 128)
    data = export_xml(*[page_xml(i, f"Page {i}", "text " * 50) for i in range(1, 50)]).encode()
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(_multistream(data, 1000))
    pages = iter_pages(path, Skips(), prefetch=2)
    assert next(pages).id == 1
    assert any(t.name.startswith("prefetch ") for t in threading.enumerate())
    pages.close()
    assert not any(t.name.startswith("prefetch ") for t in threading.enumerate())
    assert [p.id for p in iter_pages(path, Skips(), prefetch=2)] == list(range(1, 50))


def test_corrupt_bz2_is_a_dump_error(tmp_path):
    blob = bytearray(bz2.compress(export_xml(*SAMPLE_PAGES).encode()))
    blob[len(blob) // 2] ^= 0x55
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(bytes(blob))
    with pytest.raises(DumpError, match=r"dump\.xml\.bz2, decompressed byte 0, before the first"):
        list(iter_pages(path, Skips()))


# -- dumps.wikipedia: dispatch and the article filter ----------------------------------------


def test_sniff_and_dispatch_ignore_the_file_name(tmp_path):
    path = tmp_path / "looks_like.jsonl"
    path.write_bytes(bz2.compress(b"\xef\xbb\xbf\n  " + export_xml(*SAMPLE_PAGES).encode()))
    assert sniff_format(path) == "xml"
    assert list(iter_dump_pages(path, Skips())) == EXPECTED
    empty = tmp_path / "empty.xml"
    empty.write_bytes(b"  \n")
    with pytest.raises(DumpError, match="no content"):
        sniff_format(empty)
    other = tmp_path / "other.txt"
    other.write_bytes(b"hello")
    with pytest.raises(DumpError, match="neither MediaWiki XML nor JSON lines"):
        sniff_format(other)


def test_iter_articles_counts_every_dropped_page(tmp_path):
    xml = export_xml(
        page_xml(1, "Kept", "Some text."),
        page_xml(2, "Talk:Kept", "talk", ns=1),
        page_xml(3, "Template:X", "{{x}}", ns=10),
        page_xml(4, "Redirect element", "anything", redirect="Kept"),
        page_xml(5, "Redirect text", "#redirect [[Kept]]"),
        page_xml(6, "Redirect text caps", "  #REDIRECT:[[Kept]]"),
        page_xml(7, "No text", None),
        page_xml(8, "Deleted", deleted=True),
        page_xml(9, "Blank", " \n "),
        page_xml(1, "Kept again", "duplicate"),
        page_xml(2, "Talk duplicate", "talk", ns=1),
        page_xml(80_000_000, "Big id", "Text with a large id."),
        page_xml(10, "Mentions #REDIRECT later", "Text about #REDIRECT."),
    )
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(bz2.compress(xml.encode()))
    skips = Skips()
    articles = list(iter_articles(iter_dump_pages(path, skips), skips))
    assert [a.id for a in articles] == [1, 80_000_000, 10]
    assert dict(skips.counts) == {
        "namespace": 2,
        "redirect": 3,
        "missing_text": 3,
        "duplicate_id": 2,
    }
    assert skips.examples["duplicate_id"] == [
        "page id=1 'Kept again'",
        "page id=2 'Talk duplicate'",
    ]
    assert skips.examples["namespace"][0] == "page id=2 'Talk:Kept' ns=1"


def test_id_bitmap_is_small_and_exact():
    ids = IdBitmap()
    assert ids.add(0) and ids.add(7) and ids.add(8) and ids.add(78_000_000)
    assert not ids.add(7)
    assert 8 in ids and 9 not in ids and 78_000_000 in ids
    assert len(ids.bits) <= 2 * (78_000_000 // 8 + 1)  # ~10 MB, not a set of ints
    assert ids.add(1 << 40) and not ids.add(1 << 40) and (1 << 40) in ids  # overflow set
    assert len(ids.bits) < 32 << 20


def test_paragraphs_of_wikitext_page():
    page = Page(
        1, 0, "A", "'''A''' is a [[b|letter]].<ref>x</ref>\n\n== See also ==\n* [[B]]", None
    )
    assert paragraphs_of(page) == ["A is a letter."]
    assert paragraphs_of(Page(2, 0, "B", None, None)) == []
    with pytest.raises(ValueError, match="unknown markup"):
        paragraphs_of(Page(3, 0, "C", "x", None, markup="html"))
