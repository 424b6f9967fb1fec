"""Facts as small plain tuples, compared by identity, and the hashes that sample them.

A fact of one subject is ``(relation_id, object_key, value)``. ``value`` is the reader's claim
value (``("item", "Q5")``, ``("time", "+1990-03-12T00:00:00Z", 11)``, …); ``object_key`` is its
identity: the QID for items, a normalised form of the value otherwise. Categorisation compares
keys, never labels, so a renamed item is the same object and two items that share a label are not.

Tuples (not dataclasses) because millions of them cross process and Beam boundaries: they pickle
small and compare fast. Hashes are keyed on the fact itself, so the local path and every Beam
worker sample the same facts whatever order they see them in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

Value = tuple
Fact = tuple[str, str, Value]  # (relation_id, object_key, value)
# What the pipeline keeps of one entity of a snapshot: (label, enwiki title, facts).
SubjectSide = tuple[str | None, str | None, tuple[Fact, ...]]

_HASH_SPACE = float(1 << 64)


def _number(text: str) -> str:
    """``+1234.50`` and ``1234.5`` are one amount: compare their canonical decimal form."""
    try:
        amount = Decimal(text)
    except (InvalidOperation, TypeError):
        return str(text)
    if amount == amount.to_integral_value():
        return str(int(amount))
    return format(amount.normalize(), "f")


def object_key(value: Value) -> str:
    """The identity of a claim's object: QID for items, a normalised value otherwise.

    Raises ValueError for a value kind the reader does not produce (a programming error, not bad
    input: unknown datatypes are skipped by the reader).
    """
    kind = value[0]
    if kind == "item":
        return value[1]
    if kind == "time":
        precision = value[2] if len(value) > 2 else None
        return f"time:{value[1]}/{precision}"
    if kind == "quantity":
        unit = value[2] if len(value) > 2 and value[2] not in (None, "1") else ""
        return f"quantity:{_number(value[1])}/{unit}"
    if kind == "string":
        return "string:" + " ".join(str(value[1]).split())
    if kind in ("monolingualtext", "mono"):
        lang = value[2] if len(value) > 2 else ""
        return f"text:{' '.join(str(value[1]).split())}@{lang}"
    raise ValueError(f"unknown claim value kind {kind!r}")


def object_id(value: Value) -> str:
    """The ``object_id`` column: the QID of an item object, empty for literal values."""
    return value[1] if value[0] == "item" else ""


def facts_of(claims: Iterable[Any]) -> tuple[Fact, ...]:
    """An entity's facts from its claims (objects with ``property`` and ``value``), in claim
    order, each (relation, object) once: two statements with the same value are one fact."""
    seen: set[tuple[str, str]] = set()
    facts: list[Fact] = []
    for claim in claims:
        value = claim.value
        key = value[1] if value[0] == "item" else object_key(value)  # items: the common case
        pair = (claim.property, key)
        if pair in seen:
            continue
        seen.add(pair)
        facts.append((claim.property, key, value))
    return tuple(facts)


def subject_side(entity: Any) -> SubjectSide:
    """(label, enwiki, facts) of a reader ``Entity``: all the pipeline keeps of it."""
    return entity.label, entity.enwiki, facts_of(entity.claims)


def fact_hash(seed: int, salt: str, subject_id: str, relation_id: str, key: str) -> int:
    """A 64-bit hash of one fact: the same in every process and on every run with ``seed``."""
    data = f"{seed}\x1f{salt}\x1f{subject_id}\x1f{relation_id}\x1f{key}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def sampled(seed: int, rate: float, subject_id: str, relation_id: str, key: str) -> bool:
    """Whether a fact survives down-sampling at ``rate`` (TemporalWiki samples UNCHANGED at 0.1%).

    Rate 1 keeps everything and rate 0 nothing, without hashing.
    """
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    return fact_hash(seed, "sample", subject_id, relation_id, key) < rate * _HASH_SPACE
