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

from tw_jax.preprocess.accounting import Skips
from tw_jax.preprocess.compressed import open_binary
from tw_jax.preprocess.errors import DumpError
from tw_jax.preprocess.mediawiki import Page, parse_export

_READ_BYTES = 1 << 20
_ROOT_OPEN = b"<mediawiki>"
_ROOT_CLOSE = b"</mediawiki>"


def index_for(dump: str | os.PathLike[str]) -> Path | None:
    """The index beside a multistream dump (``X-multistream.xml.bz2`` → ``X-multistream-index.txt[.bz2]``)."""
    dump = Path(dump)
    stem = dump.name.removesuffix(".bz2").removesuffix(".xml")
    for suffix in (".txt.bz2", ".txt"):
        candidate = dump.with_name(f"{stem}-index{suffix}")
        if candidate.exists():
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
    size = os.path.getsize(dump)
    starts = [o for o in stream_offsets(index) if 0 < o < size]
    if not starts:
        return [(0, size)]
    splits = max(1, min(splits, len(starts) + 1))
    boundaries = [0] + [starts[len(starts) * i // splits] for i in range(1, splits)] + [size]
    boundaries = sorted(set(boundaries))
    return list(zip(boundaries, boundaries[1:], strict=False))


def _streams(dump: str, start: int, end: int) -> Iterator[bytes]:
    """The decompressed bytes of each bz2 stream in [start, end)."""
    with open(dump, "rb") as raw:
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
