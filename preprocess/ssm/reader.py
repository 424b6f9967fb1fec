"""Reading a DiffSet folder's JSON lines and cutting them into jobs.

A job is a run of consecutive articles of one input holding about ``job_chars`` characters:
the unit a worker process (local) or a DoFn call (Beam) turns into examples. Jobs are cut from
the file contents alone, so both runners see the same jobs, spaCy sees the same batches, and
the outputs are byte for byte the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

import orjson

from tw_jax.errors import DumpError
from tw_jax.io import paths

INPUTS = ("diffset", "full")  # the DiffSet folder's files this stage can read
JOB_CHARS = 100_000  # about 80 chunks of 200 words: amortises process round trips


class SsmOptionsError(ValueError):
    """An option of the SSM stage that cannot work (unknown input or label, bad count)."""


class Article(NamedTuple):
    line: int  # 1-based line number in the input file
    id: int
    title: str
    text: str


class Job(NamedTuple):
    name: str  # the input: "diffset" or "full"
    index: int  # position among the input's jobs
    path: str
    articles: list[Article]


def input_path(diffset_dir: str | os.PathLike[str], name: str) -> str:
    if name not in INPUTS:
        raise SsmOptionsError(f"unknown SSM input {name!r}; choose from {', '.join(INPUTS)}")
    return paths.join(diffset_dir, f"{name}.jsonl")


_FIELDS = (("id", int, "an integer"), ("title", str, "a string"), ("text", str, "a string"))


def _check_record(record: object, path: str, where: str) -> None:
    if not isinstance(record, dict):
        raise DumpError(path, where, f"expected a JSON object, got {type(record).__name__}")
    for field, kind, described in _FIELDS:
        if field not in record:
            raise DumpError(path, where, f"missing field {field!r}")
        if type(record[field]) is not kind:  # bool is not an id
            got = type(record[field]).__name__
            raise DumpError(path, where, f"field {field!r} must be {described}, got {got}")


def iter_articles(path: str) -> Iterator[Article]:
    """The records of a DiffSet JSON-lines file; a bad line is a :class:`DumpError` naming it."""
    with paths.open_file(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"line {number}"
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                raise DumpError(path, where, f"not a JSON line: {error}") from None
            _check_record(record, path, where)
            yield Article(number, record["id"], record["title"], record["text"])


def iter_jobs(name: str, path: str, job_chars: int = JOB_CHARS) -> Iterator[Job]:
    articles: list[Article] = []
    size = index = 0
    for article in iter_articles(path):
        articles.append(article)
        size += len(article.text)
        if size >= job_chars:
            yield Job(name, index, path, articles)
            articles, size, index = [], 0, index + 1
    if articles:
        yield Job(name, index, path, articles)
