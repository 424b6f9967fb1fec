"""Quality control (TemporalWiki §3.3, extended): alignment with article text, heuristic rules.

Per-fact checks (:func:`mentions`, :func:`heuristic_reason`) decide on one fact alone, so they run
wherever the fact is. The category-wide steps (duplicates, caps) need the whole category and run
last, in :func:`finalise`, over the probes sorted by fact identity: the outcome does not depend on
the order in which a runner delivered them.

Steps in order, each counted in ``stats.json``: alignment, subject/object substring, objects of
more than ``MAX_OBJECT_WORDS`` words, duplicates, subject cap, object cap, relation cap. A cap with
fraction f over a category of N probes (N as it enters that cap) keeps at most max(1, ⌊f·N⌋)
probes per subject (object, relation): the first ones in sorted order.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache

from tw_jax.preprocess.probes.records import Probe

MAX_OBJECT_WORDS = 5
CAP_STEPS = ("subject_cap", "object_cap", "relation_cap")


@lru_cache(maxsize=65536)
def _pattern(obj: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(obj) + r"(?!\w)", re.IGNORECASE)


def mentions(text: str | None, obj: str) -> bool:
    """Whether ``obj`` occurs in ``text``, case-insensitively, not inside a longer word."""
    if not text or not obj:
        return False
    return _pattern(obj).search(text) is not None


def heuristic_reason(subject: str, obj: str) -> str | None:
    """Why a fact fails the per-fact heuristic rules, or None if it passes.

    A subject inside its object or the reverse ("Paris", "capital", "Paris") makes the probe
    answerable from its own prompt; long objects are not facts a model can be asked for.
    """
    s, o = subject.casefold(), obj.casefold()
    if s in o or o in s:
        return "subject_object_substring"
    if len(obj.split()) > MAX_OBJECT_WORDS:
        return "object_too_long"
    return None


def cap_limit(fraction: float, n: int) -> int:
    return max(1, math.floor(fraction * n))


def _cap(probes: list[Probe], key: Callable[[Probe], str], fraction: float) -> list[Probe]:
    limit = cap_limit(fraction, len(probes))
    counts: Counter[str] = Counter()
    kept = []
    for probe in probes:
        k = key(probe)
        if counts[k] < limit:
            counts[k] += 1
            kept.append(probe)
    return kept


def finalise(
    probes: Iterable[Probe],
    max_subject_frac: float,
    max_object_frac: float,
    max_relation_frac: float,
) -> tuple[list[Probe], dict[str, int]]:
    """The category's probes after duplicates and caps, sorted, and the count after each step.

    Duplicates are probes with the same ``subject,relation,object`` text (two items that share
    labels): the CSV could not tell them apart.
    """
    ordered = sorted(probes, key=Probe.sort_key)
    counts = {"aligned": len(ordered)}
    seen: set[tuple[str, str, str]] = set()
    unique = []
    for probe in ordered:
        text = (probe.subject, probe.relation, probe.object)
        if text not in seen:
            seen.add(text)
            unique.append(probe)
    counts["after_duplicates"] = len(unique)
    kept = _cap(unique, lambda p: p.subject_id, max_subject_frac)
    counts["after_subject_cap"] = len(kept)
    kept = _cap(kept, lambda p: p.key, max_object_frac)
    counts["after_object_cap"] = len(kept)
    kept = _cap(kept, lambda p: p.relation_id, max_relation_frac)
    counts["after_relation_cap"] = len(kept)
    return kept, counts
