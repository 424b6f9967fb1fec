"""Reading a multistream ``.bz2`` dump in independent byte ranges, for readers that scale out.

Wikipedia's ``pages-articles-multistream.xml.bz2`` is many bz2 streams of 100 pages each laid
end to end, with an index (``…-multistream-index.txt.bz2``, lines ``offset:page_id:title``) of
where each stream starts. Any run of whole streams decompresses on its own, so a dump can be cut
into ranges that separate workers read in parallel: the Beam pipeline's readers do, instead of
one worker streaming 20 GB alone. Every page lies in exactly one range.
"""

from __future__ import annotations

import bz2
import os
from collections.abc import Iterator
from pathlib import Path

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.preprocess.dumps.compressed import open_binary
from tw_jax.preprocess.dumps.mediawiki import Page, parse_export
from tw_jax.preprocess.runners.accounting import Skips

_READ_BYTES = 1 << 20
_ROOT_OPEN = b"<mediawiki>"
_ROOT_CLOSE = b"</mediawiki>"


def index_for(dump: str | os.PathLike[str]) -> str | None:
    """The index beside a multistream dump (``X-multistream.xml.bz2`` → ``X-multistream-index.txt[.bz2]``)."""
    dump = os.fspath(dump)
    folder, _, name = dump.rpartition("/")
    stem = name.removesuffix(".bz2").removesuffix(".xml")
    for suffix in (".txt.bz2", ".txt"):
        candidate = f"{folder}/{stem}-index{suffix}" if folder else f"{stem}-index{suffix}"
        if paths.exists(candidate):
            return candidate
    return None


def stream_offsets(index: str | os.PathLike[str]) -> list[int]:
    """The distinct stream start offsets named by an index file, ascending."""
    offsets: set[int] = set()
    with open_binary(index) as stream:
        for lineno, line in enumerate(stream, 1):
            head = line.split(b":", 1)[0].strip()
            if not head:
                continue
            if not head.isdigit():
                raise DumpError(str(index), f"line {lineno}", "not a multistream index line")
            offsets.add(int(head))
    return sorted(offsets)


def plan_ranges(
    dump: str | os.PathLike[str], index: str | os.PathLike[str], splits: int
) -> list[tuple[int, int]]:
    """Up to ``splits`` contiguous (start, end) byte ranges on stream boundaries covering the file.

    The first range starts at 0 (the header stream) and the last ends at the end of the file (the
    closing stream), so together they hold every byte exactly once.
    """
    size = paths.size(dump)
    starts = [o for o in stream_offsets(index) if 0 < o < size]
    if not starts:
        return [(0, size)]
    splits = max(1, min(splits, len(starts) + 1))
    boundaries = [0] + [starts[len(starts) * i // splits] for i in range(1, splits)] + [size]
    boundaries = sorted(set(boundaries))
    return list(zip(boundaries, boundaries[1:], strict=False))


def _streams(dump: str, start: int, end: int) -> Iterator[bytes]:
    """The decompressed bytes of each bz2 stream in [start, end)."""
    with paths.open_file(dump, "rb") as raw:
        raw.seek(start)
        remaining = end - start
        decompressor = bz2.BZ2Decompressor()
        pieces: list[bytes] = []
        position = start
        while remaining > 0 or decompressor.unused_data:
            data = decompressor.unused_data
            if not data:
                data = raw.read(min(_READ_BYTES, remaining))
                if not data:
                    break
                remaining -= len(data)
                position += len(data)
            if decompressor.eof:
                decompressor = bz2.BZ2Decompressor()
            try:
                pieces.append(decompressor.decompress(data))
            except (OSError, EOFError, ValueError) as exc:
                raise DumpError(
                    dump,
                    f"byte range {start}-{end}, near byte {position}",
                    f"corrupt bz2 stream ({exc})",
                ) from None
            if decompressor.eof:
                yield b"".join(pieces)
                pieces = []
        if not decompressor.eof and (pieces or position > start):
            raise DumpError(dump, f"byte range {start}-{end}", "truncated bz2 stream")


def iter_range_pages(
    dump: str | os.PathLike[str], start: int, end: int, skips: Skips
) -> Iterator[Page]:
    """The pages stored in the streams of [start, end) of a multistream dump."""
    dump_s = os.fspath(dump)

    def chunks() -> Iterator[bytes]:
        streams = _streams(dump_s, start, end)
        first = next(streams, b"")
        if not first.lstrip().startswith((b"<mediawiki", b"<?xml")):
            yield _ROOT_OPEN  # a range in the middle holds bare <page> elements
        previous = first
        for stream in streams:
            yield previous
            previous = stream
        yield previous
        if not previous.rstrip().endswith(_ROOT_CLOSE):
            yield _ROOT_CLOSE

    yield from parse_export(chunks(), f"{dump_s} [bytes {start}-{end}]", skips)


_PAGE_OPEN = b"<page>"
_PAGE_CLOSE = b"</page>"


def _split_pages(chunks: Iterator[bytes]) -> Iterator[tuple[str, bytes]]:
    """("header" | "page" | "footer", bytes) pieces of an export, streaming.

    ``<page>`` can only occur in an export as markup (in text it is escaped as ``&lt;page&gt;``),
    so pages are found by scanning bytes, without parsing.
    """
    buffer = b""
    seen_page = False
    for chunk in chunks:
        buffer += chunk
        while True:
            start = buffer.find(_PAGE_OPEN)
            if start < 0:
                break
            if not seen_page:
                line_start = buffer.rfind(b"\n", 0, start) + 1
                yield "header", buffer[:line_start]
                buffer = buffer[line_start:]
                seen_page = True
                continue
            end = buffer.find(_PAGE_CLOSE, start)
            if end < 0:
                break
            end += len(_PAGE_CLOSE)
            if buffer[end : end + 1] == b"\n":
                end += 1
            yield "page", buffer[:end]
            buffer = buffer[end:]
    yield ("footer" if seen_page else "header"), buffer


def _first(page: bytes, tag: bytes) -> bytes:
    start = page.find(b"<" + tag + b">")
    end = page.find(b"</" + tag + b">", start)
    return page[start + len(tag) + 2 : end] if start >= 0 and end >= 0 else b""


def repack_multistream(
    source: str | os.PathLike[str],
    dump: str | os.PathLike[str],
    pages_per_stream: int = 100,
    index: str | os.PathLike[str] | None = None,
) -> Path:
    """Rewrites any export as a multistream ``.bz2`` with its index, as enwiki publishes it:
    the header in a stream of its own, then streams of ``pages_per_stream`` pages, then the
    footer. Returns the index path (``…-index.txt.bz2`` beside ``dump`` by default).

    Lets a single-stream dump be read by parallel workers (``--workers``, Beam ``--splits``).
    """
    from xml.sax.saxutils import unescape

    dump = Path(dump)
    stem = dump.name.removesuffix(".bz2").removesuffix(".xml")
    index = Path(index) if index else dump.with_name(f"{stem}-index.txt.bz2")
    lines: list[str] = []
    with open_binary(source) as stream, atomic_open(dump, "wb") as out:
        group: list[bytes] = []

        def flush() -> None:
            offset = out.tell()
            out.write(bz2.compress(b"".join(group), 9))
            for page in group:
                page_id = _first(page, b"id").decode("utf-8", "replace")
                title = unescape(_first(page, b"title").decode("utf-8", "replace"))
                lines.append(f"{offset}:{page_id}:{title}\n")
            group.clear()

        chunks = iter(lambda: stream.read1(_READ_BYTES), b"")
        for kind, piece in _split_pages(chunks):
            if kind == "page":
                group.append(piece)
                if len(group) >= pages_per_stream:
                    flush()
                continue
            if group:
                flush()
            out.write(bz2.compress(piece, 9))
    with atomic_open(index, "wb") as out:
        out.write(bz2.compress("".join(lines).encode("utf-8"), 9))
    return index
