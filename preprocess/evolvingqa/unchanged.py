"""The articles that did not change over the whole window (EvolvingQA's Unchanged topics).

"Wikipedia articles from the February 2023 snapshot that have not changed during the next six
months" (§2.2). Every pair's DiffSet folder has ``unchanged.jsonl``, but with
``--min-changed-chars`` it also holds articles whose changes were too small for the Changed set,
and an article that only lost sentences is "unchanged" to the DiffSet (nothing new to learn).
So an article is unchanged over the window here when its cleaned text is the same in every
snapshot:

1. Candidates: ids in every pair's ``unchanged.jsonl`` with the same text each time (a digest per
   id in an on-disk SQLite scratch index, so memory stays flat for enwiki's millions).
2. Sample: candidates ordered by a seeded hash of their id, the first ``limit x OVERSAMPLE``.
3. Check: the first snapshot's version of each sampled candidate (read from the first dump while
   it is streamed for the Edited pairs anyway) must have that same text; the first ``limit`` by
   hash order that pass are the Unchanged articles. Only sampled articles are parsed, never the
   whole first dump.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable, Iterator
from typing import Any

from tw_jax.io import jsonl
from tw_jax.io.scratch_db import open_scratch

OVERSAMPLE = 1.5  # some sampled candidates changed in the first month (below the Changed filter)
_BATCH = 5000


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def sample_key(seed: int, article_id: int) -> bytes:
    return hashlib.blake2b(f"{seed}:{article_id}".encode(), digest_size=8).digest()


def _batched(items: Iterable[Any], size: int = _BATCH) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class Candidates:
    """Step 1 and 2 of the module docstring, in a SQLite file under ``scratch``."""

    def __init__(self, scratch: str | os.PathLike[str], seed: int) -> None:
        self.seed = seed
        self.db = open_scratch(
            os.path.join(scratch, "unchanged.sqlite"),
            create=True,
            schema="CREATE TABLE c (id INTEGER PRIMARY KEY, digest BLOB, key BLOB, hits INTEGER)",
        )
        self.pairs = 0

    def add_pair(self, unchanged_jsonl: str) -> None:
        """Fold in one pair's ``unchanged.jsonl`` (in month order)."""
        records = jsonl.records(unchanged_jsonl, ("id", "text"))
        if self.pairs == 0:
            for batch in _batched(records):
                self.db.executemany(
                    "INSERT OR IGNORE INTO c VALUES (?, ?, ?, 0)",
                    [(int(r["id"]), digest(r["text"]), sample_key(self.seed, int(r["id"])))
                     for r in batch],
                )
        else:
            for batch in _batched(records):
                self.db.executemany(
                    "UPDATE c SET hits = hits + 1 WHERE id = ? AND digest = ?",
                    [(int(r["id"]), digest(r["text"])) for r in batch],
                )
        self.db.commit()
        self.pairs += 1

    def count(self) -> int:
        (n,) = self.db.execute("SELECT COUNT(*) FROM c WHERE hits = ?", (self.pairs - 1,)).fetchone()
        return int(n)

    def sample(self, limit: int | None) -> dict[int, tuple[bytes, bytes]]:
        """``{id: (digest, key)}`` of the candidates to check (all when ``limit`` is None)."""
        query = "SELECT id, digest, key FROM c WHERE hits = ? ORDER BY key, id"
        params: tuple[int, ...] = (self.pairs - 1,)
        if limit is not None:
            query += " LIMIT ?"
            params += (math.ceil(limit * OVERSAMPLE),)
        return {int(i): (bytes(d), bytes(k)) for i, d, k in self.db.execute(query, params)}

    def close(self) -> None:
        self.db.close()


def select(checked: dict[int, bytes], limit: int | None) -> set[int]:
    """Step 3: the ``limit`` first ids by sample key among those that passed the check."""
    ordered = sorted(checked, key=lambda i: (checked[i], i))
    return set(ordered if limit is None else ordered[:limit])
