"""The previous snapshot's subjects on disk: label, enwiki title and facts, keyed by entity id.

The new dump is streamed once and each of its entities looks its old self up here, so no
snapshot is ever held in memory (a Wikidata dump has ~93 million entities). Facts are stored as
JSON (never pickled): the store is a scratch file, but JSON keeps it inspectable and safe.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from tw_jax.io.scratch_db import open_scratch
from tw_jax.preprocess.probes.facts import Fact, SubjectSide

_BATCH = 5000


def _encode(facts: tuple[Fact, ...]) -> bytes:
    return orjson.dumps(facts)


def _decode(text: bytes) -> tuple[Fact, ...]:
    return tuple((relation, key, tuple(value)) for relation, key, value in orjson.loads(text))


class OldSnapshot:
    def __init__(self, path: str, *, create: bool = False) -> None:
        self.path = path
        self._db = open_scratch(
            path,
            create=create,
            schema="CREATE TABLE old (id TEXT PRIMARY KEY, label TEXT, enwiki TEXT, facts BLOB)"
            " WITHOUT ROWID",
        )

    def add_all(self, sides: Iterable[tuple[str, SubjectSide]]) -> int:
        """Stores every (id, side); the first occurrence of an id wins. Returns the count."""
        count, batch = 0, []
        for entity_id, (label, enwiki, facts) in sides:
            count += 1
            batch.append((entity_id, label, enwiki, _encode(facts)))
            if len(batch) >= _BATCH:
                self._db.executemany("INSERT OR IGNORE INTO old VALUES (?, ?, ?, ?)", batch)
                batch = []
        self._db.executemany("INSERT OR IGNORE INTO old VALUES (?, ?, ?, ?)", batch)
        self._db.commit()
        return count

    def get(self, entity_id: str) -> SubjectSide | None:
        row = self._db.execute(
            "SELECT label, enwiki, facts FROM old WHERE id = ?", (entity_id,)
        ).fetchone()
        if row is None:
            return None
        return row[0], row[1], _decode(row[2])

    def label(self, entity_id: str) -> str | None:
        row = self._db.execute("SELECT label FROM old WHERE id = ?", (entity_id,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self._db.close()
