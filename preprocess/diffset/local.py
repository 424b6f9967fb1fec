"""The DiffSet stage on one machine: stream both dumps, compare in worker processes.

The old dump is streamed once into an on-disk SQLite index (id → title and zlib-compressed
markup), so memory stays flat whatever the dump size. The new dump is then streamed in file order;
each article is paired with its old version by id and compared, inline for one worker or in a
process pool for several, and the results are written in the new dump's order.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from tqdm import tqdm
from tw_jax.preprocess.accounting import Skips
from tw_jax.preprocess.diffset.algorithm import ArticleDiff, compare
from tw_jax.preprocess.diffset.outputs import DiffsetWriter
from tw_jax.preprocess.diffset.stats import DiffsetStats
from tw_jax.preprocess.mediawiki import Page
from tw_jax.preprocess.multistream import iter_range_pages
from tw_jax.preprocess.readers import iter_articles, iter_dump_pages

_INSERT_BATCH = 2000
_CHUNK = 64  # articles per task sent to a worker: amortises pickling and queue round trips


def _counted(pages: Iterable[Page], stats: DiffsetStats, side: str) -> Iterator[Page]:
    for page in pages:
        stats.pages[side] += 1
        yield page


def read_articles(
    path: str, stats: DiffsetStats, side: str, byte_range: tuple[int, int] | None = None
) -> Iterator[Page]:
    """The main-namespace articles of a dump (or of one byte range of a multistream dump),
    tallying pages and skips into ``stats``.

    Every page counts once in ``stats.pages``: those the reader yields, and those it skips itself
    (a bad id, a bad JSON line), which are added when the dump is exhausted.
    """
    reader_skips = Skips()
    if byte_range is None:
        pages = iter_dump_pages(path, reader_skips)
    else:
        pages = iter_range_pages(path, *byte_range, reader_skips)
    yield from iter_articles(_counted(pages, stats, side), stats.skips[side])
    stats.pages[side] += reader_skips.total
    stats.skips[side].merge(reader_skips)


class OldIndex:
    """The old snapshot's articles by id, on disk."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "old.sqlite")
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute(
            "CREATE TABLE old (id INTEGER PRIMARY KEY, title TEXT, markup TEXT, body BLOB)"
        )

    def load(self, articles: Iterable[Page]) -> int:
        count = 0
        batch: list[tuple[int, str, str, bytes]] = []
        for page in articles:
            body = zlib.compress(page.text.encode("utf-8"), 1)
            batch.append((page.id, page.title, page.markup, body))
            if len(batch) >= _INSERT_BATCH:
                self._db.executemany("INSERT INTO old VALUES (?, ?, ?, ?)", batch)
                count += len(batch)
                batch.clear()
        self._db.executemany("INSERT INTO old VALUES (?, ?, ?, ?)", batch)
        self._db.commit()
        return count + len(batch)

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


def _compare_chunk(args: tuple[list[tuple[Page, Page | None]], int]) -> list[ArticleDiff]:
    pairs, min_changed_chars = args
    return [compare(new, old, min_changed_chars) for new, old in pairs]


def _chunks(
    new_articles: Iterable[Page], index: OldIndex, min_changed_chars: int
) -> Iterator[tuple[list[tuple[Page, Page | None]], int]]:
    chunk: list[tuple[Page, Page | None]] = []
    for page in new_articles:
        chunk.append((page, index.get(page.id)))
        if len(chunk) >= _CHUNK:
            yield chunk, min_changed_chars
            chunk = []
    if chunk:
        yield chunk, min_changed_chars


def build_diffset(
    old_path: str | os.PathLike[str],
    new_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    min_changed_chars: int = 0,
    workers: int = 1,
    progress: bool | None = None,
    max_shard_bytes: int = 256 << 20,
) -> dict[str, Any]:
    """Writes the DiffSet folder for ``old_path`` → ``new_path`` and returns its stats.

    ``progress=None`` shows a progress bar only when stderr is a terminal.
    """
    old_path, new_path = str(old_path), str(new_path)
    stats = DiffsetStats()
    writer = DiffsetWriter(out_dir, max_shard_bytes=max_shard_bytes)
    bar_disabled = None if progress is None else not progress
    try:
        with tempfile.TemporaryDirectory(prefix="tw_jax_diffset_") as scratch:
            index = OldIndex(scratch)
            try:
                with tqdm(desc="indexing old dump", unit=" articles", disable=bar_disabled) as bar:
                    old_articles = read_articles(old_path, stats, "old")
                    stats.old_articles = index.load(_progress(old_articles, bar))
                chunks = _chunks(read_articles(new_path, stats, "new"), index, min_changed_chars)
                with tqdm(desc="comparing", unit=" articles", disable=bar_disabled) as bar:
                    for results in _map(_compare_chunk, chunks, workers):
                        for result in results:
                            stats.add_result(result)
                            writer.add(result)
                        bar.update(len(results))
            finally:
                index.close()
        report = stats.as_dict(
            old=old_path, new=new_path, options={"min_changed_chars": min_changed_chars}
        )
        writer.commit(report)
    except BaseException:
        writer.abort()
        raise
    return report


def _progress(items: Iterable[Page], bar: tqdm) -> Iterator[Page]:
    for item in items:
        bar.update()
        yield item


def _map(function, chunks, workers: int):  # noqa: ANN001, ANN202 - thin pool wrapper
    if workers <= 1:
        yield from map(function, chunks)
        return
    with multiprocessing.get_context("spawn" if os.name != "posix" else "fork").Pool(
        workers
    ) as pool:
        yield from pool.imap(function, chunks)
