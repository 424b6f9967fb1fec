"""SQLite files used as on-disk scratch indexes by the preprocessing stages.

A stage writes an index once (no journal, no fsync: a crash loses only scratch data that the
rerun rebuilds) and then reads it from several worker processes, each with its own read-only
connection.
"""

from __future__ import annotations

import sqlite3


def open_scratch(path: str, *, create: bool = False, schema: str = "") -> sqlite3.Connection:
    """A connection for writing a new index (``create``, running ``schema``) or reading one."""
    if not create:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    if schema:
        db.executescript(schema)
    return db
