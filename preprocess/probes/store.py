"""The previous snapshot's subjects on disk: label, enwiki title and facts, keyed by entity id.

The new dump is streamed once and each of its entities looks its old self up here, so no
snapshot is ever held in memory (a Wikidata dump has ~93 million entities). Facts are stored as
JSON (never pickled): the store is a scratch file, but JSON keeps it inspectable and safe.

An entity skipped as malformed in the old dump is stored too, without facts, so that the new
dump's lookup tells it (:data:`MALFORMED`) from an entity that did not exist (None).
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from tw_jax.io.scratch_db import open_scratch
from tw_jax.preprocess.probes.facts import Fact, SubjectSide

_BATCH = 5000
# A well-formed record replaces a malformed one of the same id; otherwise the first one wins.
_INSERT = (
    "INSERT INTO old VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET label = excluded.label,"
    " enwiki = excluded.enwiki, facts = excluded.facts"
    " WHERE old.facts IS NULL AND excluded.facts IS NOT NULL"
)


class _Malformed:
    def __repr__(self) -> str:
        return "MALFORMED"


MALFORMED = _Malformed()  # what get() returns for an entity skipped as malformed


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

    def add_all(self, sides: Iterable[tuple[str, SubjectSide | None]]) -> int:
        """Stores every (id, side), a None side marking an entity skipped as malformed; the
        first well-formed occurrence of an id wins. Returns the count of well-formed ones."""
        count, batch = 0, []
        for entity_id, side in sides:
            if side is None:
                batch.append((entity_id, None, None, None))
            else:
                count += 1
                label, enwiki, facts = side
                batch.append((entity_id, label, enwiki, _encode(facts)))
            if len(batch) >= _BATCH:
                self._db.executemany(_INSERT, batch)
                batch = []
        self._db.executemany(_INSERT, batch)
        self._db.commit()
        return count

    def get(self, entity_id: str) -> SubjectSide | _Malformed | None:
        """The entity's old side, :data:`MALFORMED` if the old dump had it malformed, or None
        if the old dump did not have it."""
        row = self._db.execute(
            "SELECT label, enwiki, facts FROM old WHERE id = ?", (entity_id,)
        ).fetchone()
        if row is None:
            return None
        if row[2] is None:
            return MALFORMED
        return row[0], row[1], _decode(row[2])

    def label(self, entity_id: str) -> str | None:
        row = self._db.execute("SELECT label FROM old WHERE id = ?", (entity_id,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self._db.close()
