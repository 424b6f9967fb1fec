"""Per-probe perplexity scores kept beside ``results.jsonl``, so the report can test a
difference to INITIAL probe by probe (:mod:`tw_jax.evaluate.noise`).

A category's perplexity is the mean of per-probe perplexities ``exp(-ll_i / tokens_i)``
(:func:`tw_jax.tasks.metrics.perplexity`): from each probe's summed log-likelihood and scored
token count, in seqio's example order (the CSV's row order), the table's number is recomputed
exactly, and two models' values pair up probe by probe. Each probe also carries a key (a hash
of its subject, relation, object and previous object), so values are paired only when both
models scored the same probes in the same order.

One file per scored checkpoint and evaluated month,
``OUT/per_probe/<method>/<trained_through>/<eval_month>.npz``, with three arrays per
(metric, category): ``<metric>.<category>.key`` (int64), ``.log_likelihood`` and ``.tokens``
(float64). A rerun that scores more groups adds its arrays to the file; a file is rewritten
whole and atomically (local or in a bucket). Runs written before these files existed have none:
their perplexity cells are simply not tested.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tw_jax.errors import DumpError
from tw_jax.evaluate.results import Result, results_path
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.tasks.metrics import instance_perplexities, mean_perplexity
from tw_jax.time import Evaluated, Trained

FOLDER = "per_probe"
FIELDS = ("key", "log_likelihood", "tokens")
KEY_FIELDS = ("subject", "relation", "object", "previous_object")
# The probe perplexities whose per-probe scores a lifelong run keeps.
PERPLEXITY_METRICS: tuple[str, ...] = ("ppl", "ppl_object", "ppl_cloze", "lt_ppl")


@dataclass(frozen=True)
class ProbeScores:
    """One category's probes as one model scored them, in seqio's example order."""

    key: np.ndarray  # int64: which probe (probe_keys)
    log_likelihood: np.ndarray  # float64: summed over the probe's scored tokens
    tokens: np.ndarray  # float64: scored tokens

    def __post_init__(self) -> None:
        sizes = {len(self.key), len(self.log_likelihood), len(self.tokens)}
        if len(sizes) != 1:
            raise ValueError(f"per-probe arrays of different lengths {sorted(sizes)}")

    def __len__(self) -> int:
        return len(self.key)

    def perplexities(self) -> np.ndarray:
        """Each probe's perplexity, ``exp(-ll_i / tokens_i)``."""
        return instance_perplexities(self.log_likelihood, self.tokens)

    def mean(self) -> float:
        """The category's perplexity, exactly as the probe task's metric computes it."""
        return mean_perplexity(self.perplexities())

    def pairs_with(self, other: ProbeScores) -> bool:
        """Whether both hold the same probes in the same order."""
        return len(self) == len(other) and bool(np.array_equal(self.key, other.key))


# (category, metric) -> its probes' scores
PerProbe = dict[tuple[str, str], ProbeScores]


def probe_keys(rows: Sequence[Mapping[str, str]]) -> np.ndarray:
    """An int64 key per probe row: the first 8 bytes of BLAKE2b over its fact fields."""
    keys = [int.from_bytes(hashlib.blake2b(
        "\x1f".join(str(row.get(f, "")) for f in KEY_FIELDS).encode(), digest_size=8).digest(),
        "little", signed=True) for row in rows]
    return np.asarray(keys, np.int64).reshape(-1)


def per_probe_path(out_dir: str | os.PathLike[str], method: str, trained_through: Trained,
                   eval_month: Evaluated) -> str:
    """``OUT/per_probe/<method>/<trained_through>/<eval_month>.npz`` (the periods' names)."""
    return paths.join(os.fspath(out_dir), FOLDER, method, str(trained_through),
                      f"{eval_month}.npz")


def read_file(path: str) -> PerProbe:
    """The scores one file holds (``{}`` when there is none)."""
    if not paths.isfile(path):
        return {}
    try:
        with np.load(io.BytesIO(paths.read_bytes(path))) as stored:
            arrays = {name: stored[name] for name in stored.files}
    except (ValueError, OSError) as error:
        raise DumpError(path, None, f"not a per-probe .npz file ({error})") from None
    scores: PerProbe = {}
    for name in arrays:
        metric, category, field = (name.split(".") + ["", ""])[:3]
        if field != "key":
            continue
        try:
            scores[(category, metric)] = ProbeScores(
                *(np.asarray(arrays[f"{metric}.{category}.{f}"],
                             np.int64 if f == "key" else np.float64) for f in FIELDS))
        except (KeyError, ValueError) as error:
            raise DumpError(path, f"{metric}.{category}", f"incomplete arrays ({error})") from None
    return scores


def write_file(path: str, scores: Mapping[tuple[str, str], ProbeScores]) -> None:
    """Add ``scores`` to the file at ``path`` (replacing the same (category, metric)), atomically."""
    merged = {**read_file(path), **scores}
    arrays = {f"{metric}.{category}.{f}": getattr(s, f)
              for (category, metric), s in sorted(merged.items()) for f in FIELDS}
    data = io.BytesIO()  # np.savez seeks; an object being uploaded cannot
    np.savez(data, **arrays)
    with atomic_open(path, "wb") as handle:
        handle.write(data.getvalue())


# (method, trained_through, eval_month, category, metric) -> scores, like Result.key
ProbeIndex = dict[tuple[str, Trained, Evaluated, str, str], ProbeScores]


def read_runs(run_dirs: Iterable[str | os.PathLike[str]], results: Iterable[Result]) -> ProbeIndex:
    """Every per-probe score the runs kept for the probe perplexities of ``results`` (read
    from the same folders); a later run's file replaces an earlier one's scores, as its results
    do. A run folder may be given as its ``results.jsonl``."""
    wanted = sorted({(r.method, r.trained_through, r.eval_month) for r in results
                     if r.metric in PERPLEXITY_METRICS})
    index: ProbeIndex = {}
    for run in run_dirs:
        folder = paths.parent(str(results_path(run)))
        for method, trained, month in wanted:
            found = read_file(per_probe_path(folder, method, trained, month))
            index.update({(method, trained, month, category, metric): s
                          for (category, metric), s in found.items()})
    return index
