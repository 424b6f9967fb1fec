"""Ground truth: plain articles, redirects, DiffSets and categorised facts, per month and pair.

These are computed from the generator's own state (plain text it built, statements it holds),
never by reading the dumps back, so they can serve as the oracle for the pipelines that do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from .model import Value, render_time
from .pages import PageStore
from .schema import PROPERTIES
from .world import World

Fact = tuple[str, Value, str, str | None]  # (property, value, rendered object, object qid)


@dataclass
class MonthTruth:
    """What a month's dumps contain, in the form the truth files need."""

    articles: dict[int, tuple[str, list[list[str]]]] = field(default_factory=dict)
    redirects: list[dict] = field(default_factory=list)
    other_pages: int = 0
    facts: dict[str, list[Fact]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    article_of: dict[str, int] = field(default_factory=dict)  # qid -> page id
    entities: int = 0


def render_quantity(value: Value, labels: dict[str, str]) -> str:
    amount = Decimal(value[1])
    text = str(int(amount)) if amount == amount.to_integral_value() else format(amount.normalize(), "f")
    if value[2] is not None:
        text += " " + labels[value[2]]
    return text


def render_value(value: Value, labels: dict[str, str]) -> str:
    """How a fact's object is printed: label, ``12 March 1990``, ``1234567 square kilometre``, text."""
    kind = value[0]
    if kind == "item":
        return labels[value[1]]
    if kind == "time":
        return render_time(value)
    if kind == "quantity":
        return render_quantity(value, labels)
    return value[1]


def snapshot(w: World, store: PageStore) -> MonthTruth:
    t = MonthTruth()
    t.labels = {q: e.label for q, e in w.entities.items()}
    t.entities = len(w.entities)
    for page in store.pages:
        if page.ns != 0:
            t.other_pages += 1
        elif page.target is not None:
            t.redirects.append({"id": page.page_id, "title": page.title, "target": page.target})
        else:
            e = w.get(page.qid)
            t.articles[page.page_id] = (page.title, e.article.plain())
            t.article_of[e.qid] = page.page_id
    for q in sorted(w.entities, key=lambda x: int(x[1:])):
        facts: list[Fact] = []
        seen: set[tuple] = set()
        for prop, sts in w.entities[q].claims.items():
            for st in sts:
                if not st.counts() or (prop, st.value) in seen:
                    continue
                seen.add((prop, st.value))
                obj = st.value[1] if st.value[0] == "item" else None
                facts.append((prop, st.value, render_value(st.value, t.labels), obj))
        if facts:
            t.facts[q] = facts
    return t


def diffset(prev: MonthTruth, recent: MonthTruth) -> list[dict]:
    """Per article with new text: the sentences absent from the same page id's previous text."""
    out = []
    for pid in sorted(recent.articles):
        title, paragraphs = recent.articles[pid]
        sentences = [s for p in paragraphs for s in p]
        if pid in prev.articles:
            old = {s for p in prev.articles[pid][1] for s in p}
            new = [s for s in sentences if s not in old]
            if new:
                out.append({"id": pid, "title": title, "kind": "changed", "sentences": new})
        else:
            out.append({"id": pid, "title": title, "kind": "new", "sentences": sentences})
    return out


def mentioned(obj: str, paragraphs: list[list[str]] | None) -> bool:
    """Whether ``obj`` occurs in the article, case-insensitively, not inside a longer word."""
    if not paragraphs:
        return False
    text = "\n".join(s for p in paragraphs for s in p)
    return re.search(r"(?<!\w)" + re.escape(obj) + r"(?!\w)", text, re.IGNORECASE) is not None


def _article(t: MonthTruth, qid: str) -> list[list[str]] | None:
    pid = t.article_of.get(qid)
    return t.articles[pid][1] if pid is not None else None


def fact_records(prev: MonthTruth, recent: MonthTruth) -> list[dict]:
    """Facts of the pair, categorised new / unchanged / updated / deleted (see the module doc)."""
    out = []
    subjects = sorted(set(recent.facts) | (set(prev.facts) & set(recent.labels)), key=lambda q: int(q[1:]))
    for s in subjects:
        now = recent.facts.get(s, [])
        before = prev.facts.get(s, [])
        existed = s in prev.labels
        before_keys = {(p, v) for p, v, _, _ in before}
        article_now = _article(recent, s)
        for prop, value, rendered, obj in now:
            previous = [r for p, _, r, _ in before if p == prop]
            if not existed or not previous:
                category, previous = "new", []
            elif (prop, value) in before_keys:
                category, previous = "unchanged", []
            else:
                category = "updated"
            out.append(_record(s, recent.labels[s], prop, obj, rendered, category, previous,
                               mentioned(rendered, article_now)))
        now_keys = {(p, v) for p, v, _, _ in now}
        article_before = _article(prev, s)
        for prop, value, rendered, obj in before:
            if (prop, value) not in now_keys:
                out.append(_record(s, recent.labels[s], prop, obj, rendered, "deleted", [],
                                   mentioned(rendered, article_before)))
    return out


def _record(s: str, label: str, prop: str, obj: str | None, rendered: str, category: str,
            previous: list[str], is_mentioned: bool) -> dict:
    return {"subject_id": s, "subject": label, "relation_id": prop, "relation": PROPERTIES[prop][0],
            "object_id": obj, "object": rendered, "category": category, "previous_objects": previous,
            "mentioned": is_mentioned}
