"""Helpers shared by the evaluation tests (a module of its own: conftest is not importable)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# the columns of the probe CSVs the tests write (the tasks read these and ``text``)
PROBE_FIELDS = ["subject", "relation", "object", "previous_object", "cloze"]


def set_unigram(params: dict, log_probs_wanted: dict[int, float], vocab_size: int) -> tuple:
    """A copy of unigram params whose logits make the given tokens have (about) these log
    probabilities; returns (params, exact log_probs)."""
    u = np.full(vocab_size, -30.0)
    rest = 1.0 - sum(np.exp(v) for v in log_probs_wanted.values())
    assert rest > 0
    for token, value in log_probs_wanted.items():
        u[token] = value
    others = [i for i in range(vocab_size) if i not in log_probs_wanted]
    u[others] = np.log(rest / len(others))
    params = jax.tree.map(lambda x: x, params)
    params["wte"]["embedding"] = params["wte"]["embedding"].at[:, 0].set(
        jnp.asarray(u, jnp.float32))
    exact = u - np.log(np.exp(u).sum())
    return params, exact


def write_probe_stats(folder, counts: dict[str, int]) -> None:
    """The ``stats.json`` that ``tw-jax probes`` writes last beside its CSVs, recording each
    category's rows: readers of a probes folder check its files against it."""
    import json
    from pathlib import Path

    stats = {"categories": {c: {"final": n} for c, n in counts.items()}, "lighttuning": {}}
    (Path(folder) / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
