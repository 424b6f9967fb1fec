"""The old snapshot read alongside the new one, for a single reader: most pages need no index.

Wikipedia dumps list pages by ascending id, so the old version of the new dump's next article is
usually the old dump's next article. :class:`OldInStep` reads the old dump only as far as each
lookup needs: the page asked for is handed over as read, never stored; the old pages passed over
on the way (deleted since, or asked for later by a new dump out of order) are spilled into the
on-disk :class:`~tw_jax.preprocess.diffset.local.OldIndex`. Compressing and indexing every old
page and reading each back was about a fifth of the stage's CPU time (2.1 of 10.4 CPU-s on the
21,000-article benchmark pair of ``tools/bench_diffset.py``).

While the old ids ascend, an id below the old dump's next one that was not spilled is not in
the old snapshot. Once they stop ascending, the rest of the old dump is indexed and every lookup
goes to the index; if a page then turns up whose id an earlier lookup already reported absent,
:class:`OldOutOfOrder` is raised, and the caller runs the stage again with the whole index (a
dump out of order, which no Wikipedia export is, costs a second pass; never a wrong answer).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Protocol

from tw_jax.preprocess.dumps.mediawiki import Page
from tw_jax.preprocess.dumps.wikipedia import IdBitmap

_INSERT_BATCH = 2000


class OldOutOfOrder(Exception):
    """An old page turned up after a lookup had reported its id absent."""


class _Index(Protocol):
    def insert(self, rows: list[tuple[int, str, str, bytes]]) -> None: ...

    def get(self, page_id: int) -> Page | None: ...


class OldInStep:
    """Old versions by id, read from ``pages`` (the old dump's articles, each id once) as the
    lookups go; spilled pages go to ``index``, which this object's own connection reads back."""

    def __init__(self, pages: Iterator[Page], index: _Index) -> None:
        self._pages = pages
        self._index = index
        self._spilled = IdBitmap()
        self._absent = IdBitmap()  # ids reported absent while the old ids ascended
        self._pending: list[tuple[int, str, str, bytes]] = []  # spilled rows not yet inserted
        self._ascending = True
        self.articles = 0  # old articles read so far
        self._head: Page | None = None
        self._last_id = -1
        self._advance()

    def _advance(self) -> None:
        """Read the next old page into ``_head`` (None at the end)."""
        head = next(self._pages, None)
        if head is not None:
            self.articles += 1
            if head.id in self._absent:
                raise OldOutOfOrder(head.id)
            if head.id <= self._last_id:
                self._ascending = False
            self._last_id = head.id
        self._head = head

    def _spill(self, page: Page) -> None:
        self._spilled.add(page.id)
        self._pending.append(
            (page.id, page.title, page.markup, zlib.compress(page.text.encode("utf-8"), 1))
        )
        if len(self._pending) >= _INSERT_BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._index.insert(self._pending)
            self._pending = []

    def get(self, page_id: int) -> Page | None:
        """The old version of article ``page_id``, or None if the old snapshot lacks it."""
        if self._ascending:
            while self._head is not None and self._head.id < page_id:
                self._spill(self._head)
                self._advance()
            head = self._head
            if head is not None and head.id == page_id:
                self._advance()
                if self._ascending:
                    return head
                self._spill(head)  # the ids stopped ascending right after it: index it all
        if not self._ascending:
            while self._head is not None:
                self._spill(self._head)
                self._advance()
        if page_id not in self._spilled:
            if self._ascending:
                self._absent.add(page_id)
            return None
        self._flush()
        return self._index.get(page_id)

    def finish(self) -> int:
        """Read the rest of the old dump (its pages are counted, not kept); the article count."""
        while self._head is not None:
            self._advance()
        self._pending = []
        return self.articles
