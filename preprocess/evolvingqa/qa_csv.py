"""Writing QA sets in the released EvolvingQA format, whoever generated them.

``question,answer`` for Unchanged and New, ``question,answer1,answer2`` (outdated, updated) for
Edited; the QA folder holds ``unchanged_train.csv`` (the QA fine-tuning set), ``unchanged_eval.csv``,
``new_<MMMM>.csv`` and ``edited_<MMMM>.csv`` (:mod:`.layout`), and ``generate.json`` with the
counts, written last. The paper splits its Unchanged pairs at random into 80K for fine-tuning
and the rest (49,504) for evaluation; :func:`split_unchanged` does the same with a fraction
(default 0.62 ≈ 80,000 / 129,504) and a seed. A question asked twice with different answers is
ambiguous and dropped; exact duplicates are kept once (before the split, so no question is in
both halves). The QA folder may be local or a ``gs://`` URL.
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, discard, write_json
from tw_jax.preprocess.evolvingqa import layout
from tw_jax.text.answers import normalize_answer

QA_HEADER = ("question", "answer")
EDITED_HEADER = ("question", "answer1", "answer2")
PAPER_FINETUNE_FRACTION = 0.62
GENERATE_FILE = "generate.json"


@dataclass(frozen=True)
class QA:
    """A question with its answer, or (Edited) its outdated ``answer`` and updated ``answer2``;
    ``source`` says where it came from (a passage or probe id), for audits."""

    question: str
    answer: str
    answer2: str | None = None
    source: str = ""

    def row(self) -> tuple[str, ...]:
        return (self.question, self.answer) if self.answer2 is None else (
            self.question, self.answer, self.answer2)


def dedupe(rows: Iterable[QA]) -> tuple[list[QA], int]:
    """Rows with each question once; questions with conflicting answers dropped. Returns (kept,
    dropped as ambiguous)."""
    rows = list(rows)
    answers: dict[str, set[tuple[str, ...]]] = {}
    for row in rows:
        answers.setdefault(row.question, set()).add(
            tuple(normalize_answer(a) for a in row.row()[1:]))
    kept, seen = [], set()
    for row in rows:
        if len(answers[row.question]) == 1 and row.question not in seen:
            seen.add(row.question)
            kept.append(row)
    ambiguous = sum(1 for a in answers.values() if len(a) > 1)
    return kept, ambiguous


def split_unchanged(rows: Sequence[QA], fraction: float, seed: int) -> tuple[list[QA], list[QA]]:
    """(fine-tuning rows, evaluation rows): a seeded shuffle cut at ``fraction``, each half
    in the original order."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fine-tuning fraction must be in [0, 1], got {fraction}")
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    train = set(order[: round(len(rows) * fraction)])
    return ([r for i, r in enumerate(rows) if i in train],
            [r for i, r in enumerate(rows) if i not in train])


def write_csv(path: str | os.PathLike[str], rows: Sequence[QA], *, edited: bool) -> None:
    with atomic_open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(EDITED_HEADER if edited else QA_HEADER)
        for row in rows:
            writer.writerow(row.row())


def write_qa_sets(
    qa_dir: str | os.PathLike[str],
    unchanged: Sequence[QA],
    new: dict[str, Sequence[QA]],
    edited: dict[str, Sequence[QA]],
    *,
    finetune_fraction: float = PAPER_FINETUNE_FRACTION,
    seed: int = 0,
    details: dict[str, Any] | None = None,
    set_figures: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """Writes every set (see the module docstring); returns the ``generate.json`` contents.

    ``set_figures`` adds the generator's own figures to a set's counts (set name → figure →
    value, such as the offline generator's ``no_source_article``)."""
    qa_dir = os.fspath(qa_dir)
    paths.makedirs(qa_dir)
    discard(paths.join(qa_dir, GENERATE_FILE))
    counts: dict[str, Any] = {}
    rows, ambiguous = dedupe(unchanged)
    train, evaluation = split_unchanged(rows, finetune_fraction, seed)
    write_csv(paths.join(qa_dir, layout.UNCHANGED_TRAIN), train, edited=False)
    write_csv(paths.join(qa_dir, layout.UNCHANGED_EVAL), evaluation, edited=False)
    counts["unchanged"] = {"train": len(train), "eval": len(evaluation), "ambiguous": ambiguous}
    for pair, pair_rows in sorted(new.items()):
        kept, ambiguous = dedupe(pair_rows)
        write_csv(paths.join(qa_dir, layout.new_qa(pair)), kept, edited=False)
        counts[f"new_{pair}"] = {"rows": len(kept), "ambiguous": ambiguous,
                                 **(set_figures or {}).get(f"new_{pair}", {})}
    for pair, pair_rows in sorted(edited.items()):
        kept, ambiguous = dedupe(pair_rows)
        write_csv(paths.join(qa_dir, layout.edited_qa(pair)), kept, edited=True)
        counts[f"edited_{pair}"] = {"rows": len(kept), "ambiguous": ambiguous,
                                    **(set_figures or {}).get(f"edited_{pair}", {})}
    summary = {"sets": counts, "finetune_fraction": finetune_fraction, "seed": seed,
               **(details or {})}
    write_json(paths.join(qa_dir, GENERATE_FILE), summary)
    return summary
