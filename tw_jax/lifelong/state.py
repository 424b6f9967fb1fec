"""The lifelong runner's resume bookkeeping: one JSON file per update,
``OUT/state/<method>/<trained_through>.json`` (``trained_through`` a period's name, or ``base``
for INITIAL), holding an :class:`UpdateState`: that the update finished training (its
``model_dir``, wall-clock seconds, steps) and which periods' metric groups were scored and
appended to ``results.jsonl``. It is rewritten atomically after the results it records.

A rerun skips what a state records, so it trains and appends nothing for finished periods. The
state records the metric groups scored per period, so a rerun asking for more groups
(``--metrics ppl,qa`` after ``ppl``) scores only the new ones, and a rerun with
``eval_matrix`` only adds the missing (checkpoint, period) scores. ``train_seconds`` counts the
training of the invocation that finished the update (time spent before an interruption is not
included).

The JSON keys are those every earlier version wrote (``model_dir``, ``evaluated``, ``groups``,
``trainer``, ``step``, …), so state files written before the type existed read unchanged; keys a
trainer adds of its own (T5X's ``t5x_checkpoint``) are kept in :attr:`UpdateState.extra`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.evaluate.results import Result
from tw_jax.io import paths
from tw_jax.io.atomic import write_json
from tw_jax.time import NO_MONTH, Period, TimeError, Trained

TW_JAX = "tw_jax"  # who trained an update whose state names no trainer (written before they were)
# The fields written only when set, in the order earlier versions wrote them.
_OPTIONAL = ("trainer", "task", "initial_checkpoint", "step", "resumed_from_step",
             "train_seconds", "compile_seconds", "train_tokens", "train_flops", "given", "reader",
             "retriever")


@dataclass(frozen=True)
class UpdateState:
    """One finished update of a lifelong run (see the module docstring). ``scored``: the metric
    groups appended to ``results.jsonl`` per evaluated period; ``seconds_recorded``: whether its
    training time is there too. ``given``: INITIAL taken as given (``--initial-checkpoint``);
    ``reader``/``retriever``: an open-book update (INITIAL reading what a retriever found)."""

    model_dir: str
    trainer: str | None = None
    task: str | None = None
    initial_checkpoint: str | None = None
    step: int | None = None
    resumed_from_step: int | None = None
    train_seconds: float | None = None
    compile_seconds: float | None = None
    # What the update cost: tokens trained (unmasked inputs and targets) and model FLOPs, over
    # all its steps (resumes included); None where the trainer did not count them.
    train_tokens: int | None = None
    train_flops: float | None = None
    given: bool | None = None
    reader: str | None = None
    retriever: str | None = None
    seconds_recorded: bool = False
    scored: Mapping[Period, tuple[str, ...]] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def trained_by(self) -> str:
        """Who trained it (states written before trainers were named: tw_jax)."""
        return self.trainer or TW_JAX

    def done_groups(self, period: Period) -> tuple[str, ...]:
        return tuple(self.scored.get(period, ()))

    def missing_groups(self, periods: Sequence[Period],
                       requested: Sequence[str]) -> dict[Period, list[str]]:
        """``{period: the requested groups not scored yet}`` of each of ``periods``."""
        return {p: [g for g in requested if g not in self.done_groups(p)] for p in periods}

    def with_scored(self, scored: Mapping[Period, Sequence[str]]) -> UpdateState:
        """This state once ``scored`` (``{period: groups}``) and its times are appended."""
        merged = dict(self.scored)
        for period, groups in scored.items():
            merged[period] = tuple(sorted(set(self.done_groups(period)) | set(groups)))
        return dataclasses.replace(self, scored=merged, seconds_recorded=True)

    def time_results(self, method: str, trained_through: Trained) -> list[Result]:
        """The update's ``train_seconds``, with its ``train_steps``, ``compile_seconds`` (the
        first step), ``train_tokens`` and ``train_flops`` where known, so the report can compare
        methods' cost apart from compilation and step counts."""
        times: dict[str, float] = {"train_seconds": float(self.train_seconds or 0.0)}
        if self.step is not None:
            times["train_steps"] = float(self.step - (self.resumed_from_step or 0))
        if self.compile_seconds is not None:
            times["compile_seconds"] = float(self.compile_seconds)
        if self.train_tokens is not None:
            times["train_tokens"] = float(self.train_tokens)
        if self.train_flops is not None:
            times["train_flops"] = float(self.train_flops)
        return [Result(method, trained_through, NO_MONTH, "all", metric, value)
                for metric, value in times.items()]

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"model_dir": self.model_dir}
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None or (name == "initial_checkpoint" and self.task is not None):
                record[name] = value
        record["seconds_recorded"] = self.seconds_recorded
        ordered = sorted(self.scored)
        record["evaluated"] = [p.name for p in ordered]
        if self.scored:
            record["groups"] = {p.name: list(self.scored[p]) for p in ordered}
        record.update(self.extra)
        return record

    @classmethod
    def from_json(cls, record: Mapping[str, Any], path: str) -> UpdateState:
        """A state from its JSON object; :class:`DumpError` naming ``path`` when it is none."""
        if not isinstance(record, Mapping) or not isinstance(record.get("evaluated"), list):
            raise DumpError(path, None, "not a lifelong state (no 'evaluated' list)")
        if not isinstance(record.get("model_dir"), str):
            raise DumpError(path, None, "not a lifelong state (no 'model_dir')")
        groups = record.get("groups", {})
        try:
            # a period evaluated before groups were recorded had its probe perplexity scored
            scored = {Period.parse(name): ("ppl",) for name in record["evaluated"]}
            scored.update({Period.parse(name): tuple(found) for name, found in groups.items()})
        except (TimeError, AttributeError, TypeError) as error:
            raise DumpError(path, None, f"a scored period is unreadable ({error})") from None
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in record.items() if k in known and k not in ("scored", "extra")}
        values.setdefault("seconds_recorded", True)  # states from before it was recorded
        extra = {k: v for k, v in record.items()
                 if k not in known and k not in ("evaluated", "groups")}
        return cls(**values, scored=scored, extra=extra)


def state_file(out_dir: str, method: str, trained_through: Trained) -> str:
    """Where a run in ``out_dir`` records one update (``OUT/state/<method>/<trained>.json``)."""
    return paths.join(out_dir, "state", method, f"{trained_through}.json")


def read_state(path: str) -> UpdateState | None:
    """An update's recorded state, None before it finished."""
    if not paths.exists(path):
        return None
    try:
        record = json.loads(paths.read_text(path))
    except json.JSONDecodeError as error:
        raise DumpError(path, None, f"not JSON ({error.msg}); delete it to redo") from None
    return UpdateState.from_json(record, path)


def write_state(path: str, state: UpdateState) -> None:
    write_json(path, state.to_json())
