"""Which file of a CKL release is which: the LAMA probe sets and the SSM corpora, and reading them.

CKL's released files (``invariantLAMA.csv``, ``updatedLAMA.csv``, ``newLAMA.csv``,
``newLAMA_easy*.csv`` with their ``*_answers.json``; ``recent_news*.csv``,
``wikipedia_pretrain*.csv``) may sit anywhere below a folder or zip, local or in a bucket
(:mod:`tw_jax.preprocess.dumps.released`). The tasks (:mod:`tw_jax.tasks.ckl`) and the phase builder
(:mod:`tw_jax.preprocess.ckl.phases`) both find and read them here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from tw_jax.errors import DumpError
from tw_jax.preprocess.ckl import release
from tw_jax.preprocess.dumps.released import PublishedFile, index_files


@dataclass(frozen=True)
class LamaSet:
    """One of CKL's probe sets: how its files are named and evaluated."""

    task: str
    pattern: re.Pattern[str]
    kind: str  # release.INVARIANT | UPDATED | NEW
    category: str  # results category (tw_jax.evaluate.results.CKL_CATEGORIES)
    lengths: tuple[int, int]  # CKL Appendix C: input / output length
    answer_files: tuple[str, ...]  # the release's answer JSON names, after <stem>_answers.json
    label: str  # the paper's name


LAMA_SETS: tuple[LamaSet, ...] = (
    LamaSet("ckl_invariant_lama", re.compile(r"^invariantLAMA()\.csv$"), release.INVARIANT,
            "unchanged", (25, 4), (), "InvariantLAMA"),
    LamaSet("ckl_updated_lama", re.compile(r"^updatedLAMA()\.csv$"), release.UPDATED,
            "updated", (50, 10), ("updatedlama_val_answers.json",), "UpdatedLAMA"),
    LamaSet("ckl_new_lama", re.compile(r"^newLAMA()\.csv$"), release.NEW, "new", (50, 10),
            ("recentlama_h_val_answers.json",), "NewLAMA"),
    LamaSet("ckl_new_lama_easy", re.compile(r"^newLAMA_easy(_\w+)?\.csv$"), release.NEW,
            "new_easy", (150, 10), ("newLAMA_easy_answers.json", "recentlama_val_answers.json"),
            "NewLAMA-Easy"),
)
SSM_CORPORA: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    ("ckl_recent_news", re.compile(r"^recent_news(_\w+)?\.csv$"), ("_full", "_small")),
    ("ckl_wikipedia_pretrain", re.compile(r"^wikipedia_pretrain(_\w+)?\.csv$"),
     ("_full", "_small", "")),
)


def lama_set(task: str) -> LamaSet:
    """The :class:`LamaSet` a task belongs to (``ckl_new_lama_easy_small`` → NewLAMA-Easy)."""
    for spec in sorted(LAMA_SETS, key=lambda s: -len(s.task)):
        if task == spec.task or task.startswith(spec.task + "_"):
            return spec
    raise KeyError(f"{task!r} is not a CKL probe task")


def find_files(root: str | os.PathLike[str]) -> dict[str, PublishedFile]:
    """Every file below ``root`` (folder or zip) by base name; a name found twice is an error
    (which of the two is meant cannot be told)."""
    found: dict[str, PublishedFile] = {}
    for file in index_files(root):
        name = file.path.name
        if name in found:
            raise DumpError(file.name, None, f"{name} is also at {found[name].name}; keep one")
        found[name] = file
    return found


def read_lama_set(files: Mapping[str, PublishedFile], name: str, spec: LamaSet
                  ) -> list[release.LamaRow]:
    """The rows of one LAMA CSV with their answers (see the module docstring)."""
    file = files[name]
    with file.open_text() as handle:
        rows = release.read_lama_csv(handle, file.name, spec.kind)
    stem = name[: -len(".csv")]
    for answers_name in (f"{stem}_answers.json", *spec.answer_files):
        if answers_name in files:
            answers_file = files[answers_name]
            with answers_file.open_text() as handle:
                answers = release.read_answers_json(handle, answers_file.name,
                                                    updated=spec.kind == release.UPDATED)
            return release.join_answers(rows, file.name, answers, answers_file.name)
    return release.join_answers(rows, file.name)


def ssm_pairs(file: PublishedFile) -> Iterator[tuple[str, str]]:
    with file.open_text() as handle:
        yield from release.iter_ssm_pairs(handle, file.name)


def count_ssm_examples(file: PublishedFile) -> int:
    """Examples in one pass over an SSM corpus (what ``--epochs`` turns into steps)."""
    return sum(1 for _ in ssm_pairs(file))


def corpus_files(files: Mapping[str, PublishedFile]) -> dict[str, PublishedFile]:
    """SSM task name → file, the main corpora's unsuffixed aliases included."""
    out: dict[str, PublishedFile] = {}
    for base, pattern, preferred in SSM_CORPORA:
        by_suffix = {m.group(1) or "": f for n, f in files.items() if (m := pattern.match(n))}
        for suffix, file in sorted(by_suffix.items()):
            out[f"{base}{suffix.lower()}_ssm"] = file
        main = next((by_suffix[s] for s in preferred if s in by_suffix), None)
        if main is None and len(by_suffix) == 1:
            main = next(iter(by_suffix.values()))
        if main is not None:
            out[f"{base}_ssm"] = main
    return out


def lama_files(files: Mapping[str, PublishedFile]) -> dict[str, tuple[str, LamaSet]]:
    """Probe task name → (file name, its set)."""
    out: dict[str, tuple[str, LamaSet]] = {}
    for name in sorted(files):
        for spec in LAMA_SETS:
            if match := spec.pattern.match(name):
                out[spec.task + (match.group(1) or "").lower()] = (name, spec)
    return out
