"""A TemporalWiki month's snapshot as passages to retrieve from: the open book of the probes.

For month pair ``MMMM`` the snapshot is the DiffSet stage's ``DATA/MMMM/diffset/full.jsonl``:
every article of the new month's Wikipedia, one ``{id, title, text}`` object a line
(:mod:`tw_jax.preprocess.diffset.outputs`). The folder must be complete (its ``stats.json``,
written last, is there: :func:`~tw_jax.preprocess.runners.accounting.require_complete`), or the
error names it. Each article is cut into passages of at most ``chunk_words`` whitespace-separated
words by the chunker the SSM stage and EvolvingQA's passages use
(:func:`tw_jax.preprocess.ssm.chunks.chunk_spans`): paragraph by paragraph, whole sentences
packed greedily, only a sentence longer than ``chunk_words`` cut between words. A passage is
``<article id>/<chunk number>`` (from 0), titled with the article's title (BM25 indexes title
and text, so a probe's subject finds every chunk of its article).

The index lives in ``DATA/MMMM/probes_context/index/<retriever name>/`` and is built, stored,
reused and rebuilt by :func:`tw_jax.retrieval.index.source_index`, exactly as
EvolvingQA's: its fingerprint covers ``full.jsonl`` (size and SHA-256, its content whatever its
modification time), the retriever's settings and model, and ``chunk_words``; a change of any is
one warning line naming it and a rebuild.
"""

from __future__ import annotations

from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import jsonl, paths
from tw_jax.preprocess.runners.accounting import require_complete
from tw_jax.preprocess.ssm.chunks import chunk_spans
from tw_jax.retrieval.base import Passage
from tw_jax.retrieval.index import INDEX, PassageSource

DIFFSET = "diffset"
FULL = "full.jsonl"
CONTEXT_DIR = "probes_context"
DEFAULT_CHUNK_WORDS = 100
# Names the chunking rule in the fingerprint: a different rule must rebuild the index.
CHUNKER = "ssm_sentences"
_STAGE = "tw-jax diffset"


def snapshot_file(data: str, month: str) -> str:
    """``DATA/MMMM/diffset/full.jsonl``, checked: the DiffSet folder complete, the file there."""
    folder = paths.join(data, month, DIFFSET)
    require_complete(folder, _STAGE)
    path = paths.join(folder, FULL)
    if not paths.isfile(path):
        raise DumpError(path, None, f"missing (run {_STAGE})")
    return path


def article_passages(article_id: str, title: str, text: str, chunk_words: int) -> list[Passage]:
    """One article's passages, in text order (none for an article without words)."""
    return [Passage(f"{article_id}/{number}", title, text[start:end])
            for number, (start, end) in enumerate(chunk_spans(text, chunk_words))]


def read_snapshot(path: str, chunk_words: int) -> list[Passage]:
    """Every article of ``full.jsonl`` cut into passages, in file order; a record whose title or
    text is not a string, or whose id repeats, is a :class:`DumpError` naming the record."""
    found: list[Passage] = []
    seen: dict[str, int] = {}
    for number, record in enumerate(jsonl.records(path, ("id", "title", "text")), start=1):
        title, text = record["title"], record["text"]
        if not isinstance(text, str) or not isinstance(title, str):
            raise DumpError(path, f"record {number}", "title and text must be strings")
        article = str(record["id"])
        if article in seen:
            raise DumpError(path, f"record {number}",
                            f"id {article!r} repeats (first in record {seen[article]})")
        seen[article] = number
        found += article_passages(article, title, text, chunk_words)
    return found


def snapshot_source(data: str, month: str, *,
                    chunk_words: int = DEFAULT_CHUNK_WORDS) -> PassageSource:
    """The passages of month ``month``'s snapshot and where their index is stored."""
    if chunk_words < 1:
        raise ValueError(f"chunk_words must be at least 1, got {chunk_words}")
    path = snapshot_file(data, month)
    settings: dict[str, Any] = {"chunker": CHUNKER, "chunk_words": chunk_words}
    return PassageSource(month, paths.join(data, month, CONTEXT_DIR, INDEX), {"full": path},
                         lambda: read_snapshot(path, chunk_words), settings)
