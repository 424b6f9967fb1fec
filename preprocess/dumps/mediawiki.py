"""Stream the pages of a MediaWiki XML export (``pages-articles*.xml[.bz2|.gz]``).

A full English dump is ~100 GB of XML, so the reader never builds a tree: it feeds 1 MiB chunks of
decompressed bytes to expat and keeps only the fields of the page being read, handing each page
out as soon as its ``</page>`` is seen. Elements are matched by local name, so schema versions
0.9, 0.10 and 0.11 (which differ in the namespace URI and a few optional fields) read alike.
Pages written the way MediaWiki writes them skip expat (:mod:`.page_scan`, which reads them as
expat would; :class:`_Segments` keeps expat's state and positions right around them).

Bad input never escapes as a bare parser or decompressor traceback: malformed XML and broken
archives raise :class:`DumpError` naming the file, the position (line, column, decompressed byte)
and the last page read completely, so a user can find the spot.

Invalid UTF-8 costs one page, not the dump: expat refuses the whole document at the first bad
byte, so each chunk is checked before expat sees it (one C-speed decode, the cost of a few per
cent of parsing), every invalid byte is replaced by ``?`` (the same length, so positions stay
those of the file) and remembered; the page around it is then skipped and counted as
``bad_utf8`` with its id and title. An invalid byte outside any page (in ``<siteinfo>``) or in
markup that no longer parses is still a :class:`DumpError` ("invalid UTF-8"). A document that
declares another encoding is left to expat.
"""

from __future__ import annotations

import codecs
import os
import re
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from xml.parsers import expat

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.compressed import CheckedStream, iter_chunks, open_binary
from tw_jax.preprocess.dumps.page_scan import SharedPages, page_end, scan_chunk, scan_page
from tw_jax.preprocess.runners.accounting import Skips

CHUNK_BYTES = 1 << 20
# Chunks decompressed ahead by a background thread (0: none). See compressed.iter_chunks.
PREFETCH_CHUNKS = 4
# Expat delivers character data in pieces of at most this size; large enough that most page
# texts arrive in one piece.
_EXPAT_BUFFER = 1 << 20
# Any encoding declared in the XML declaration (MediaWiki writes none: UTF-8) or a UTF-16/32
# byte-order mark: then the bytes are not ours to check as UTF-8.
_OTHER_ENCODING = re.compile(
    rb"^(?:\xff\xfe|\xfe\xff|\x00\x00\xfe\xff|\s*<\?xml[^>]*\bencoding\s*=\s*[\"'](?!utf-?8[\"']))",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a dump, as read: nothing is cleaned or filtered yet.

    ``text`` is None when the revision has no ``<text>`` or it is marked deleted; ``redirect``
    is the target title of a ``<redirect title=…/>`` element (``""`` when it has no title).
    ``markup`` says how ``text`` is written: ``"wikitext"`` (XML dumps) or ``"plain"``
    (WikiExtractor output, one paragraph a line).
    """

    id: int
    ns: int
    title: str
    text: str | None
    redirect: str | None
    markup: str = "wikitext"


def parse_int(value: str | None, *, signed: bool = False) -> int | None:
    """An ASCII decimal integer, or None: unlike int(), rejects '1_000', '+3', '١٢' and ''."""
    if value is None:
        return None
    value = value.strip()
    digits = value[1:] if signed and value.startswith("-") else value
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    return int(value)


def describe_page(page_id: object, title: str | None) -> str:
    """How error messages name a page: ``page id=12 'Anarchism'``."""
    return f"page id={page_id} {title!r}"


class _PageCollector:
    """Expat handlers that turn element events into :class:`Page` objects (or counted skips)."""

    def __init__(self, parser: expat.XMLParserType, path: str, skips: Skips) -> None:
        self.parser = parser
        self.path = path
        self.skips = skips
        self.stack: list[str] = []
        self.pages: list[Page] = []
        self.local_names: dict[str, str] = {}
        self.in_page = False
        self.buf: list[str] = []
        self.capturing: str | None = None  # local name of the element whose text we collect
        # The last page read completely: its description, or the page (described when needed).
        self.last_page: str | Page | None = None
        # Decompressed byte offsets of invalid UTF-8 not yet attributed to a page, ascending.
        self.bad_bytes: deque[int] = deque()
        # What parse_export kept from expat (pages it read on the fast path): expat's positions
        # plus these are the file's.
        self.byte_shift = 0
        self.line_shift = 0
        self.last_end = -1  # expat's byte index of the last end tag it reported
        self._reset()

    def _reset(self) -> None:
        self.page_line = 0
        self.page_byte = 0
        self.id_text: str | None = None
        self.ns_text: str | None = None
        self.title: str | None = None
        self.redirect: str | None = None
        self.text: str | None = None

    def _local(self, name: str) -> str:
        local = self.local_names.get(name)
        if local is None:
            local = name.rpartition(":")[2]
            self.local_names[name] = local
        return local

    def _capture(self, name: str) -> None:
        self.capturing = name
        self.buf = []
        self.parser.CharacterDataHandler = self.buf.append

    def start(self, name: str, attrs: dict[str, str]) -> None:
        local = self.local_names.get(name) or self._local(name)
        stack = self.stack
        parent = stack[-1] if stack else None
        stack.append(local)
        if parent is None:
            if local != "mediawiki":
                raise _NotAnExport(local)
            return
        if local == "page" and parent == "mediawiki":
            self.in_page = True
            self._reset()
            self.page_line = self.parser.CurrentLineNumber + self.line_shift
            self.page_byte = self.parser.CurrentByteIndex + self.byte_shift
            if self.bad_bytes and self.bad_bytes[0] < self.page_byte:
                raise _BadByteOutsidePage(self.bad_bytes[0])
        elif not self.in_page:
            return
        elif parent == "page":
            if local in ("title", "ns", "id"):
                self._capture(local)
            elif local == "redirect":
                self.redirect = attrs.get("title", "")
            elif local == "revision":
                self.text = None  # with several revisions, the last one's text counts
        elif local == "text" and parent == "revision":
            if "deleted" in attrs:
                self.text = None
            else:
                self._capture("text")

    def end(self, name: str) -> None:
        local = self.stack.pop()
        self.last_end = self.parser.CurrentByteIndex
        if self.capturing is not None and local == self.capturing:
            value = "".join(self.buf)
            self.capturing = None
            self.parser.CharacterDataHandler = None
            if local == "text":
                self.text = value
            elif self.stack and self.stack[-1] == "page":
                if local == "title":
                    self.title = value
                elif local == "id":
                    self.id_text = value
                else:
                    self.ns_text = value
        elif local == "page" and self.in_page:
            self.in_page = False
            self._finish_page()

    def _bad_bytes_in_page(self) -> bool:
        """Whether invalid UTF-8 lay in the page that ends here (and forgets it)."""
        bad, end = self.bad_bytes, self.parser.CurrentByteIndex + self.byte_shift
        found = False
        while bad and bad[0] < end:
            bad.popleft()
            found = True
        return found

    def _finish_page(self) -> None:
        title = self.title
        page_id = parse_int(self.id_text)
        where = f"{self.path}:{self.page_line}"
        self.last_page = describe_page(page_id if page_id is not None else self.id_text, title)
        if self.bad_bytes and self._bad_bytes_in_page():
            self.skips.add("bad_utf8", f"{where} {self.last_page}")
            return
        if page_id is None:
            self.skips.add("bad_id", f"{where} (id {self.id_text!r}, title {title!r})")
            return
        if title is None:
            self.skips.add("missing_title", f"{where} (id {page_id})")
            return
        ns = parse_int(self.ns_text, signed=True)
        if ns is None:
            self.skips.add("bad_ns", f"{where} (id {page_id}, ns {self.ns_text!r})")
            return
        self.pages.append(Page(page_id, ns, title, self.text, self.redirect))

    def where_after(self) -> str:
        last = self.last_page
        if isinstance(last, Page):
            last = describe_page(last.id, last.title)
        return f"after {last}" if last else "before the first complete page"


class _NotAnExport(Exception):
    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.root = root


class _BadByteOutsidePage(Exception):
    def __init__(self, byte: int) -> None:
        super().__init__(byte)
        self.byte = byte


_SPANS = threading.local()  # the invalid spans found by the error handler, per thread


def _note_invalid(error: UnicodeDecodeError) -> tuple[str, int]:
    _SPANS.found.append((error.start, error.end))
    return "", error.end


codecs.register_error("tw_jax.invalid_utf8_spans", _note_invalid)


def _checked_utf8(data: bytes, final: bool) -> tuple[bytes, bytes, list[int]]:
    """``(bytes for expat, incomplete tail kept for the next chunk, offsets of invalid bytes)``:
    every invalid byte replaced by ``?``. Valid input (nearly always) costs one decode."""
    try:
        _, used = codecs.utf_8_decode(data, "strict", final)
        bad: list[int] = []
    except UnicodeDecodeError:
        _SPANS.found = []
        _, used = codecs.utf_8_decode(data, "tw_jax.invalid_utf8_spans", final)
        spans, _SPANS.found = _SPANS.found, []
        repaired = bytearray(data)
        bad = []
        for start, stop in spans:
            repaired[start:stop] = b"?" * (stop - start)
            bad.extend(range(start, stop))
        data = bytes(repaired)
    if used == len(data):
        return data, b"", bad
    return data[:used], data[used:], bad


def _parse_error(
    path: str,
    exc: expat.ExpatError,
    parser: expat.XMLParserType,
    collector: _PageCollector,
) -> DumpError:
    byte = parser.ErrorByteIndex + collector.byte_shift
    message = expat.ErrorString(exc.code) if exc.code else str(exc)
    if byte in collector.bad_bytes:  # an invalid byte in markup, where '?' does not parse
        message = "invalid UTF-8"
    record = (
        f"line {exc.lineno + collector.line_shift}, column {exc.offset} "
        f"(decompressed byte {byte}), "
        f"{collector.where_after()}"
    )
    return DumpError(path, record, f"malformed XML: {message}")


def iter_pages(
    path: str | os.PathLike[str],
    skips: Skips,
    *,
    prefetch: int | None = None,
    shared: SharedPages | None = None,
) -> Iterator[Page]:
    """Yield every page of a MediaWiki XML export in file order.

    Pages whose ``<id>`` is missing or not a non-negative integer are skipped and counted as
    ``bad_id`` (also ``missing_title`` and ``bad_ns``, which the schema forbids), pages holding
    invalid UTF-8 as ``bad_utf8``. Malformed XML, invalid UTF-8 outside the pages and corrupt or
    truncated archives raise :class:`DumpError`.

    ``prefetch`` chunks of 1 MiB are decompressed ahead in a background thread (default
    :data:`PREFETCH_CHUNKS`; 0 reads in the calling thread only), so decompression overlaps
    with parsing and with the caller's work on each page when a second core is free.
    ``shared`` hands unchanged pages to the reader of another snapshot read alongside
    (:class:`~tw_jax.preprocess.dumps.page_scan.SharedPages`).
    """
    path_s = os.fspath(path)
    ahead = PREFETCH_CHUNKS if prefetch is None else prefetch
    stream: CheckedStream
    with open_binary(path_s) as stream, closing(iter_chunks(stream, CHUNK_BYTES, ahead)) as chunks:
        # (closing: the prefetch thread stops before the stream closes, also on early exit)
        yield from parse_export(chunks, path_s, skips, stream, shared=shared)


def parse_export(
    chunks: Iterator[bytes],
    path: str,
    skips: Skips,
    stream: CheckedStream | None = None,
    *,
    shared: SharedPages | None = None,
) -> Iterator[Page]:
    """The pages of an export given as decompressed byte chunks (see :func:`iter_pages`).

    Split readers (one range of a multistream dump) feed their own chunks here; ``stream``, when
    given, learns the last page read so that its decompression errors can name it. ``shared``
    shares the pages read with the reader of another snapshot (see
    :class:`~tw_jax.preprocess.dumps.page_scan.SharedPages`).
    """
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.buffer_size = _EXPAT_BUFFER
    collector = _PageCollector(parser, path, skips)
    parser.StartElementHandler = collector.start
    parser.EndElementHandler = collector.end
    if stream is not None:
        stream.context = collector.where_after
    reader = _Segments(parser, collector, shared)
    received = 0  # decompressed bytes received so far
    pending = b""  # a UTF-8 sequence cut by the end of the last chunk
    check: bool | None = None  # UTF-8 checked unless the document declares another encoding
    while True:
        chunk = next(chunks, b"")
        data = pending + chunk if pending else chunk
        if check is None and data:
            check = not _OTHER_ENCODING.match(data)
            reader.fast = check  # the fast path reads UTF-8 only
        if check:
            data, pending, bad = _checked_utf8(data, not chunk)
            if bad:
                collector.bad_bytes.extend(received + i for i in bad)
        reader.add(data, received)
        received += len(data)
        try:
            reader.run(final=not chunk)
            if not chunk and collector.bad_bytes:
                raise _BadByteOutsidePage(collector.bad_bytes[0])
        except expat.ExpatError as exc:
            raise _parse_error(path, exc, parser, collector) from None
        except _NotAnExport as exc:
            raise DumpError(
                path,
                f"line {parser.CurrentLineNumber + collector.line_shift}",
                f"not a MediaWiki XML export (root element <{exc.root}>)",
            ) from None
        except _BadByteOutsidePage as exc:
            raise DumpError(
                path,
                f"decompressed byte {exc.byte}, {collector.where_after()}",
                "malformed XML: invalid UTF-8 outside any page",
            ) from None
        if collector.pages:
            done, collector.pages = collector.pages, []
            yield from done
        if not chunk:
            break


_PAGE_OPEN = b"<page>"
_PAGE_CLOSE = b"</page>"
# Bytes kept back from expat while no "<page>" is in sight (a "<page" cut by a chunk's end), and
# how far a page may run without its "</page>" before expat reads it as it comes.
_KEEP_BACK = len(_PAGE_OPEN) - 1
_MAX_PENDING_PAGE = 64 << 20
_BLANK = b" \t\n"


class _Segments:
    """Cuts the decompressed document into pages; reads each page that
    :func:`~tw_jax.preprocess.dumps.page_scan.scan_page` accepts itself and feeds expat the rest
    (the header, the footer, and any page out of the ordinary), in document order.

    A page is read on the fast path only while expat is known to stand between two children of
    the root (``clean``): the last bytes it was given are an end tag that brought it back to
    depth 1, then blanks ending with a newline. Skipping a page there, with the blanks before it
    and its newline after it, leaves expat's state as it was, so only its positions need the
    skipped bytes and lines added back (``byte_shift``, ``line_shift`` of the collector; the
    skipped text is whole lines, so columns stay right). Anything else (a comment between pages,
    a ``<page>`` inside a comment, expat holding input back) leaves ``clean`` false, and pages go
    to expat until it is true again.
    """

    def __init__(
        self, parser: expat.XMLParserType, collector: _PageCollector, shared: SharedPages | None
    ) -> None:
        self.parser = parser
        self.collector = collector
        self.shared = shared
        self.fast = False  # set from the document's encoding; off for a document with a DTD
        self.clean = False
        self.buf = b""
        self.base = 0  # decompressed byte offset of buf[0]
        self.pos = 0  # buf[:pos] has been fed to expat or read on the fast path
        self.unsafe: deque[int] = deque()  # offsets of bytes that keep a page on expat's path
        # Lines of the pages read on the fast path are added to the collector's line_shift only
        # when expat is fed next (or the buffer drops them), from counts of whole chunks:
        # buf[skipped_from:pos] was read on the fast path and is not counted yet.
        self.skipped_from = 0
        self.newlines = 0  # newlines in buf; -1 when not known (no fast path)
        self.known = (0, 0)  # (p, the newlines in buf[:p]) for the last p counted to

    def add(self, data: bytes, offset: int) -> None:
        """Appends ``data``, which starts at decompressed byte ``offset``."""
        newlines = 0 if not data else -1
        if self.fast and data:
            found, newlines = scan_chunk(data)
            if found:
                self.unsafe.extend(offset + i for i in found)
        self._count_skipped_lines()
        if self.pos:
            kept = -1 if self.newlines < 0 else self.newlines - self._newlines_before(self.pos)
            self.base += self.pos
            self.buf = self.buf[self.pos :] + data
            self.pos = self.skipped_from = 0
            self.known = (0, 0)
        else:
            kept = self.newlines
            if data:
                self.buf = self.buf + data if self.buf else data
        self.newlines = kept + newlines if kept >= 0 and newlines >= 0 else -1

    def _newlines_before(self, stop: int) -> int:
        """The newlines in buf[:stop], counted from the last position asked about, or back from
        the end of the buffer when that is shorter."""
        buf, (at, count) = self.buf, self.known
        if stop < at:
            count -= buf.count(b"\n", stop, at)
        elif self.newlines >= 0 and len(buf) - stop < stop - at:
            count = self.newlines - buf.count(b"\n", stop)
        else:
            count += buf.count(b"\n", at, stop)
        self.known = (stop, count)
        return count

    def _count_skipped_lines(self) -> None:
        """Adds the lines read on the fast path since expat was last fed to ``line_shift``."""
        if self.skipped_from < self.pos:
            before = self._newlines_before(self.skipped_from)
            self.collector.line_shift += self._newlines_before(self.pos) - before
            self.skipped_from = self.pos

    def run(self, final: bool) -> None:
        """Reads every page whose end is in the buffer; with ``final``, feeds expat the rest."""
        buf = self.buf
        while True:
            start = buf.find(_PAGE_OPEN, self.pos)
            if start < 0:
                if len(buf) - self.pos > _MAX_PENDING_PAGE:  # not a page in sight: no dump
                    self._feed(len(buf) - _KEEP_BACK, False)
                break
            end = page_end(buf, start)
            if end < 0:
                if len(buf) - start > _MAX_PENDING_PAGE:
                    self._feed(len(buf) - _KEEP_BACK, False)
                break
            end += len(_PAGE_CLOSE)
            stop = end + 1 if buf[end : end + 1] == b"\n" else end
            if not (self.clean and stop > end and self._read_fast(start, end, stop)):
                self._feed(stop, False)
            unsafe = self.unsafe
            while unsafe and unsafe[0] < self.base + stop:
                unsafe.popleft()
        if final:
            self._feed(len(buf), True)

    def _read_fast(self, start: int, end: int, stop: int) -> bool:
        """Reads the page buf[start:end] on the fast path, with the blanks before it and the
        newline after it up to ``stop``; False (nothing read) when expat must read it."""
        buf, pos, collector = self.buf, self.pos, self.collector
        if start > pos and buf[pos:start].strip(_BLANK):
            return False
        last = self.base + stop
        if (self.unsafe and self.unsafe[0] < last) or (
            collector.bad_bytes and collector.bad_bytes[0] < last
        ):
            return False
        shared = self.shared
        if shared is None:
            page = None
        else:
            key = shared.key(buf, start, end)
            page = shared.take(self, key, buf, start, end)
        if page is None:
            fields = scan_page(buf, start, end)
            if fields is None:
                return False
            page = Page(*fields)
            if shared is not None:
                shared.offer(self, key, buf, start, end, page)
        collector.pages.append(page)
        collector.last_page = page
        collector.byte_shift += stop - pos
        self.pos = stop
        return True

    def _feed(self, stop: int, final: bool) -> None:
        """Feeds expat buf[pos:stop], then finds out whether it stands clean."""
        self._count_skipped_lines()  # expat's positions need them from here on
        buf, pos, collector = self.buf, self.pos, self.collector
        data = buf[pos:stop]
        if self.fast and b"<!DOCTYPE" in data:
            self.fast = False  # a DTD may declare entities and default attributes
        collector.last_end = -1
        self.parser.Parse(data, final)
        self.pos = self.skipped_from = stop
        self.clean = False
        if not self.fast or stop == pos or buf[stop - 1 : stop] != b"\n":
            return
        if len(collector.stack) != 1 or collector.last_end < 0:
            return
        at = collector.last_end + collector.byte_shift - self.base
        if at < pos or not buf.startswith(b"</", at):
            return
        close = buf.find(b">", at, stop)
        self.clean = close >= 0 and not buf[close + 1 : stop].strip(_BLANK)
