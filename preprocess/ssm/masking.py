"""Salient span masking in T5 sentinel format, and its inverse.

Format (T5 span corruption, as in ECBD's ``answer_str``): the masked spans of a chunk, in text
order, are replaced by ``<extra_id_0>``, ``<extra_id_1>``, ... in ``inputs``; ``targets`` lists
them after their sentinels and ends with the next sentinel, which marks where the last span
stops::

    inputs  = "Cien Bordling (born <extra_id_0>) is a Varnholtian politician ..."
    targets = "<extra_id_0> 12 September 1985 <extra_id_1>"

Both stay text: the T5 SentencePiece vocabulary (seqio, ``extra_ids=100``) encodes the markers
to the sentinel ids, so the SeqIO task only tokenizes. With 100 sentinels an example masks at
most 99 spans. :func:`unmask` puts the spans back, giving the chunk exactly (tests rely on it;
decoders can use :func:`target_spans` to read predictions).

Which entities are masked is chosen by a :class:`random.Random` seeded with a string naming the
article and chunk (string seeds are hashed with SHA-512, the same in every process and on every
platform), so outputs do not depend on worker count or runner.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

SENTINELS = 100  # T5's extra_ids
MAX_SPANS = SENTINELS - 1  # targets close with one more sentinel
SENTINEL_RE = re.compile(r"<extra_id_(\d+)>")


def sentinel(i: int) -> str:
    return f"<extra_id_{i}>"


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """A salient span of a chunk: characters ``[start, end)`` and its NER label."""

    start: int
    end: int
    label: str


def mask(chunk: str, spans: Sequence[Span]) -> tuple[str, str]:
    """(inputs, targets) for ``chunk`` with ``spans`` masked."""
    ordered = sorted(spans)
    if not 1 <= len(ordered) <= MAX_SPANS:
        raise ValueError(f"an example masks 1 to {MAX_SPANS} spans, got {len(ordered)}")
    inputs: list[str] = []
    targets: list[str] = []
    cursor = 0
    for i, span in enumerate(ordered):
        if span.start < cursor or span.end <= span.start or span.end > len(chunk):
            raise ValueError(f"span {span} overlaps another or lies outside the chunk")
        inputs += (chunk[cursor : span.start], sentinel(i))
        targets += (sentinel(i), " ", chunk[span.start : span.end], " ")
        cursor = span.end
    inputs.append(chunk[cursor:])
    targets.append(sentinel(len(ordered)))
    return "".join(inputs), "".join(targets)


def target_spans(targets: str) -> list[str]:
    """The spans of a ``targets`` string, in sentinel order."""
    parts = SENTINEL_RE.split(targets)
    # ['', '0', ' span0 ', '1', ' span1 ', ..., 'n', '']
    ids = [int(p) for p in parts[1::2]]
    fillers = parts[2::2]
    if parts[0] or not ids or ids != list(range(len(ids))) or fillers[-1]:
        raise ValueError(f"not a sentinel target: {targets!r}")
    spans = []
    for filler in fillers[:-1]:
        if len(filler) < 3 or filler[0] != " " or filler[-1] != " ":
            raise ValueError(f"not a sentinel target: {targets!r}")
        spans.append(filler[1:-1])
    return spans


def restore(inputs: str, targets: str) -> tuple[str, list[tuple[int, int]]]:
    """The chunk an example was made from (``inputs`` with each sentinel replaced by its span)
    and the ``(start, end)`` of each masked span in it, in sentinel order."""
    spans = target_spans(targets)
    parts = SENTINEL_RE.split(inputs)
    ids = [int(p) for p in parts[1::2]]
    if ids != list(range(len(spans))):
        raise ValueError(f"inputs hold sentinels {ids}, targets {len(spans)} spans")
    out = [parts[0]]
    offsets = []
    cursor = len(parts[0])
    for span, text in zip(spans, parts[2::2], strict=True):
        offsets.append((cursor, cursor + len(span)))
        out += (span, text)
        cursor += len(span) + len(text)
    return "".join(out), offsets


def unmask(inputs: str, targets: str) -> str:
    """The chunk an example was made from."""
    return restore(inputs, targets)[0]


def choose_spans(
    spans: Sequence[Span], *, per_example: int, examples: int, key: str
) -> list[list[Span]]:
    """Groups of spans to mask, one group per example.

    The spans are shuffled (seeded by ``key``) and cut into groups of ``per_example``; the
    first ``examples`` groups are returned (all of them when ``examples`` is 0), so with
    ``examples=0`` every salient span of the chunk is masked in exactly one example.
    """
    if not 1 <= per_example <= MAX_SPANS:
        raise ValueError(f"per_example must be 1 to {MAX_SPANS}, got {per_example}")
    order = list(spans)
    random.Random(key).shuffle(order)
    groups = [sorted(order[i : i + per_example]) for i in range(0, len(order), per_example)]
    return groups[:examples] if examples else groups
