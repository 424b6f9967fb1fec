"""Reading a ``<page>`` the way MediaWiki writes it, without expat: the common case, made cheap.

Expat calls back into Python for every element of every page (some 27 a page, title and ids and
contributor and sha1 …), which cost about as much CPU as the rest of reading a dump once bz2 is
done. A dump page written by MediaWiki has one fixed shape, though, so
:func:`scan_page` reads it with one compiled pattern for the head (``<title>``, ``<ns>``,
``<id>``, an optional ``<redirect title="…"/>``, the revision's metadata up to ``<text …>``),
two byte searches for the text and one pattern for the tail (``</revision></page>``).

The fast path never decides anything expat would decide differently. It accepts a page only
when the page is certainly well-formed and certainly reads as expat would read it, and answers
None otherwise, so that the caller hands the page to expat (which then reads it, or reports the
malformed XML with its position). Refused, among others: any comment, CDATA section,
processing instruction or namespace prefix; an element nested where MediaWiki nests none; a
second ``<title>``, ``<ns>``, ``<id>``, ``<revision>`` or ``<text>``; attributes in single quotes
or repeated; an unknown entity (``&nbsp;``), a stray ``&`` or a character reference to a
character XML forbids; a raw ``>`` in the metadata (MediaWiki escapes it) and ``]]>`` in the
text; U+FFFE and U+FFFF; and a page id or namespace that is not a plain number (expat's path
records those skips with their line number). Control characters and carriage returns are found
by the caller, once per decompressed chunk (:func:`scan_chunk`), and keep their pages on
expat's path too.

Entities are unescaped exactly as expat does: ``&lt; &gt; &amp; &quot; &apos;`` and decimal or
hexadecimal character references; attribute values are used only when they hold no tab or
newline (which expat would turn into spaces).
"""

from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np

# --- the shape of a page ----------------------------------------------------------------------

_WS = rb"[ \t\n]*"
_NAME = rb"[A-Za-z_][A-Za-z0-9_.\-]*+"
_ANAME = rb"[A-Za-z_][A-Za-z0-9_.:\-]*+"
_REF = rb"&(?:lt|gt|amp|quot|apos|#[0-9]++|#x[0-9a-fA-F]++);"
# Character data of a metadata element: no markup, no raw ">" (MediaWiki escapes it, so "]]>"
# cannot occur either), only the references above.
_DATA = rb"[^<&>]*+(?:" + _REF + rb"[^<&>]*+)*+"
# An attribute value in double quotes, without tabs or newlines (expat would normalise them).
_AVAL = rb'[^"<&\t\n]*+(?:' + _REF + rb'[^"<&\t\n]*+)*+'
_ATTR = rb"[ \t\n]+" + _ANAME + rb'="' + _AVAL + rb'"'


def _simple(group: str, excluded: bytes) -> bytes:
    """An element holding only character data (or empty), with at most one attribute (so never a
    repeated one), whose name is not one of ``excluded``: those are the ones the reader keeps."""
    name = group.encode()
    return (
        rb"<(?!(?:" + excluded + rb")[ \t\n/>])(?P<" + name + rb">" + _NAME + rb")"
        rb"(?:" + _ATTR + rb")?[ \t\n]*(?:/>|>" + _DATA + rb"</(?P=" + name + rb")>)"
    )


def _contributor(group: str) -> bytes:
    return (
        rb"<contributor(?:"
        + _ATTR
        + rb")?[ \t\n]*(?:/>|>"
        + _WS
        + rb"(?:"
        + _simple(group, b"page")
        + _WS
        + rb")*+</contributor>)"
    )


def _revision_element(contributor: str, simple: str) -> bytes:
    return rb"(?:" + _contributor(contributor) + rb"|" + _simple(simple, b"text|page") + rb")"


# From "<page>" to the end of the revision's "<text …>" (or "<text …/>") start tag.
_HEAD = re.compile(
    rb"<page>"
    + _WS
    + rb"<title>(?P<title>"
    + _DATA
    + rb")</title>"
    + _WS
    + rb"<ns>(?P<ns>[0-9]++)</ns>"
    + _WS
    + rb"<id>(?P<id>[0-9]++)</id>"
    + _WS
    + rb'(?:(?P<redirect><redirect(?:[ \t\n]+title="(?P<target>'
    + _AVAL
    + rb')")?[ \t\n]*/>)'
    + _WS
    + rb")?"
    + rb"(?:"
    + _simple("p", b"title|ns|id|redirect|revision|page")
    + _WS
    + rb")*+"
    + rb"<revision>"
    + _WS
    + rb"(?:"
    + _revision_element("c", "r")
    + _WS
    + rb")*+"
    + rb"<text(?P<attrs>(?:"
    + _ATTR
    + rb")*+)[ \t\n]*(?P<empty>/?)>"
)
# From the end of "</text>" (or of an empty text element) to the end of "</page>".
_TAIL = re.compile(
    _WS + rb"(?:" + _revision_element("c", "r") + _WS + rb")*+</revision>" + _WS + rb"</page>"
)
_ATTR_NAME = re.compile(rb"[ \t\n]+(" + _ANAME + rb')="')
# The groups of _HEAD that scan_page reads, in the order it reads them.
_FIELDS = ("empty", "attrs", "id", "ns", "title", "redirect", "target")

# --- entities ---------------------------------------------------------------------------------

_ANY_REF = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#([0-9]+)|#x([0-9a-fA-F]+));")
_NAMED_CHAR = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_ENTITIES = {f"&{name};": char for name, char in _NAMED_CHAR.items()}
_NAMED_REF_OR_AMPERSAND = re.compile(r"&(lt|gt|amp|quot|apos);|&")


def _xml_char(code: int) -> bool:
    """Whether XML 1.0 allows the character (what expat checks of a character reference)."""
    if code < 0x20:
        return code in (0x9, 0xA, 0xD)
    return code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or 0x10000 <= code <= 0x10FFFF


class _Refused(Exception):
    pass


def _reference(m: re.Match[str]) -> str:
    named = _ENTITIES.get(m[0])
    if named is not None:
        return named
    decimal, hexadecimal = m[2], m[3]
    code = int(decimal) if decimal is not None else int(hexadecimal, 16)
    if not _xml_char(code):
        raise _Refused
    return chr(code)


def unescape(text: str) -> str | None:
    """``text`` with its entity and character references replaced, as expat does; None when it
    holds a ``&`` that starts no valid reference (expat would report the XML as malformed).

    An article holds a few dozen references, nearly always the five named entities
    (``&lt;ref&gt;``, ``&quot;``): one split of the text at every ``&``, naming the entity when
    one starts there, and the pieces joined back with the entities' characters, does in C what a
    Python call per reference did. Anything else (a character reference, a stray ``&``) takes
    one regular-expression pass with a call per reference, which checks each.
    """
    if "&" not in text:  # most titles
        return text
    parts = _NAMED_REF_OR_AMPERSAND.split(text)  # text, entity name or None, text, …, text
    names = parts[1::2]
    if None in names:  # an "&" that starts no named entity
        return _unescape_all(text)
    parts[1::2] = map(_NAMED_CHAR.__getitem__, names)
    return "".join(parts)


def _unescape_all(text: str) -> str | None:
    """:func:`unescape` for any text, character references included."""
    ampersands = text.count("&")
    try:
        text, references = _ANY_REF.subn(_reference, text)
    except _Refused:
        return None
    # Every "&" must start a reference (none holds another "&").
    return text if references == ampersands else None


def _decoded(raw: bytes) -> str | None:
    text = unescape(raw.decode("utf-8"))
    if text is not None and ("\ufffe" in text or "\uffff" in text):
        return None
    return text


class SharedPages:
    """Pages read by one of two readers (an old and a new snapshot read side by side), kept until
    the other reader comes to the same page.

    An article unchanged between two dumps is the same ``<page>`` element in both, byte for
    byte (same revision, same text). The reader that comes second then takes the first one's
    page (a dictionary lookup and a comparison of bytes) instead of reading it again, and the
    two versions hold the very same text string, which the comparison of the two finds equal at
    once. Pages never claimed (articles new, deleted or changed) are dropped oldest first beyond
    ``max_bytes`` of page bytes.
    """

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        # key -> (reader, the page's bytes, the page)
        self._waiting: OrderedDict[bytes, tuple[object, bytes, object]] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes

    @staticmethod
    def key(buf: bytes, start: int, end: int) -> bytes:
        """What pairs two versions of a page: the content of its first ``<id>`` (the page id
        in a dump's page; only a hint, since the bytes are compared before a page is taken)."""
        at = buf.find(b"<id>", start, end)
        stop = buf.find(b"</id>", at, end) if at >= 0 else -1
        return buf[at + 4 : stop] if stop >= 0 else b""

    def take(self, reader: object, key: bytes, buf: bytes, start: int, end: int) -> object | None:
        """The page that the other reader read from the same bytes as ``buf[start:end]``, or
        None; a page of either reader waiting under ``key`` is forgotten either way."""
        waiting = self._waiting.pop(key, None)
        if waiting is None:
            return None
        other, raw, page = waiting
        self._bytes -= len(raw)
        if other is not reader and len(raw) == end - start and buf.startswith(raw, start):
            return page
        return None

    def offer(
        self, reader: object, key: bytes, buf: bytes, start: int, end: int, page: object
    ) -> None:
        """Keeps ``page``, read from ``buf[start:end]`` by ``reader``, for the other reader."""
        self._waiting[key] = (reader, buf[start:end], page)
        self._bytes += end - start
        while self._bytes > self._max_bytes:
            self._bytes -= len(self._waiting.popitem(last=False)[1][1])


# --- the fast path ----------------------------------------------------------------------------


def page_end(buf: bytes, start: int) -> int:
    """Where the first ``</page>`` after the ``<page>`` at ``start`` begins, or -1: the answer of
    ``buf.find(b"</page>", start + 6)``, found faster.

    A page's text, most of its bytes, holds no ``<`` (MediaWiki escapes it), and a search for one
    byte runs several times faster than one for seven. So the search goes to ``<text``, then to
    the next ``<`` after it (no ``</page>`` begins in between), and looks for ``</page>`` only
    before and after those.
    """
    after = start + 6  # len(b"<page>")
    text = buf.find(b"<text", after)
    if text < 0:
        return buf.find(b"</page>", after)
    end = buf.find(b"</page>", after, text)
    if end >= 0:
        return end
    markup = buf.find(b"<", text + 1)
    return -1 if markup < 0 else buf.find(b"</page>", markup)


# The fields the reader keeps of one page, in the order of mediawiki.Page's: id, ns, title,
# text, redirect.
ScannedPage = tuple[int, int, str, str | None, str | None]


def scan_page(buf: bytes, start: int, end: int) -> ScannedPage | None:
    """The page ``buf[start:end]`` (from ``<page>`` to the end of ``</page>``), or None when it is
    not certainly read alike by expat (see the module docstring).

    The caller has made sure that the page lies where expat expects an element (a child of the
    root) and that it holds no control character or carriage return (:func:`scan_chunk`).
    """
    head = _HEAD.match(buf, start, end)
    if head is None:
        return None
    text_start = head.end()
    empty, attrs, page_id, ns, title, redirect, target = head.group(*_FIELDS)
    if empty:
        text_end = tail_start = text_start
    else:
        # From the end: "</text>" is a few dozen bytes before "</page>". Any "<" before it (an
        # earlier "</text>" too) sends the page to expat.
        text_end = buf.rfind(b"</text>", text_start, end)
        if text_end < 0 or buf.find(b"<", text_start, text_end) >= 0:
            return None
        if (
            buf.find(b">", text_start, text_end) >= 0
            and buf.find(b"]]>", text_start, text_end) >= 0
        ):
            return None
        tail_start = text_end + 7
    if _TAIL.fullmatch(buf, tail_start, end) is None:
        return None
    # The metadata (the text's characters are checked once decoded, by _decoded and unescape);
    # a byte search for the first byte, rare, before the slower one for both.
    if _suspect(buf, b"\xef", b"\xef\xbf", start, text_start) or _suspect(
        buf, b"\xef", b"\xef\xbf", tail_start, end
    ):
        return None  # U+FFC0-U+FFFF: refuse rather than look closer
    if (
        _suspect(buf, b"&", b"&#", start, text_start) or _suspect(buf, b"&", b"&#", tail_start, end)
    ) and (
        # Character references must name characters XML allows.
        unescape(buf[start:text_start].decode("utf-8")) is None
        or unescape(buf[tail_start:end].decode("utf-8")) is None
    ):
        return None
    names = _ATTR_NAME.findall(attrs) if attrs else []
    if len(set(names)) != len(names):
        return None  # a repeated attribute is malformed XML
    title = _decoded(title)
    if title is None:
        return None
    if empty:
        text: str | None = ""
    else:
        text = _decoded(buf[text_start:text_end])
        if text is None:
            return None
    if b"deleted" in names:
        text = None
    if redirect is not None:
        redirect = "" if target is None else _decoded(target)
        if redirect is None:
            return None
    return int(page_id), int(ns), title, text, redirect


def _suspect(buf: bytes, first: bytes, sequence: bytes, start: int, end: int) -> bool:
    """Whether ``sequence`` occurs in buf[start:end]; ``first`` is its first byte."""
    at = buf.find(first, start, end)
    return at >= 0 and buf.find(sequence, at, end) >= 0


# Bytes that keep a page on expat's path: the control characters XML forbids (expat reports
# them), and carriage returns (expat turns "\r\n" and "\r" into "\n" and counts them as lines).
# That is every byte below 0x20 but tab and newline.
_UNSAFE_BYTES = bytes(range(0x09)) + b"\x0b\x0c" + bytes(range(0x0E, 0x20)) + b"\r"
_UNSAFE = re.compile(b"[" + re.escape(_UNSAFE_BYTES) + b"]")


def scan_chunk(data: bytes) -> tuple[list[int], int]:
    """The offsets in ``data`` (a chunk checked as UTF-8) of the bytes that keep their page off
    the fast path (nearly always none), and the number of its newlines.

    Three vectorised counts over the bytes (newlines, tabs, everything below 0x20) tell both
    whether any unsafe byte is there and how many lines the chunk holds, in less than half the
    time of the one ``translate`` that did it before (0.020 against 0.056 CPU-s over the 87 MB
    of one benchmark dump); the offsets are looked for only when there is one.
    """
    array = np.frombuffer(data, np.uint8)
    newlines = int(np.count_nonzero(array == 0x0A))
    controls = int(np.count_nonzero(array < 0x20))
    if controls == newlines + int(np.count_nonzero(array == 0x09)):
        return [], newlines
    return [m.start() for m in _UNSAFE.finditer(data)], newlines
