"""English labels of every entity of a Wikidata dump, in an SQLite file on disk.

The probes print each object item by its label, and the object is rarely the entity being
read, so every label of the dump must be at hand; a Python dict of 93 million labels would not
fit a worker. One streaming pass writes them to SQLite (plus each property's datatype), and
lookups go through batched ``IN (...)`` queries and a small in-process cache, since the same
few objects (countries, clubs, genders, units) recur in most entities.

The index is written under a temporary name and renamed into place, so an interrupted build
never leaves a file that looks complete.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from itertools import islice

from tw_jax.preprocess.dumps.wikidata import iter_records
from tw_jax.preprocess.runners.accounting import Skips

__all__ = ["LabelIndex"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entities ("
    " id TEXT PRIMARY KEY, label TEXT, datatype TEXT) WITHOUT ROWID"
)
_INSERT = "INSERT OR REPLACE INTO entities (id, label, datatype) VALUES (?, ?, ?)"
_BATCH = 20_000  # rows per executemany
_CHUNK = 500  # ids per IN (...) query, under SQLite's host-parameter limit on old builds
_CACHE_SIZE = 200_000  # ids whose answer is kept in process
_BUILD_CACHE_KIB = 512 * 1024  # SQLite page cache while building
_MISSING = object()


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


class LabelIndex:
    """English label (and property datatype) by entity id, read from an SQLite file.

    ``LabelIndex(path)`` opens an existing index; ``create=True`` makes an empty one (what
    :meth:`build` uses). Not shared between threads: open one per worker.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False) -> None:
        self.path = os.fspath(path)
        if not create and not os.path.exists(self.path):
            raise FileNotFoundError(f"no label index at {self.path}")
        self._db = sqlite3.connect(self.path)
        if create:
            self._db.execute(_SCHEMA)
            self._db.commit()
        # Answers (None included) kept until the cache fills, then dropped wholesale: cheaper
        # than LRU bookkeeping, and recurring objects come straight back.
        self._cache: dict[str, str | None] = {}

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def build(cls, dump_path: str | os.PathLike[str], index_path: str | os.PathLike[str],
              skips: Skips | None = None) -> LabelIndex:
        """Read ``dump_path`` once and write its labels to ``index_path`` (replaced atomically).

        Entities without an English label are stored with a NULL label, so a lookup can tell
        "in the dump, unlabelled" from "not in the dump" through :meth:`__contains__`.
        """
        skips = skips if skips is not None else Skips()
        index_path = os.fspath(index_path)
        tmp = f"{index_path}.tmp-{os.getpid()}"
        for leftover in (tmp, f"{tmp}-journal"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        index = cls(tmp, create=True)
        try:
            db = index._db
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")
            # Dump order is not key order ("Q10" < "Q2"), so inserts land all over the b-tree:
            # a larger page cache keeps a real dump's build from turning into random I/O.
            db.execute(f"PRAGMA cache_size=-{_BUILD_CACHE_KIB}")
            rows: list[tuple[str, str | None, str | None]] = []
            for _, obj in iter_records(dump_path, skips):
                labels = obj.get("labels")
                en = labels.get("en") if isinstance(labels, dict) else None
                label = en.get("value") if isinstance(en, dict) else None
                datatype = obj.get("datatype") if obj["type"] == "property" else None
                rows.append((obj["id"], label, datatype))
                if len(rows) >= _BATCH:
                    db.executemany(_INSERT, rows)
                    rows.clear()
            if rows:
                db.executemany(_INSERT, rows)
            db.commit()
            index.close()
            os.replace(tmp, index_path)
        finally:
            index.close()  # a no-op when already closed
            if os.path.exists(tmp):
                os.unlink(tmp)
        return cls(index_path)

    # -- lookups --------------------------------------------------------------------------------
    def label(self, entity_id: str) -> str | None:
        """The English label of ``entity_id``; None if it has none or is not in the dump."""
        cached = self._cache.get(entity_id, _MISSING)
        if cached is not _MISSING:
            return cached  # type: ignore[return-value]
        row = self._db.execute("SELECT label FROM entities WHERE id = ?", (entity_id,)).fetchone()
        label = row[0] if row else None
        self._remember(entity_id, label)
        return label

    def labels(self, ids: Iterable[str]) -> dict[str, str]:
        """Labels of those ``ids`` that have one (missing and unlabelled ids are left out)."""
        out: dict[str, str] = {}
        wanted: list[str] = []
        cache = self._cache
        for eid in dict.fromkeys(ids):
            cached = cache.get(eid, _MISSING)
            if cached is _MISSING:
                wanted.append(eid)
            elif cached is not None:
                out[eid] = cached  # type: ignore[assignment]
        for chunk in _chunks(wanted, _CHUNK):
            marks = ",".join("?" * len(chunk))
            found = dict(self._db.execute(
                f"SELECT id, label FROM entities WHERE id IN ({marks})", chunk).fetchall())
            for eid in chunk:
                label = found.get(eid)
                self._remember(eid, label)
                if label is not None:
                    out[eid] = label
        return out

    def datatype(self, property_id: str) -> str | None:
        """The datatype of a property (``wikibase-item``, ``time``...); None if unknown."""
        row = self._db.execute(
            "SELECT datatype FROM entities WHERE id = ?", (property_id,)).fetchone()
        return row[0] if row else None

    def __contains__(self, entity_id: object) -> bool:
        row = self._db.execute("SELECT 1 FROM entities WHERE id = ?", (entity_id,)).fetchone()
        return row is not None

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM entities").fetchone()[0]

    def _remember(self, entity_id: str, label: str | None) -> None:
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[entity_id] = label

    # -- lifetime -------------------------------------------------------------------------------
    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> LabelIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
