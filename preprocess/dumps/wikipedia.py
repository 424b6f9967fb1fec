"""One entry point for every Wikipedia dump the stages read, and the article filter they share.

``iter_dump_pages`` tells MediaWiki XML from WikiExtractor JSON lines by looking at the first
decompressed bytes (``<`` or ``{``), so a stage takes whichever the user has, under any name.
``iter_articles`` applies docs/plaintext.md's "Which pages" rules and counts every page it drops.
``paragraphs_of`` gives an article's plain-text paragraphs for either markup.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps import mediawiki, wikiextractor
from tw_jax.preprocess.dumps.compressed import open_binary
from tw_jax.preprocess.dumps.mediawiki import Page
from tw_jax.preprocess.dumps.page_scan import SharedPages
from tw_jax.preprocess.plaintext.wikitext import to_paragraphs
from tw_jax.preprocess.runners.accounting import Skips

__all__ = ["IdBitmap", "Page", "iter_articles", "iter_dump_pages", "paragraphs_of", "sniff_format"]

_SNIFF_LIMIT = 1 << 20  # give up looking for the first non-blank byte after this many bytes
_REDIRECT_TEXT = re.compile(r"\s*#redirect", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def sniff_format(path: str | os.PathLike[str]) -> str:
    """``"xml"`` or ``"jsonl"``, from the first non-blank decompressed byte (``<`` or ``{``).

    Raises :class:`DumpError` for an empty file or one that starts with anything else.
    """
    path_s = os.fspath(path)
    seen = 0
    with open_binary(path_s) as stream:
        first = b""
        while seen < _SNIFF_LIMIT:
            block = stream.read(4096)
            if not block:
                break
            seen += len(block)
            stripped = block.lstrip(b" \t\r\n\xef\xbb\xbf")  # whitespace and a UTF-8 BOM
            if stripped:
                first = stripped[:1]
                break
    if first == b"<":
        return "xml"
    if first == b"{":
        return "jsonl"
    if not first:
        raise DumpError(path_s, None, "no content (empty file or only whitespace)")
    raise DumpError(path_s, "decompressed byte 0", "neither MediaWiki XML nor JSON lines")


def iter_dump_pages(
    path: str | os.PathLike[str],
    skips: Skips,
    *,
    prefetch: int | None = None,
    shared: SharedPages | None = None,
) -> Iterator[Page]:
    """Every page of a dump, XML or WikiExtractor JSON lines, plain or compressed.

    The format is sniffed when this is called, so a file that is neither raises
    :class:`DumpError` here rather than at the first ``next()``. ``prefetch`` and ``shared`` are
    :func:`mediawiki.iter_pages`'s (XML only).
    """
    if sniff_format(path) == "xml":
        return mediawiki.iter_pages(path, skips, prefetch=prefetch, shared=shared)
    return wikiextractor.iter_pages(path, skips)


class IdBitmap:
    """A set of non-negative integers stored as a growable bitmap.

    Page ids are dense (enwiki's run to ~80 million), so one bit per possible id costs ~10 MB
    where a Python set of 6.3 million ints would cost ~400 MB. Ids beyond ``max_bitmap_id``
    (garbage, or another wiki's numbering) go to a small set rather than growing the bitmap.
    """

    def __init__(self, max_bitmap_id: int = (1 << 28) - 1) -> None:
        self.bits = bytearray()
        self.max_bitmap_id = max_bitmap_id
        self.overflow: set[int] = set()

    def add(self, value: int) -> bool:
        """Add ``value``; True if it was not there before."""
        if value < 0 or value > self.max_bitmap_id:
            if value in self.overflow:
                return False
            self.overflow.add(value)
            return True
        byte, bit = value >> 3, 1 << (value & 7)
        bits = self.bits
        if byte >= len(bits):
            # Grow geometrically (at least 1 MiB at a time) so adding ascending ids is linear.
            bits.extend(bytes(max(byte + 1, 2 * len(bits), 1 << 20) - len(bits)))
        if bits[byte] & bit:
            return False
        bits[byte] |= bit
        return True

    def __contains__(self, value: int) -> bool:
        if value < 0 or value > self.max_bitmap_id:
            return value in self.overflow
        byte = value >> 3
        return byte < len(self.bits) and bool(self.bits[byte] & (1 << (value & 7)))


def iter_articles(pages: Iterable[Page], skips: Skips) -> Iterator[Page]:
    """Keep the articles: main-namespace, non-redirect pages with text, each id once.

    Checked in this order, each dropped page counted once under the first reason that applies:
    ``duplicate_id`` (an id seen before, in any namespace: the first occurrence wins),
    ``namespace`` (ns != 0), ``redirect`` (a ``<redirect/>`` element, or text starting with
    ``#REDIRECT`` in any case after optional whitespace), ``missing_text`` (no text, or only
    whitespace).
    """
    seen = IdBitmap()
    for page in pages:
        if not seen.add(page.id):
            skips.add("duplicate_id", mediawiki.describe_page(page.id, page.title))
            continue
        if page.ns != 0:
            skips.add("namespace", f"{mediawiki.describe_page(page.id, page.title)} ns={page.ns}")
            continue
        text = page.text
        if page.redirect is not None or (text is not None and _REDIRECT_TEXT.match(text)):
            skips.add("redirect", mediawiki.describe_page(page.id, page.title))
            continue
        if not text or text.isspace():
            skips.add("missing_text", mediawiki.describe_page(page.id, page.title))
            continue
        yield page


def _plain_paragraphs(text: str, title: str) -> list[str]:
    paragraphs = []
    for line in text.split("\n"):
        paragraph = _SPACES.sub(" ", line).strip()
        if paragraph:
            paragraphs.append(paragraph)
    # WikiExtractor (2.x, and 3.x in some modes) starts ``text`` with the title on a line of its
    # own; the title is not a paragraph of the article.
    if paragraphs and paragraphs[0] == _SPACES.sub(" ", title).strip():
        del paragraphs[0]
    return paragraphs


def paragraphs_of(page: Page) -> list[str]:
    """The plain-text paragraphs of an article, by docs/plaintext.md.

    ``wikitext`` goes through :func:`tw_jax.preprocess.plaintext.wikitext.to_paragraphs`; ``plain``
    (WikiExtractor) text already has one paragraph a line, so each non-empty line, with
    whitespace runs collapsed, is a paragraph -- except a first line that repeats the title.
    """
    if page.text is None:
        return []
    if page.markup == "wikitext":
        return to_paragraphs(page.text)
    if page.markup == "plain":
        return _plain_paragraphs(page.text, page.title)
    raise ValueError(f"unknown markup {page.markup!r} for page id={page.id}")
