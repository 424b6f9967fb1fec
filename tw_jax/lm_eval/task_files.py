"""The pieces every exported lm-eval task folder is written with: YAML scalars, group configs,
document files (JSON lines) and atomic writes (:mod:`tw_jax.lm_eval.export`,
:mod:`tw_jax.lm_eval.siblings`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tw_jax.io.atomic import atomic_open


def scalar(value: object) -> str:
    """A YAML scalar: JSON strings and numbers are valid YAML."""
    return json.dumps(value, ensure_ascii=False)


def group_yaml(group: str, members: Iterable[str]) -> str:
    return "\n".join([f"group: {group}", "task:", *(f"  - {m}" for m in members),
                      "metadata:", "  version: 1.0", ""])


def write(path: str | Path, text: str) -> None:
    with atomic_open(str(path), "w", encoding="utf-8") as handle:
        handle.write(text)


def write_documents(path: str | Path, documents: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object a line, in order (what ``dataset_path: json`` reads)."""
    write(path, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents))


def dataset_lines(name: str, docs_path: str, output_type: str,
                  tags: Iterable[str] = ()) -> list[str]:
    """The head of a task config: its name, tags, local JSON documents and output type."""
    tags = list(tags)
    return [
        f"task: {name}",
        *([f"tag: [{', '.join(tags)}]"] if tags else []),
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {scalar(docs_path)}",
        "test_split: test",
        f"output_type: {output_type}",
    ]


def metric_lines(metrics: Iterable[tuple[str, str, bool]]) -> list[str]:
    """``metric_list`` of ``(metric, aggregation, higher_is_better)``."""
    lines = ["metric_list:"]
    for metric, aggregation, higher in metrics:
        lines += [f"  - metric: {metric}", f"    aggregation: {aggregation}",
                  f"    higher_is_better: {'true' if higher else 'false'}"]
    return lines
