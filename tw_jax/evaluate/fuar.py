"""FUAR (CKL eq. 1) and the stability-plasticity averages of TemporalWiki.

FUAR weighs what an ever-changing LM forgot against what it updated or acquired. Phases are
numbered 0..n: ``LM_0`` is the initial model, ``LM_i`` the model after corpus ``D_i``. With
``Gap(T, a, b) = score(T, LM_a) - score(T, LM_b)``::

    FUAR = Σ_{i=1..n} Σ_{j=0..i-1} max(0, Gap(T^F_j, j, i))
           / Σ_{i=1..n} [max(0, Gap(T^U_i, i, i-1)) + max(0, Gap(T^A_i, i, i-1))]

``T^F_j`` measures invariant knowledge of ``D_j`` (CKL: InvariantLAMA for ``D_0``), ``T^U_i``
updated and ``T^A_i`` new knowledge of ``D_i`` (UpdatedLAMA, NewLAMA). An undefined task (None)
contributes nothing. A zero denominator is "no gain", the worst case (CKL §3.2); only positive
gaps count (backward transfer and negative forward transfer are not measured, CKL footnote 6).

CKL Table 2 (one phase, ``T^F_0`` = IL, ``T^U_1`` = UL, ``T^A_1`` = NL, EM) is reproduced by
:func:`single_phase_fuar` (tests check every row of the FUAR column).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NO_GAIN_TEXT = "no gain"


@dataclass(frozen=True)
class Fuar:
    """A FUAR value with its two sums; ``value`` is ``inf`` when nothing was gained."""

    forgotten: float
    gained: float

    @property
    def no_gain(self) -> bool:
        return self.gained <= 0.0

    @property
    def value(self) -> float:
        return math.inf if self.no_gain else self.forgotten / self.gained

    def __str__(self) -> str:
        return NO_GAIN_TEXT if self.no_gain else f"{self.value:.2f}"


def _score(scores: Mapping[str, Sequence[float | None]], task: str, phase: int) -> float:
    try:
        value = scores[task][phase]
    except (KeyError, IndexError):
        value = None
    if value is None:
        raise ValueError(f"FUAR needs the score of task {task!r} under LM_{phase}, which is missing")
    return float(value)


def _task(tasks: Sequence[str | None], phase: int) -> str | None:
    return tasks[phase] if phase < len(tasks) else None


def fuar(
    scores: Mapping[str, Sequence[float | None]],
    forget: Sequence[str | None],
    update: Sequence[str | None],
    acquire: Sequence[str | None],
) -> Fuar:
    """FUAR over phases 0..n, where ``n + 1 = len(scores[task])`` for every task.

    ``scores[task][phase]`` is the task's score (higher is better, e.g. EM) under ``LM_phase``.
    ``forget[j]``, ``update[i]`` and ``acquire[i]`` name the tasks ``T^F_j``, ``T^U_i`` and
    ``T^A_i`` (None: not defined); ``update[0]``/``acquire[0]`` are never used. A defined task
    whose needed score is missing raises ``ValueError``.
    """
    lengths = {len(v) for v in scores.values()}
    if len(lengths) != 1:
        raise ValueError(f"every task needs one score per phase; got lengths {sorted(lengths)}")
    phases = lengths.pop()
    if phases < 2:
        raise ValueError("FUAR needs at least two phases (the initial model and one update)")
    forgotten = gained = 0.0
    for i in range(1, phases):
        for j in range(i):
            task = _task(forget, j)
            if task is not None:
                forgotten += max(0.0, _score(scores, task, j) - _score(scores, task, i))
        for tasks in (update, acquire):
            task = _task(tasks, i)
            if task is not None:
                gained += max(0.0, _score(scores, task, i) - _score(scores, task, i - 1))
    return Fuar(forgotten=forgotten, gained=gained)


def single_phase_fuar(
    initial: Mapping[str, float],
    updated: Mapping[str, float],
    forget: str = "unchanged",
    update: str | None = "updated",
    acquire: str | None = "new",
) -> Fuar:
    """FUAR of one update (CKL Table 2): ``initial``/``updated`` map task names to scores.

    Defaults use this package's category names: ``unchanged`` (IL), ``updated`` (UL), ``new``
    (NL); pass ``acquire="new_easy"`` for NewLAMA-Easy, or None to leave a task out.
    """
    names = [t for t in (forget, update, acquire) if t is not None]
    scores = {t: [initial.get(t), updated.get(t)] for t in names}
    return fuar(scores, [forget], [None, update], [None, acquire])


def stability_plasticity_preprint(unchanged: float, updated: float, new: float) -> float:
    """TemporalWiki preprint Fig. 4: ``0.5·UNCHANGED + 0.25·UPDATED + 0.25·NEW``."""
    return 0.5 * unchanged + 0.25 * updated + 0.25 * new


def stability_plasticity_final(unchanged: float, changed: float) -> float:
    """TemporalWiki final Table 4 / Fig. 4: the mean of UNCHANGED and CHANGED."""
    return 0.5 * (unchanged + changed)
