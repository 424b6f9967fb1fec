"""The Wikipedia side of alignment: which article a subject is, and that article's texts.

A Wikidata subject names its English article by ``sitelinks.enwiki``; the snapshot's page titles
(redirects followed one hop, as MediaWiki does) turn that title into a page id. Texts come from
the DiffSet folder (``diffset.jsonl``: the month's new text; ``full.jsonl``: every cleaned article
of the new snapshot) and, for DELETED, from the old Wikipedia dump cleaned the same way.

Everything lives in one SQLite file with compressed texts, so memory stays flat for a full
enwiki (6.3M articles).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator

from tw_jax.errors import DumpError
from tw_jax.io import jsonl, paths
from tw_jax.io.scratch_db import open_scratch
from tw_jax.preprocess.dumps.wikipedia import iter_articles, iter_dump_pages, paragraphs_of
from tw_jax.preprocess.runners.accounting import Skips, require_complete

NEW, OLD = "new", "old"
FULL, DIFF = "full", "diff"
_BATCH = 2000
_REDIRECT = re.compile(r"\s*#redirect\s*:?\s*\[\[([^\]|#]*)", re.IGNORECASE)


def normalise_title(title: str | None) -> str | None:
    """A title as MediaWiki stores it: underscores as spaces, single spaces, first letter upper."""
    if not title:
        return None
    title = " ".join(title.replace("_", " ").split())
    if not title:
        return None
    return title[0].upper() + title[1:]


def redirect_target(page) -> str | None:  # noqa: ANN001 - a readers.Page
    """The target of a redirect page (``<redirect title>`` or ``#REDIRECT [[…]]``), else None."""
    if page.redirect:
        return page.redirect
    if page.text:
        match = _REDIRECT.match(page.text)
        if match:
            return match.group(1)
    return None


def iter_titles(path: str, skips: Skips) -> Iterator[tuple[str, int | None, str | None]]:
    """(title, page id, None) for each main-namespace article and (title, None, target) for each
    redirect of a Wikipedia dump; other namespaces are counted under ``namespace``."""
    for page in iter_dump_pages(path, skips):
        if page.ns != 0:
            skips.add("namespace", f"page id {page.id}")
            continue
        target = redirect_target(page)
        if target is not None:
            yield page.title, None, target
        else:
            yield page.title, page.id, None


def read_jsonl_texts(path: str) -> Iterator[tuple[int, str]]:
    """(id, text) of a DiffSet folder's JSONL file; a bad line is an error naming file and line."""
    for number, record in jsonl.numbered_records(path):
        try:
            page_id, text = int(record["id"]), str(record["text"])
        except (ValueError, KeyError, TypeError) as error:
            raise DumpError(path, f"line {number}", f"not a DiffSet record: {error}") from None
        yield page_id, text


_SCHEMA = """
CREATE TABLE title (side TEXT, title TEXT, id INTEGER, PRIMARY KEY (side, title));
CREATE TABLE redirect (side TEXT, title TEXT, target TEXT, PRIMARY KEY (side, title));
CREATE TABLE text (side TEXT, kind TEXT, id INTEGER, body BLOB, PRIMARY KEY (side, kind, id));
"""


class ArticleStore:
    """Titles, redirects and compressed texts of both snapshots, in one SQLite file."""

    def __init__(self, path: str, *, create: bool = False) -> None:
        self.path = path
        self._db = open_scratch(path, create=create, schema=_SCHEMA)

    # --- building ------------------------------------------------------------------------------

    def add_titles(self, side: str, path: str, skips: Skips) -> int:
        """Reads a Wikipedia dump's titles and redirects; returns the number of pages read."""
        articles, redirects, count = [], [], 0
        for title, page_id, target in iter_titles(path, skips):
            count += 1
            if page_id is not None:
                articles.append((side, normalise_title(title), page_id))
            else:
                redirects.append((side, normalise_title(title), normalise_title(target)))
            if len(articles) + len(redirects) >= _BATCH:
                self._flush_titles(articles, redirects)
                articles, redirects = [], []
        self._flush_titles(articles, redirects)
        self._db.commit()
        return count

    def _flush_titles(self, articles: list, redirects: list) -> None:
        self._db.executemany("INSERT OR IGNORE INTO title VALUES (?, ?, ?)", articles)
        self._db.executemany("INSERT OR IGNORE INTO redirect VALUES (?, ?, ?)", redirects)

    def add_texts(self, side: str, kind: str, texts: Iterator[tuple[int, str]]) -> int:
        count, batch = 0, []
        for page_id, text in texts:
            count += 1
            batch.append((side, kind, page_id, zlib.compress(text.encode("utf-8"), 1)))
            if len(batch) >= _BATCH:
                self._db.executemany("INSERT OR IGNORE INTO text VALUES (?, ?, ?, ?)", batch)
                batch = []
        self._db.executemany("INSERT OR IGNORE INTO text VALUES (?, ?, ?, ?)", batch)
        self._db.commit()
        return count

    def add_dump_texts(self, side: str, path: str, skips: Skips) -> int:
        """Titles and cleaned full texts of a Wikipedia dump (the old snapshot, for DELETED)."""
        self.add_titles(side, path, Skips())  # its pages are counted once, below
        texts = (
            (page.id, "\n".join(paragraphs_of(page)))
            for page in iter_articles(iter_dump_pages(path, skips), skips)
        )
        return self.add_texts(side, FULL, texts)

    def close(self) -> None:
        self._db.close()

    # --- lookups -------------------------------------------------------------------------------

    def article_id(self, side: str, title: str | None) -> int | None:
        """The page id a title names in one snapshot, following one redirect."""
        title = normalise_title(title)
        if title is None:
            return None
        row = self._db.execute(
            "SELECT id FROM title WHERE side = ? AND title = ?", (side, title)
        ).fetchone()
        if row is not None:
            return row[0]
        row = self._db.execute(
            "SELECT target FROM redirect WHERE side = ? AND title = ?", (side, title)
        ).fetchone()
        if row is None or row[0] is None:
            return None
        row = self._db.execute(
            "SELECT id FROM title WHERE side = ? AND title = ?", (side, row[0])
        ).fetchone()
        return row[0] if row is not None else None

    def text(self, side: str, kind: str, page_id: int | None) -> str | None:
        if page_id is None:
            return None
        row = self._db.execute(
            "SELECT body FROM text WHERE side = ? AND kind = ? AND id = ?", (side, kind, page_id)
        ).fetchone()
        return zlib.decompress(row[0]).decode("utf-8") if row is not None else None


def diffset_files(diffset_dir: str) -> tuple[str, str]:
    """``diffset.jsonl`` and ``full.jsonl`` of a DiffSet folder, checked to be complete."""
    require_complete(diffset_dir, "tw-jax diffset")
    for name in ("diffset.jsonl", "full.jsonl"):
        if not paths.isfile(paths.join(diffset_dir, name)):
            raise DumpError(diffset_dir, None, f"not a complete DiffSet folder (no {name})")
    return paths.join(diffset_dir, "diffset.jsonl"), paths.join(diffset_dir, "full.jsonl")
