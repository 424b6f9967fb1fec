"""CKL's phases, scored: every checkpoint the lifelong runner left for a folder laid out by
``tw-jax ckl phases`` on every phase's probe sets (``tw-jax ckl eval-phases``).

It reads the lifelong runner's folder (its state files name each update's MODEL_DIR), so it
stands above the runner; what is recorded where is :func:`tw_jax.evaluate.ckl.scored_here`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.evaluate.ckl import (
    evaluate_task,
    loaded_model,
    read_manifest,
    results_of,
    scored_here,
    task_examples,
)
from tw_jax.evaluate.results import BASE, Result, append_results
from tw_jax.evaluate.runs import ModelSource
from tw_jax.evaluate.set_scores import SetScores
from tw_jax.io import paths
from tw_jax.lifelong.runner import INITIAL, default_initial_gin_files, method_name
from tw_jax.lifelong.state import read_state, state_file
from tw_jax.tasks.ckl import register_ckl
from tw_jax.tasks.vocab import t5_path


@dataclass
class PhasesOptions:
    """``tw-jax ckl eval-phases``: the runner's output folder, the data folder, its gin files."""

    data_dir: str
    lifelong_dir: str
    gin_files: list[str]
    gin_bindings: list[str] = field(default_factory=list)
    gin_search_paths: list[str] = field(default_factory=list)
    method: str | None = None
    initial_gin_files: list[str] | None = None
    t5_vocab: str | None = None
    beam_size: int = 1
    batch_size: int = 32
    limit: int | None = None


def _checkpoint(out: str, method: str, trained_through: str) -> str:
    path = state_file(out, method, trained_through)
    state = read_state(path)
    if state is None:
        raise DumpError(path, None, f"no {method} checkpoint through {trained_through} "
                        "(run tw-jax lifelong on the phases folder first)")
    return state.model_dir


def evaluate_phases(options: PhasesOptions) -> list[Result]:
    """Scores INITIAL and each phase's checkpoint of one lifelong run on every phase's sets,
    appended to ``LIFELONG_DIR/results.jsonl``; returns the results."""

    manifest = read_manifest(options.data_dir)
    pairs = [phase["pair"] for phase in manifest["phases"]]
    out = os.fspath(options.lifelong_dir)
    method = method_name(options.gin_files, options.method)
    initial_files = options.initial_gin_files or default_initial_gin_files(options.gin_files)
    models = [(0, INITIAL, BASE, initial_files)]
    models += [(k, method, pair, options.gin_files) for k, pair in enumerate(pairs, start=1)]
    vocab = t5_path(options.data_dir, options.t5_vocab)
    read: dict[tuple[str, str], list[dict[str, Any]]] = {}  # the same for every model
    everything: list[Result] = []
    for k, name, trained, files in models:
        source = ModelSource(model_dir=_checkpoint(out, name, trained), gin_files=list(files),
                             gin_bindings=options.gin_bindings,
                             gin_search_paths=options.gin_search_paths)
        results: list[Result] = []
        invariant: SetScores | None = None  # InvariantLAMA is one file in every phase
        with loaded_model(source) as loaded:
            for i, phase in enumerate(manifest["phases"], start=1):
                register_ckl(paths.join(options.data_dir, phase["pair"], "ckl"), vocab,
                             group="ckl_phases")
                for category, task in sorted(phase["sets"].items()):
                    if task is None or not scored_here(k, i, category):
                        continue
                    if category == "unchanged" and invariant is not None:
                        results += results_of([invariant], name, trained, phase["pair"])
                        continue
                    key = (phase["pair"], task)
                    if key not in read:
                        read[key] = task_examples(task, options.limit)
                    scored = evaluate_task(loaded.module, loaded.params, task,
                                           category=category, beam_size=options.beam_size,
                                           batch_size=options.batch_size, examples=read[key])
                    if category == "unchanged":
                        invariant = scored
                    if scored is not None:
                        results += results_of([scored], name, trained, phase["pair"])
        append_results(out, results)
        everything += results
    return everything
