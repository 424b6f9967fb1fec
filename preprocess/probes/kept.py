"""The probes that passed alignment and the rules, on disk until the category-wide steps.

Kept probes are what grows with the dump (at ``--unchanged-rate 1`` a full Wikidata dump keeps
tens of millions), so no runner holds them in memory: each is appended to an SQLite table in the
stage's scratch folder as it is found, in the order the runner found them (its ``seq``: dump
order locally), a batch at a time. :meth:`KeptStore.finalise` then runs the category-wide steps
of :func:`~tw_jax.preprocess.probes.rules.finalise` in SQL, each one a ``ROW_NUMBER()`` window
over the probes that survived the step before, ordered by :meth:`Probe.sort_key` and then
``seq`` (what Python's stable sort of the found-order list gives), so the very same probes
survive; :meth:`KeptStore.final` streams a category's survivors in that order to the writers.
SQLite sorts on disk (its external merge sort, spilling runs to temporary files in ``TMPDIR``,
where the scratch folder is too) and keeps at most its page cache in memory, so the stage's
memory holds one batch of probes and that cache, whatever their number.

Text compares as it does in Python: SQLite's BINARY collation orders UTF-8 bytes, which is
code-point order, and windows partition by exact equality.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tw_jax.io.scratch_db import open_scratch
from tw_jax.preprocess.probes.records import Probe
from tw_jax.preprocess.probes.rules import cap_limit

BATCH = 5000  # probes per INSERT batch: what the store holds in memory
CACHE_KIB = 16384  # SQLite's page cache, which also bounds each in-memory sort run

_FIELDS = Probe._fields  # subject, relation, object, ..., category, key: the table's columns
_SCHEMA = (
    "CREATE TABLE kept (seq INTEGER PRIMARY KEY, "
    + ", ".join(f"{name} TEXT NOT NULL" for name in _FIELDS)
    + ")"
)
_INSERT = f"INSERT INTO kept VALUES ({', '.join('?' * (len(_FIELDS) + 1))})"
# Probe.sort_key, then the order in which the probes were found.
_ORDER = "k.subject_id, k.relation_id, k.key, k.object, k.seq"
_COLUMNS = ", ".join(f"k.{name}" for name in _FIELDS)
# (the count it records, the window's partition, the option holding its fraction): the steps of
# rules.finalise in order; duplicates keep one probe per text, a cap max(1, ⌊f·N⌋) per group.
STEPS = (
    ("after_duplicates", "k.subject, k.relation, k.object", None),
    ("after_subject_cap", "k.subject_id", "max_subject_frac"),
    ("after_object_cap", "k.key", "max_object_frac"),
    ("after_relation_cap", "k.relation_id", "max_relation_frac"),
)
FINAL = STEPS[-1][0]


class KeptStore:
    """Kept probes of every category in one scratch SQLite file: :meth:`add` them as they come,
    then :meth:`finalise` each category and read its :meth:`final` probes back in order.

    ``batch`` probes (default :data:`BATCH`) are held before each INSERT; ``cache_kib`` (default
    :data:`CACHE_KIB`) is SQLite's page cache, which also sizes the runs its sorts spill (250
    pages at least). Both only trade speed for memory: the result is the same.
    """

    def __init__(
        self, path: str, *, batch: int | None = None, cache_kib: int | None = None
    ) -> None:
        self.path = path
        self._batch_size = max(1, BATCH if batch is None else batch)
        self._db = open_scratch(path, create=True, schema=_SCHEMA)
        cache_kib = CACHE_KIB if cache_kib is None else cache_kib
        self._db.execute(f"PRAGMA cache_size = -{max(1, cache_kib)}")
        self._db.execute("PRAGMA temp_store = FILE")  # sorts and windows spill to disk
        for name, _, _ in STEPS:  # the seq of each survivor of each step
            self._db.execute(f"CREATE TABLE {name} (seq INTEGER PRIMARY KEY)")
        self._pending: list[tuple] = []
        self._count = 0
        self._sealed = False

    # --- filling -------------------------------------------------------------------------------

    def add(self, probe: Probe) -> None:
        if self._sealed:
            raise RuntimeError("KeptStore: add() after finalise()")
        self._count += 1
        self._pending.append((self._count, *probe))
        if len(self._pending) >= self._batch_size:
            self._flush()

    def extend(self, probes: Iterable[Probe]) -> None:
        for probe in probes:
            self.add(probe)

    def __len__(self) -> int:
        return self._count

    def _flush(self) -> None:
        if self._pending:
            self._db.executemany(_INSERT, self._pending)
            self._pending = []

    def _seal(self) -> None:
        """Every probe in the table, and the index that walks a category in final order."""
        if not self._sealed:
            self._flush()
            self._db.execute(
                "CREATE INDEX kept_order ON kept (category, subject_id, relation_id, key, object)"
            )
            self._db.commit()
            self._sealed = True

    # --- the category-wide steps ---------------------------------------------------------------

    def finalise(
        self,
        category: str,
        max_subject_frac: float,
        max_object_frac: float,
        max_relation_frac: float,
    ) -> dict[str, int]:
        """Applies duplicates and caps to one category; returns the count after each step (the
        counts :func:`~tw_jax.preprocess.probes.rules.finalise` returns)."""
        self._seal()
        fractions = {
            "max_subject_frac": max_subject_frac,
            "max_object_frac": max_object_frac,
            "max_relation_frac": max_relation_frac,
        }
        (n,) = self._db.execute(
            "SELECT COUNT(*) FROM kept WHERE category = ?", (category,)
        ).fetchone()
        counts = {"aligned": n}
        source = ""
        for name, partition, option in STEPS:
            limit = 1 if option is None else cap_limit(fractions[option], n)
            cursor = self._db.execute(
                f"INSERT INTO {name} SELECT seq FROM ("
                f"SELECT k.seq AS seq, ROW_NUMBER() OVER "
                f"(PARTITION BY {partition} ORDER BY {_ORDER}) AS n "
                f"FROM kept AS k{source} WHERE k.category = ?) WHERE n <= ?",
                (category, limit),
            )
            n = cursor.rowcount
            counts[name] = n
            source = f" JOIN {name} AS s ON s.seq = k.seq"
        self._db.commit()
        return counts

    def final(self, category: str) -> FinalProbes:
        """The category's finalised probes, in :meth:`Probe.sort_key` order (re-iterable)."""
        return FinalProbes(self, category)

    def final_texts(self, category: str) -> Iterator[tuple[str, str, str]]:
        """``(subject, relation, object)`` of each finalised probe of the category."""
        rows = self._db.execute(
            f"SELECT k.subject, k.relation, k.object FROM kept AS k JOIN {FINAL} AS s"
            " ON s.seq = k.seq WHERE k.category = ?",
            (category,),
        )
        yield from rows

    def _final_rows(self, category: str) -> Iterator[Probe]:
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM kept AS k JOIN {FINAL} AS s ON s.seq = k.seq"
            f" WHERE k.category = ? ORDER BY {_ORDER}",
            (category,),
        )
        while batch := rows.fetchmany(1024):
            for row in batch:
                yield Probe(*row)

    def close(self) -> None:
        self._pending = []
        self._db.close()


class FinalProbes:
    """One category's finalised probes, read from the store each time they are iterated."""

    def __init__(self, store: KeptStore, category: str) -> None:
        self._store, self.category = store, category

    def __iter__(self) -> Iterator[Probe]:
        return self._store._final_rows(self.category)
