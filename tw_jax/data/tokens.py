"""Token ids with character offsets, and which tokens a character span covers.

Scoring "the object" or "the proper nouns" of a text means choosing subword tokens by where their
characters lie in the text. The vocabularies report character offsets (Unicode code points into
the original string): GPT-2's byte-level BPE and a model folder's ``tokenizer.json`` through
``tokenizers`` (``Encoding.offsets``), T5's
SentencePiece through ``encode_as_immutable_proto`` (each piece's ``begin``/``end``; a piece's
span includes the whitespace its ``▁`` stands for). A token belongs to a span when their
character ranges overlap, so tokenisation never has to line up with word boundaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Span = tuple[int, int]


def encode_with_offsets(vocabulary: Any, text: str) -> tuple[list[int], list[Span]]:
    """``(ids, [(start, end), ...])`` of ``text``, exactly the ids ``vocabulary.encode`` gives.

    ``vocabulary`` is a :class:`tw_jax.data.vocabularies.ByteLevelBPEVocabulary` (GPT-2), a
    model folder's :class:`tw_jax.data.hf_tokenizer.ModelTokenizerVocabulary` (both through
    ``tokenizers``' offsets) or a ``seqio.SentencePieceVocabulary`` (T5, sentinels included).
    """
    # Imported here: the model families import this module, and the vocabularies bring seqio
    # and TensorFlow, which a model on its own (a retriever's encoders, say) does not need.
    from tw_jax.data.vocabularies import TokenizersVocabulary

    if isinstance(vocabulary, TokenizersVocabulary):
        encoding = vocabulary.tokenizer.encode(text, add_special_tokens=False)
        return list(encoding.ids), [tuple(o) for o in encoding.offsets]
    processor = getattr(vocabulary, "tokenizer", None)
    if processor is None or not hasattr(processor, "encode_as_immutable_proto"):
        raise TypeError(
            f"{type(vocabulary).__name__}: need a GPT-2 byte-level BPE or a SentencePiece "
            "vocabulary to map tokens to characters"
        )
    pieces = processor.encode_as_immutable_proto(text).pieces
    return [p.id for p in pieces], [(p.begin, p.end) for p in pieces]


def prefix_id(vocabulary: Any) -> int:
    """What a causal LM's row starts with: the vocabulary's BOS, else its EOS standing for one
    (GPT-2, Qwen), as GPT-2's papers and lm-evaluation-harness (``prefix_token_id``) do."""
    bos = vocabulary.bos_id
    return int(vocabulary.eos_id if bos is None else bos)


def overlaps(token: Span, spans: Sequence[Span]) -> bool:
    """Whether the token's characters ``[start, end)`` meet any of ``spans``."""
    start, end = token
    return any(start < s_end and s_start < end for s_start, s_end in spans if s_start < s_end)


def span_mask(offsets: Sequence[Span], spans: Sequence[Span]) -> list[bool]:
    """One flag per token: True where the token overlaps one of ``spans`` (e.g. PROPN words)."""
    ordered = sorted(s for s in spans if s[0] < s[1])
    flags = []
    cursor = 0
    for start, end in offsets:
        # spans are sorted; skip those that end before this token starts (offsets ascend).
        while cursor < len(ordered) and ordered[cursor][1] <= start:
            cursor += 1
        hit = False
        for s_start, s_end in ordered[cursor:]:
            if s_start >= end:
                break
            if start < s_end:
                hit = True
                break
        flags.append(hit and end > start)
    return flags


def object_span(text: str, obj: str) -> Span | None:
    """Characters of the last occurrence of ``obj`` in ``text`` (the probe's object comes last),
    with the space before it: the word-boundary marker is part of the object's first token
    (GPT-2's ``Ġ``; SentencePiece may even make ``▁`` a piece of its own)."""
    at = text.rfind(obj)
    if at < 0 or not obj:
        return None
    return (at - 1 if at > 0 and text[at - 1].isspace() else at), at + len(obj)
