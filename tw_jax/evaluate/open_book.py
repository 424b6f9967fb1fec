"""Open-book QA inputs: each question with the passages retrieved for it, as the reader reads them.

EvolvingQA's retrieval baseline, Kim et al. 2023, Section 3.1 (DPR): "The retrieved contexts are
used as context in open-book question answering." The paper says neither how the question and
the contexts are joined, nor how many passages the reader gets, nor its input length; what this
module does instead, and why:

- Format. ``question: {question} title: {title_1} context: {text_1} title: {title_2} context:
  {text_2} …``, passages best first: the per-passage ``title:``/``context:`` prefixes of
  Fusion-in-Decoder (Izacard & Grave, 2021), one T5 reader's usual open-book input, joined into
  one input because one encoder reads them all. A passage without a title has no ``title:``
  part. Whitespace runs in questions, titles and texts become single spaces (the encoder sees
  them so anyway), so the words of the input are the words of its parts.
- Length. The input fits ``max_tokens`` tokens as the reader counts them
  (:func:`token_counter`: the model's own prompt ids, for T5 the SentencePiece pieces and EOS).
  The question is never cut: the passages part is cut at a word boundary from its END, keeping
  the longest run of its first words that fits, so the lowest-ranked passages go first and the
  best one is kept longest. A question too long on its own goes in whole without context
  (``over_budget``: T5's relative attention reads any length, so nothing is lost but the
  context). Both tokenisers split on whitespace before they merge, so adding a word never
  shortens the encoding and a binary search over the word count finds that longest run.
- Defaults. ``k`` = :data:`DEFAULT_K` passages, the depth of ``tw-jax evolvingqa retrieve``'s
  middle recall figure (answer recall@5); :data:`DEFAULT_INPUT_LENGTH` = 512 tokens, T5's
  pre-training input length. The build's passages are up to 200 words (``--chunk-words``), some
  250-300 T5 tokens of English, so 512 tokens hold the question and about two passages whole
  and a larger ``k`` mostly adds text that is cut.

:func:`retrieve` searches a month's index (:mod:`tw_jax.retrieval.index`, the one
``tw-jax evolvingqa retrieve`` builds) and :func:`reader_inputs` builds a set's inputs;
:func:`figures` reports, per set, answer recall@k of the retrieved passages (DPR's top-k
retrieval accuracy, :mod:`tw_jax.retrieval.recall`) and ``answer_in_input``, the same
test on the context the reader actually reads after truncation: the EM of an oracle reader that
copies the right span, what reading can reach (a reader may still guess an answer it was not
shown).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tw_jax.models import model_for
from tw_jax.retrieval.base import Passage
from tw_jax.retrieval.index import MonthIndex
from tw_jax.retrieval.recall import KS, first_hit, has_answer
from tw_jax.retrieval.run import SCORED, search_sets

DEFAULT_K = 5
DEFAULT_INPUT_LENGTH = 512
INITIAL_READER = "initial"

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class ReaderInput:
    """What the reader reads for one question, and what it was made of."""

    text: str  # the whole input: question, then the kept context
    context: str  # the kept passages part ("" when none fits)
    passage_ids: tuple[str, ...]  # retrieved, best first (all of them, kept or cut)
    scores: tuple[float, ...]
    context_words: int  # words of the passages part kept
    total_words: int  # words of the passages part before truncation
    tokens: int  # length of ``text`` as counted (0 when no counter was given)
    over_budget: bool = False  # the question alone is longer than the budget

    @property
    def truncated(self) -> bool:
        return self.context_words < self.total_words


def _words(text: str) -> list[str]:
    return text.split()


def question_part(question: str) -> str:
    """``question: {question}`` (whitespace runs as single spaces)."""
    return " ".join(["question:", *_words(question)])


def context_word_list(passages: Sequence[Passage]) -> list[str]:
    """The words of ``title: T context: P`` for each passage in order (no title: no ``title:``)."""
    words: list[str] = []
    for passage in passages:
        title = _words(passage.title)
        if title:
            words += ["title:", *title]
        words += ["context:", *_words(passage.text)]
    return words


def _join(head: str, words: Sequence[str]) -> str:
    return " ".join([head, *words])


def open_book_input(
    question: str, passages: Sequence[Passage], *, scores: Sequence[float] = (),
    count_tokens: TokenCounter | None = None, max_tokens: int | None = None,
) -> ReaderInput:
    """The reader's input for ``question`` and its passages (best first), cut to ``max_tokens``
    tokens as ``count_tokens`` counts them (None for either: no cut); see the module docstring."""
    if scores and len(scores) != len(passages):
        raise ValueError(f"{len(scores)} scores for {len(passages)} passages")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    head, words = question_part(question), context_word_list(passages)
    kept, over = len(words), False
    if (count_tokens is not None and max_tokens is not None
            and count_tokens(_join(head, words)) > max_tokens):
        # The largest n with count(head + words[:n]) <= max_tokens; a word is >= 1 token.
        low, high = 0, min(len(words), max_tokens)
        if count_tokens(head) > max_tokens:
            high, over = 0, True
        while low < high:
            middle = (low + high + 1) // 2
            if count_tokens(_join(head, words[:middle])) <= max_tokens:
                low = middle
            else:
                high = middle - 1
        kept = low
    text = _join(head, words[:kept])
    return ReaderInput(
        text=text, context=" ".join(words[:kept]),
        passage_ids=tuple(p.id for p in passages), scores=tuple(float(s) for s in scores),
        context_words=kept, total_words=len(words),
        tokens=count_tokens(text) if count_tokens is not None else 0, over_budget=over,
    )


def token_counter(model: Any, vocabulary: Any) -> TokenCounter:
    """Tokens of a text as the model reads it as a prompt (T5: the pieces and EOS)."""
    family = model_for(model)
    return lambda text: len(family.prompt_ids(vocabulary, text))


def input_budget(model: Any, input_length: int, max_new_tokens: int) -> int:
    """``input_length``, less what the model needs for the answer within its positions (its
    :meth:`~tw_jax.models.base.BaseModel.prompt_budget`: a decoder-only model's prompt and
    answer share one row of at most ``n_positions`` tokens)."""
    input_length = model_for(model).prompt_budget(input_length, max_new_tokens)
    if input_length < 1:
        raise ValueError(f"no room for an input: length {input_length} after the answer's "
                         f"{max_new_tokens} tokens")
    return input_length


@dataclass(frozen=True)
class Retrieved:
    """One set's questions and, per question, its top-k passages and their scores."""

    name: str
    rows: list[dict[str, str]]
    passages: list[list[Passage]]
    scores: list[list[float]]
    seconds: float


def retrieve(index: MonthIndex, sets: Mapping[str, Sequence[dict[str, str]]],
             k: int) -> dict[str, Retrieved]:
    """Every set's top ``k`` passages in the month's index (positions → passages), searched as
    deep as ``retrieve`` searches (at least 20), so both keep the same ``k`` passages even where
    scores tie."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    found = {}
    for done in search_sets(index, sets, max(k, *KS)):
        found[done.name] = Retrieved(
            done.name, done.rows,
            [[index.passages[i] for i, _ in hits[:k]] for hits in done.hits],
            [[s for _, s in hits[:k]] for hits in done.hits], done.seconds)
    return found


def reader_inputs(retrieved: Retrieved, *, count_tokens: TokenCounter | None,
                  max_tokens: int | None) -> list[ReaderInput]:
    """The reader's input for each question of one set (see :func:`open_book_input`)."""
    return [open_book_input(row["question"], passages, scores=scores,
                            count_tokens=count_tokens, max_tokens=max_tokens)
            for row, passages, scores in zip(retrieved.rows, retrieved.passages,
                                             retrieved.scores, strict=True)]


def _rate(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def figures(retrieved: Mapping[str, Retrieved], inputs: Mapping[str, Sequence[ReaderInput]],
            k: int) -> dict[str, dict[str, Any]]:
    """Per reported set (``unchanged``, ``new``, ``edited_updated``, ``edited_outdated``, as
    ``retrieve`` reports them): ``answer_recall@k`` of the k retrieved passages,
    ``answer_in_input`` (the answer in the context the reader reads: an oracle reader's EM),
    the share of inputs ``truncated``, and the number of questions."""
    out: dict[str, dict[str, Any]] = {}
    for reported, (name, column) in SCORED.items():
        if name not in retrieved:
            continue
        done, given = retrieved[name], inputs[name]
        answers = [row[column] for row in done.rows]
        hits = [first_hit([p.text for p in passages], [answer])
                for passages, answer in zip(done.passages, answers, strict=True)]
        out[reported] = {
            f"answer_recall@{k}": _rate([h is not None for h in hits]),
            "answer_in_input": _rate([has_answer(i.context, [a])
                                      for i, a in zip(given, answers, strict=True)]),
            "truncated": _rate([i.truncated for i in given]),
            "questions": len(done.rows),
        }
    return out


def result_method(retriever: str, reader: str = INITIAL_READER) -> str:
    """The results' method name of an open-book run: the retriever's name (``bm25``, ``dpr``:
    EvolvingQA Table 1's row "DPR") when the reader is the initial QA model, else
    ``<reader>-<retriever>`` (``full-bm25``: the continually trained reader with retrieval), so
    each reader's open-book row stands beside its closed-book row in ``tw-jax report``."""
    return retriever if reader == INITIAL_READER else f"{reader}-{retriever}"


def prediction_rows(rows: Sequence[Mapping[str, str]],
                    inputs: Sequence[ReaderInput]) -> list[dict[str, Any]]:
    """Each row with what the reader was given: passage ids, scores, the input text."""
    return [{**row, "passage_ids": list(i.passage_ids), "scores": [round(s, 6) for s in i.scores],
             "input": i.text} for row, i in zip(rows, inputs, strict=True)]
