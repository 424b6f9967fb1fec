"""One job of articles → encoded SSM examples and their tallies (the same for both runners).

Each article is cut into chunks (:mod:`.chunks`); all chunks of the job go through spaCy in one
``nlp.pipe`` call (:func:`~.pipeline.pipe_docs`) with a fixed ``batch_size``, so the batches
depend only on the job; each chunk's entities with a selected label are its salient spans;
:func:`~.masking.choose_spans` picks the groups to mask, seeded by
``{seed}/{article id}/{chunk index}``.

An example is a ``tf.train.Example`` with ``inputs`` and ``targets`` (UTF-8 text with sentinel
markers), ``id`` and ``title`` of the article, ``chunk`` (the chunk's index in the article,
so the source passage can be found again) and ``labels`` (the NER label of each masked span, in
sentinel order).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from tw_jax.io.tfrecord import encode_example
from tw_jax.preprocess.ssm.chunks import chunk_spans
from tw_jax.preprocess.ssm.masking import MAX_SPANS, SENTINEL_RE, Span, choose_spans, mask
from tw_jax.preprocess.ssm.reader import Article, Job, SsmOptionsError
from tw_jax.preprocess.ssm.stats import SsmTally
from tw_jax.text.spacy_pipeline import pipe_docs


@dataclass(frozen=True, slots=True)
class SsmOptions:
    """What decides the examples; recorded in ``stats.json``."""

    labels: tuple[str, ...] | None = None  # None: every label of the NER component
    spans_per_example: int = 1
    examples_per_chunk: int = 1  # 0: as many as the chunk's spans fill
    chunk_words: int = 200
    batch_size: int = 128  # spaCy's nlp.pipe batch size
    seed: int = 0

    def check(self) -> None:
        if not 1 <= self.spans_per_example <= MAX_SPANS:
            raise SsmOptionsError(f"spans per example must be 1 to {MAX_SPANS}")
        if self.examples_per_chunk < 0:
            raise SsmOptionsError("examples per chunk must be >= 0 (0: all)")
        if self.chunk_words < 1 or self.batch_size < 1:
            raise SsmOptionsError("chunk words and batch size must be >= 1")
        if self.labels is not None and not self.labels:
            raise SsmOptionsError("labels must name at least one NER label")

    def resolve_labels(self, available: Iterable[str]) -> tuple[str, ...]:
        """The salient labels: the chosen ones, each checked against the model's."""
        available = tuple(sorted(available))
        if self.labels is None:
            return available
        unknown = sorted(set(self.labels) - set(available))
        if unknown:
            raise SsmOptionsError(
                f"NER labels {', '.join(unknown)} are not produced by this spaCy pipeline; "
                f"it has {', '.join(available)}"
            )
        return tuple(sorted(set(self.labels)))

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["labels"] = None if self.labels is None else list(self.labels)
        return out


def _spans_of(doc: Any, text: str, labels: frozenset[str]) -> list[Span]:
    """The entities of ``doc`` (made from ``text``: ``doc.text`` would rebuild it token by token)
    with a salient label, with any edge whitespace trimmed."""
    spans = []
    for ent in doc.ents:
        if ent.label_ not in labels:
            continue
        start, end = ent.start_char, ent.end_char
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end:
            spans.append(Span(start, end, ent.label_))
    return spans


def _where(job: Job, article: Article, chunk: int | None = None) -> str:
    place = f"{job.name}.jsonl line {article.line}: id {article.id} ({article.title})"
    return place if chunk is None else f"{place} chunk {chunk}"


def process_job(
    nlp: Any, labels: frozenset[str], job: Job, options: SsmOptions
) -> tuple[list[bytes], SsmTally]:
    """The encoded examples of one job, in article and chunk order, and the job's tallies."""
    tally = SsmTally()
    max_chars = getattr(nlp, "max_length", 1_000_000)  # spaCy refuses longer texts
    pending: list[tuple[Article, int, str]] = []  # the chunks spaCy reads
    for article in job.articles:
        tally.counts["articles"] += 1
        spans = chunk_spans(article.text, options.chunk_words)
        if not spans:
            tally.article_skips.add("empty_text", _where(job, article))
        for index, (start, end) in enumerate(spans):
            text = article.text[start:end]
            tally.counts["chunks"] += 1
            tally.counts["words"] += len(text.split())
            tally.counts["chars"] += len(text)
            if SENTINEL_RE.search(text):
                tally.chunk_skips.add("sentinel_text", _where(job, article, index))
            elif len(text) > max_chars:
                tally.chunk_skips.add("too_long_for_spacy", _where(job, article, index))
            else:
                pending.append((article, index, text))
    docs = pipe_docs(nlp, (text for _, _, text in pending), options.batch_size)
    encoded: list[bytes] = []
    used_in: set[int] = set()  # line numbers of the articles with an example
    for (article, index, text), doc in zip(pending, docs, strict=True):
        salient = _spans_of(doc, text, labels)
        tally.entities.update(span.label for span in salient)
        if not salient:
            tally.chunk_skips.add("no_salient_span", _where(job, article, index))
            continue
        groups = choose_spans(
            salient,
            per_example=options.spans_per_example,
            examples=options.examples_per_chunk,
            key=f"{options.seed}/{article.id}/{index}",
        )
        for group in groups:
            inputs, targets = mask(text, group)
            encoded.append(
                encode_example(
                    {
                        "id": article.id,
                        "title": article.title,
                        "chunk": index,
                        "inputs": inputs,
                        "targets": targets,
                        "labels": [span.label for span in group],
                    }
                )
            )
            tally.masked.update(span.label for span in group)
        tally.counts["examples"] += len(groups)
        tally.chunks_used += 1
        used_in.add(article.line)
    for article in job.articles:
        if article.line in used_in:
            tally.articles_used += 1
        elif article.text.split():
            tally.article_skips.add("no_example", _where(job, article))
    return encoded, tally
