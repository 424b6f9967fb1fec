"""The lifelong runner's resume bookkeeping: one JSON file per update,
``OUT/state/<method>/<trained_through>.json``, saying that the update finished training (its
``model_dir``, wall-clock seconds, steps) and which months' metric groups were scored and
appended to ``results.jsonl``; it is rewritten atomically after the results it records.

A rerun skips what a state records, so it trains and appends nothing for finished months. The
state records the metric groups scored per month, so a rerun asking for more groups
(``--metrics ppl,qa`` after ``ppl``) scores only the new ones, and a rerun with
``eval_matrix`` only adds the missing (checkpoint, month) scores. ``train_seconds`` counts the
training of the invocation that finished the update (time spent before an interruption is not
included).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.atomic import write_json


def state_file(out_dir: str, method: str, trained_through: str) -> str:
    """Where a run in ``out_dir`` records one update (``OUT/state/<method>/<trained>.json``)."""
    return paths.join(out_dir, "state", method, f"{trained_through}.json")


def read_state(path: str) -> dict[str, Any] | None:
    """An update's recorded state (its ``model_dir`` among them), None before it finished."""
    if not paths.exists(path):
        return None
    try:
        state = json.loads(paths.read_text(path))
    except json.JSONDecodeError as error:
        raise DumpError(path, None, f"not JSON ({error.msg}); delete it to redo") from None
    if not isinstance(state, dict) or not isinstance(state.get("evaluated"), list):
        raise DumpError(path, None, "not a lifelong state (no 'evaluated' list)")
    return state


def done_groups(state: Mapping[str, Any], month: str) -> list[str]:
    """Metric groups already scored for ``month`` (a month evaluated before groups were
    recorded had its probe perplexity scored)."""
    if month in state.get("groups", {}):
        return list(state["groups"][month])
    return ["ppl"] if month in state["evaluated"] else []


def missing_groups(state: Mapping[str, Any], months: Sequence[str],
                   requested: Sequence[str]) -> dict[str, list[str]]:
    """``{month: the requested groups not scored yet}`` of each of ``months``."""
    return {m: [g for g in requested if g not in done_groups(state, m)] for m in months}


def mark_scored(state_path: str, state: dict[str, Any],
                scored: Mapping[str, Sequence[str]]) -> None:
    """Record that ``scored`` (``{month: groups}``) are appended and the update's times too,
    then rewrite the state file."""
    done = state.setdefault("groups", {})
    for month, groups in scored.items():
        done[month] = sorted(set(done_groups(state, month)) | set(groups))
    state["evaluated"] = sorted(set(state["evaluated"]) | set(scored))
    state["seconds_recorded"] = True
    write_json(state_path, state)
