"""EvolvingQA evaluation: EM/F1 of greedy answers and the Edited multiple-choice setting.

For one checkpoint (QA fine-tuned, as the paper evaluates) and one time step:

- Unchanged and New: the question is the input, greedy decoding answers
  (:func:`tw_jax.evaluate.qa.decode_answers`), EM and F1 after SQuAD normalisation
  (:func:`tw_jax.evaluate.qa.qa_scores`; the paper lower-cases and strips punctuation, SQuAD also
  drops articles, as the reference code's ``exact_match_score`` does).
- Edited: the same answers scored against the updated answer (``answer2``: Table 1's "Updated")
  and against the outdated one (``answer1``: "Outdated"); and Appendix D's rank classification:
  both answers scored by teacher forcing as the target of the question (plain text, the format
  QA fine-tuning taught; the reference scored them along the model's own greedy path), the
  higher summed log-likelihood wins; a tie goes to the outdated answer (as the reference's
  ``>=``). Pairs whose two answers normalise to the same text are left out of the ranking.

Open book (the paper's DPR row, :mod:`tw_jax.evaluate.open_book`): ``inputs=`` gives the reader
each question followed by its retrieved passages instead of the question alone; decoding and the
ranking both read that text, everything else is the same. Without ``inputs`` (closed book)
nothing changes.

Results (:mod:`tw_jax.evaluate.results`) map EvolvingQA's sets onto the schema's categories:
Unchanged → ``unchanged``, New → ``new``, Edited → ``updated``, with metrics ``em``/``f1``
(updated answer), ``em_previous``/``f1_previous`` (outdated answer), ``rank_acc`` (% of pairs
where the updated answer ranks first by summed log-likelihood; Table 5's "Updated", whose
"Outdated" is 100 minus it) and ``rank_acc_norm`` (the same by mean log-likelihood per token).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import flax.linen as nn
import numpy as np

from tw_jax.evaluate.qa import decode_answers, qa_scores
from tw_jax.evaluate.rank import RankItem, RankResult
from tw_jax.evaluate.results import Result, write_prediction_rows
from tw_jax.evaluate.set_scores import SetScores
from tw_jax.models import model_for
from tw_jax.text.answers import normalize_answer

UNCHANGED, NEW, EDITED = "unchanged", "new", "edited"
SETS: tuple[str, ...] = (UNCHANGED, NEW, EDITED)
CATEGORY: dict[str, str] = {UNCHANGED: "unchanged", NEW: "new", EDITED: "updated"}
MAX_ANSWER_TOKENS = 25  # the reference's output length


def qa_rank_items(rows: Sequence[Mapping[str, str]],
                  prompts: Sequence[str] | None = None) -> list[RankItem]:
    """Updated (gold) against outdated answer for each Edited row whose answers differ, given
    its question (or its prompt in ``prompts``: the open-book input)."""
    prompts = _prompts(rows, prompts)
    return [
        RankItem(prompt, (row["answer2"], row["answer1"]), gold=0)
        for row, prompt in zip(rows, prompts, strict=True)
        if normalize_answer(row["answer1"]) != normalize_answer(row["answer2"])
    ]


def _prompts(rows: Sequence[Mapping[str, str]], prompts: Sequence[str] | None) -> list[str]:
    """The reader's input per row: its question (closed book) or the given prompt."""
    if prompts is None:
        return [row["question"] for row in rows]
    if len(prompts) != len(rows):
        raise ValueError(f"{len(prompts)} inputs for {len(rows)} questions")
    return list(prompts)


def qa_rank_classify(
    model: nn.Module, params: Any, vocabulary: Any, items: Sequence[RankItem], *,
    batch_size: int = 32,
) -> RankResult:
    """Teacher-forced scores of every candidate as the answer to its question.

    An encoder-decoder (T5) reads the question and scores the candidate as its target (EOS after
    it, not scored); a decoder-only model (GPT-2) scores the candidate's tokens after
    ``question + " "``.
    """
    model = model_for(model)
    examples, owners = [], []
    for index, item in enumerate(items):
        for candidate in item.candidates:
            examples.append(model.span_example(vocabulary, item.prompt, candidate, separator=" "))
            owners.append(index)
    if not examples:
        return RankResult(summed=[], mean=[], golds=[])
    scores = model.score(params, examples, batch_size=batch_size)
    if np.any(scores.num_tokens == 0):
        raise ValueError("a candidate answer has no tokens to score")
    owners_arr = np.asarray(owners)
    summed, mean = scores.log_likelihood, scores.mean_log_likelihood()
    return RankResult(
        summed=[summed[owners_arr == i] for i in range(len(items))],
        mean=[mean[owners_arr == i] for i in range(len(items))],
        golds=[item.gold for item in items],
    )


def score_set(
    model: nn.Module, params: Any, vocabulary: Any, name: str,
    rows: Sequence[Mapping[str, str]], *, max_new_tokens: int = MAX_ANSWER_TOKENS,
    batch_size: int = 32, inputs: Sequence[str] | None = None,
) -> SetScores:
    """EM/F1 (and for Edited the outdated-answer scores and the ranking) of one set's rows.

    The reader reads each row's question, or with ``inputs`` the text given for it (open book,
    :mod:`tw_jax.evaluate.open_book`); decoding and the ranking read the same text."""
    if name not in SETS:
        raise ValueError(f"unknown EvolvingQA set {name!r}; known: {', '.join(SETS)}")
    prompts = _prompts(rows, inputs)
    scores = SetScores(name, CATEGORY[name], len(rows))
    if not rows:
        return scores
    scores.predictions = decode_answers(
        model, params, vocabulary, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size,
    )
    if name == EDITED:
        scores.values = qa_scores(scores.predictions, [[r["answer2"]] for r in rows],
                                  [[r["answer1"]] for r in rows])
        items = qa_rank_items(rows, prompts)
        scores.ranked = len(items)
        if items:
            ranking = qa_rank_classify(model, params, vocabulary, items, batch_size=batch_size)
            scores.values["rank_acc"] = ranking.accuracy
            scores.values["rank_acc_norm"] = ranking.accuracy_normalised
    else:
        scores.values = qa_scores(scores.predictions, [[r["answer"]] for r in rows])
    return scores


def to_results(method: str, trained_through: str, eval_month: str,
               sets: Sequence[SetScores]) -> list[Result]:
    """Results lines for :func:`~tw_jax.evaluate.results.append_results` (see the docstring)."""
    return [r for s in sets for r in s.results(method, trained_through, eval_month)]


def write_predictions(folder: str | os.PathLike[str], scores: SetScores,
                      rows: Sequence[Mapping[str, str]]) -> str:
    """``folder/<set>.jsonl``: question, answers and prediction per row (error analysis)."""

    return write_prediction_rows(folder, scores.name, rows, scores.predictions)


def format_table(sets: Sequence[SetScores]) -> str:
    """The paper's Table 1 rows (Unchanged, New, Outdated, Updated) and Table 5's split."""
    lines = [f"{'set':<10} {'n':>6} {'EM':>7} {'F1':>7}"]
    by_name = {s.name: s for s in sets}
    rows: list[tuple[str, SetScores | None, str]] = [
        ("Unchanged", by_name.get(UNCHANGED), ""), ("New", by_name.get(NEW), ""),
        ("Outdated", by_name.get(EDITED), "_previous"), ("Updated", by_name.get(EDITED), ""),
    ]
    for label, scores, suffix in rows:
        if scores is None:
            continue
        em, f1 = scores.values.get("em" + suffix), scores.values.get("f1" + suffix)
        shown = [f"{v:7.2f}" if v is not None else f"{'-':>7}" for v in (em, f1)]
        lines.append(f"{label:<10} {scores.rows:>6} {shown[0]} {shown[1]}")
    edited = by_name.get(EDITED)
    if edited is not None and "rank_acc" in edited.values:
        summed, mean = edited.values["rank_acc"], edited.values["rank_acc_norm"]
        lines.append(
            f"multiple choice ({edited.ranked} Edited pairs): updated {summed:.2f}% / outdated "
            f"{100 - summed:.2f}% (summed log-likelihood); updated {mean:.2f}% / outdated "
            f"{100 - mean:.2f}% (per token)"
        )
    return "\n".join(lines)
