"""The DiffSet stage on one machine: stream both dumps, compare in worker processes.

With several workers, the old dump is streamed once into an on-disk SQLite index (id → title
and zlib-compressed markup), so memory stays flat whatever the dump size. The new dump is then
streamed in file order; each article is paired with its old version by id, compared and encoded
in a process pool, and the results are written in the new dump's order. One worker reads the
old dump alongside the new one instead (:mod:`~tw_jax.preprocess.diffset.lockstep`), indexing
only the old pages that the new dump does not ask for in order.

Reading a ``.bz2`` dump is mostly bz2 decompression, which one process does at a few thousand
pages a second. A multistream dump with its index beside it (enwiki's
``pages-articles-multistream.xml.bz2``;
:func:`~tw_jax.preprocess.dumps.multistream.repack_multistream` makes one from any dump) is
therefore read in byte ranges by the workers themselves, so reading scales with them; any other
dump is read by the main process and only the comparison is spread.
"""

from __future__ import annotations

import itertools
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any

from tw_jax.io import paths
from tw_jax.io.output_claim import scratch_dir
from tw_jax.io.progress import progress as progress_bar
from tw_jax.io.scratch_db import open_scratch
from tw_jax.preprocess.diffset.algorithm import compare
from tw_jax.preprocess.diffset.lockstep import OldInStep, OldOutOfOrder
from tw_jax.preprocess.diffset.outputs import DiffsetWriter, EncodedRecord, encode_records
from tw_jax.preprocess.diffset.stats import ArticleSummary, DiffsetStats, summarize
from tw_jax.preprocess.dumps.mediawiki import Page, describe_page
from tw_jax.preprocess.dumps.multistream import index_for, iter_range_pages, plan_ranges
from tw_jax.preprocess.dumps.page_scan import SharedPages
from tw_jax.preprocess.dumps.wikipedia import IdBitmap, iter_articles, iter_dump_pages
from tw_jax.preprocess.runners.accounting import Skips
from tw_jax.preprocess.runners.process_pools import WINDOW_PER_WORKER, fork_pool, ordered_map

_INSERT_BATCH = 2000
_CHUNK = 64  # articles per task sent to a worker: amortises pickling and queue round trips
_RANGE_BYTES = 4 << 20  # compressed bytes per multistream range task (a few thousand pages)


def read_articles(
    path: str,
    stats: DiffsetStats,
    side: str,
    byte_range: tuple[int, int] | None = None,
    *,
    prefetch: int | None = None,
    shared: SharedPages | None = None,
) -> Iterator[Page]:
    """The main-namespace articles of a dump (or of one byte range of a multistream dump),
    tallying pages and skips into ``stats``.

    Every page counts once in ``stats.pages``, added when the dump is exhausted: those the reader
    yields, and those it skips itself (a bad id, a bad JSON line). ``prefetch`` and ``shared``:
    see :func:`~tw_jax.preprocess.dumps.mediawiki.iter_pages` (whole dumps only).
    """
    reader_skips = Skips()
    if byte_range is None:
        pages = iter_dump_pages(path, reader_skips, prefetch=prefetch, shared=shared)
    else:
        pages = iter_range_pages(path, *byte_range, reader_skips)
    # The pages are numbered as they pass, in C (zip stops before taking a number it has no page
    # for), rather than counted by one more generator around the reader.
    numbers = itertools.count()
    numbered = zip(pages, numbers, strict=False)
    yield from iter_articles(map(itemgetter(0), numbered), stats.skips[side])
    stats.pages[side] += next(numbers) + reader_skips.total
    stats.skips[side].merge(reader_skips)


OldRow = tuple[int, str, str, bytes]  # id, title, markup, zlib-compressed text


def _row(page: Page) -> OldRow:
    return page.id, page.title, page.markup, zlib.compress(page.text.encode("utf-8"), 1)


class OldIndex:
    """The old snapshot's articles by id, on disk: written once, then read by every worker."""

    def __init__(self, path: str, *, create: bool = False) -> None:
        self.path = path
        self._db = open_scratch(
            path,
            create=create,
            schema="CREATE TABLE old (id INTEGER PRIMARY KEY, title TEXT, markup TEXT, body BLOB)",
        )

    def insert(self, rows: list[OldRow]) -> None:
        self._db.executemany("INSERT INTO old VALUES (?, ?, ?, ?)", rows)

    def commit(self) -> None:
        self._db.commit()

    def get(self, page_id: int) -> Page | None:
        row = self._db.execute(
            "SELECT title, markup, body FROM old WHERE id = ?", (page_id,)
        ).fetchone()
        if row is None:
            return None
        title, markup, body = row
        text = zlib.decompress(body).decode("utf-8")
        return Page(id=page_id, ns=0, title=title, text=text, redirect=None, markup=markup)

    def close(self) -> None:
        self._db.close()


# --- jobs: module-level functions, run inline (one worker) or in pool processes ------------------

Compared = list[tuple[ArticleSummary, list[EncodedRecord]]]

_index_path: str | None = None
_index: OldIndex | None = None


def _set_index_path(path: str) -> None:
    global _index_path, _index
    _index_path, _index = path, None


def _old_version(page_id: int) -> Page | None:
    global _index
    if _index is None:  # opened on first use: the pool starts before the index is written
        _index = OldIndex(_index_path)
    return _index.get(page_id)


def _compare_all(
    pages: Iterable[Page],
    min_changed_chars: int,
    old_version: Callable[[int], Page | None] = _old_version,
) -> Compared:
    compared = []
    for page in pages:
        result = compare(page, old_version(page.id), min_changed_chars)
        compared.append((summarize(result), encode_records(result)))
    return compared


def _compare_chunk(job: tuple[list[Page], int]) -> tuple[DiffsetStats, Compared]:
    pages, min_changed_chars = job
    return DiffsetStats(), _compare_all(pages, min_changed_chars)


def _compare_range(job: tuple[str, tuple[int, int], int]) -> tuple[DiffsetStats, Compared]:
    path, byte_range, min_changed_chars = job
    reader_stats = DiffsetStats()
    pages = read_articles(path, reader_stats, "new", byte_range)
    return reader_stats, _compare_all(pages, min_changed_chars)


def _index_range(job: tuple[str, tuple[int, int]]) -> tuple[DiffsetStats, list[OldRow]]:
    path, byte_range = job
    reader_stats = DiffsetStats()
    return reader_stats, [
        _row(page) for page in read_articles(path, reader_stats, "old", byte_range)
    ]


def _chunks(pages: Iterable[Page], min_changed_chars: int) -> Iterator[tuple[list[Page], int]]:
    chunk: list[Page] = []
    for page in pages:
        chunk.append(page)
        if len(chunk) >= _CHUNK:
            yield chunk, min_changed_chars
            chunk = []
    if chunk:
        yield chunk, min_changed_chars


def _byte_ranges(path: str, workers: int) -> list[tuple[int, int]] | None:
    """Ranges of a multistream dump for parallel readers, or None to read it in one stream."""
    index = index_for(path) if workers > 1 else None
    if index is None:
        return None
    splits = max(workers * WINDOW_PER_WORKER, -(-paths.size(path) // _RANGE_BYTES))
    return plan_ranges(path, index, splits)


# --- the stage -----------------------------------------------------------------------------------


def build_diffset(
    old_path: str | os.PathLike[str] | None,
    new_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    min_changed_chars: int = 0,
    workers: int = 1,
    progress: bool | None = None,
    max_shard_bytes: int = 256 << 20,
) -> dict[str, Any]:
    """Writes the DiffSet folder for ``old_path`` → ``new_path`` and returns its stats.

    ``old_path=None`` compares against an empty snapshot: every article is new, so the folder
    exports one snapshot (``full.*``), as the initial month's ``DATA_DIR/<MM>/full`` needs.

    ``progress=None`` shows a progress bar only when stderr is a terminal.
    """
    old_path, new_path = (None if old_path is None else str(old_path)), str(new_path)
    options = (min_changed_chars, workers, progress, max_shard_bytes)
    if workers > 1:
        return _build(old_path, new_path, out_dir, *options, in_step=False)
    try:
        return _build(old_path, new_path, out_dir, *options, in_step=True)
    except OldOutOfOrder:  # an old dump out of id order: read it whole into the index first
        return _build(old_path, new_path, out_dir, *options, in_step=False)


def _build(
    old_path: str | None,
    new_path: str,
    out_dir: str | os.PathLike[str],
    min_changed_chars: int,
    workers: int,
    progress: bool | None,
    max_shard_bytes: int,
    *,
    in_step: bool,
) -> dict[str, Any]:
    stats = DiffsetStats()
    writer = DiffsetWriter(out_dir, max_shard_bytes=max_shard_bytes)
    quiet = None if progress is None else not progress
    try:
        with scratch_dir("diffset") as scratch:
            index_path = os.path.join(scratch, "old.sqlite")
            _set_index_path(index_path)
            pool = None
            if workers > 1:
                pool = fork_pool(workers, _set_index_path, (index_path,))
            try:
                if in_step:
                    with progress_bar(desc="comparing", unit=" articles", disable=quiet) as bar:
                        _compare_in_step(old_path, new_path, index_path, min_changed_chars, stats,
                                         writer, bar)
                else:
                    if old_path is None:
                        OldIndex(index_path, create=True).close()
                    else:
                        with progress_bar(
                            desc="indexing old dump", unit=" articles", disable=quiet
                        ) as bar:
                            _index_old(old_path, index_path, stats, pool, workers, bar)
                    with progress_bar(desc="comparing", unit=" articles", disable=quiet) as bar:
                        _compare_new(new_path, min_changed_chars, stats, writer, pool, workers, bar)
            finally:
                if pool is not None:
                    pool.terminate()
                if _index is not None:
                    _index.close()
                _set_index_path(index_path)
        report = stats.as_dict(
            old=old_path, new=new_path, options={"min_changed_chars": min_changed_chars}
        )
        writer.commit(report)
    except BaseException:
        writer.abort()
        raise
    return report


def _index_old(path: str, index_path: str, stats: DiffsetStats, pool, workers: int, bar) -> None:  # noqa: ANN001
    index = OldIndex(index_path, create=True)
    try:
        ranges = _byte_ranges(path, workers)
        if ranges is None:
            batches = _batched(_row(page) for page in read_articles(path, stats, "old"))
            tallied = ((None, rows) for rows in batches)
        else:
            tallied = ordered_map(_index_range, [(path, r) for r in ranges], pool, workers)
        seen = IdBitmap()
        for reader_stats, rows in tallied:
            if reader_stats is not None:
                stats.merge(reader_stats)
            kept = []
            for row in rows:
                if seen.add(row[0]):
                    kept.append(row)
                else:  # the same id in two ranges: the first occurrence wins, as with one reader
                    stats.skips["old"].add("duplicate_id", describe_page(row[0], row[1]))
            index.insert(kept)
            stats.old_articles += len(kept)
            bar.update(len(rows))
        index.commit()
    finally:
        index.close()


def _compare_in_step(
    old_path: str | None,
    new_path: str,
    index_path: str,
    min_changed_chars: int,
    stats: DiffsetStats,
    writer: DiffsetWriter,
    bar,  # noqa: ANN001
) -> None:
    """One reader: the old dump read alongside the new one (:class:`OldInStep`).

    Both dumps are decompressed in this thread, with no prefetch thread: on a shared 2-core
    development machine, decompressing threads beside the parser made the stage cost 8.5-13.5
    CPU-s on the 21,000-article benchmark pair where this takes 8.2-8.7, and gained no
    wall-clock time either (both dumps at once decompress at a higher CPU cost per byte than
    one after the other: 4.8-7.9 CPU-s against 3.4-4.3).
    """
    index = OldIndex(index_path, create=True)
    shared = SharedPages()  # an unchanged article is read once, by whichever reader is first
    try:
        old_pages = (
            iter(())
            if old_path is None
            else read_articles(old_path, stats, "old", prefetch=0, shared=shared)
        )
        old = OldInStep(old_pages, index)  # reads the first old page: its errors come first
        _compare_new(new_path, min_changed_chars, stats, writer, None, 1, bar, old.get, shared)
        stats.old_articles += old.finish()
    finally:
        index.close()


def _compare_new(
    path: str,
    min_changed_chars: int,
    stats: DiffsetStats,
    writer,  # noqa: ANN001
    pool,  # noqa: ANN001
    workers: int,
    bar,  # noqa: ANN001
    old_version: Callable[[int], Page | None] | None = None,
    shared: SharedPages | None = None,
) -> None:
    ranges = _byte_ranges(path, workers)
    if old_version is not None:
        pages = read_articles(path, stats, "new", prefetch=0, shared=shared)
        jobs = _chunks(pages, min_changed_chars)
        results = ((None, _compare_all(chunk, mcc, old_version)) for chunk, mcc in jobs)
    elif ranges is None:
        jobs = _chunks(read_articles(path, stats, "new"), min_changed_chars)
        results = ordered_map(_compare_chunk, jobs, pool, workers)
    else:
        jobs = [(path, r, min_changed_chars) for r in ranges]
        results = ordered_map(_compare_range, jobs, pool, workers)
    seen = IdBitmap() if ranges is not None else None
    for reader_stats, compared in results:
        if reader_stats is not None:  # a worker's reader: its pages and skips
            stats.merge(reader_stats)
        for summary, encoded in compared:
            if seen is not None and not seen.add(summary.id):
                # The same id in two ranges of a multistream dump (one reader would have
                # skipped it as a duplicate too): the first occurrence wins.
                stats.skips["new"].add("duplicate_id", describe_page(summary.id, summary.title))
                continue
            stats.add(summary)
            writer.write_encoded(encoded)
        bar.update(len(compared))


def _batched(rows: Iterable[OldRow]) -> Iterator[list[OldRow]]:
    batch: list[OldRow] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= _INSERT_BATCH:
            yield batch
            batch = []
    yield batch
