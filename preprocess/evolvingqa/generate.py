"""QA generation with an LLM behind an OpenAI-compatible endpoint (paper §2.2, Appendix A.2).

Reads the build's passages (:mod:`.layout`: ``evolvingqa/unchanged.jsonl``,
``<MMMM>/evolvingqa/{new,edited}.jsonl``), asks the endpoint for one question per passage (one
question and two answers per Edited pair) with the paper's prompts (:mod:`.prompts`), drops what
the filters reject (:mod:`.filters`), and writes the QA sets (:mod:`.qa_csv`). Requests run on
``concurrency`` threads, in input order; with a cache file an interrupted run resumes for free
(:class:`~.client.ChatClient`). ``generate.json`` counts every passage under the reason it was
kept or dropped. The build folder and the QA folder may be local or ``gs://`` URLs.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any

from tw_jax.io import jsonl, paths
from tw_jax.preprocess.evolvingqa import filters, layout, prompts
from tw_jax.preprocess.evolvingqa.client import ChatClient
from tw_jax.preprocess.evolvingqa.qa_csv import PAPER_FINETUNE_FRACTION, QA, write_qa_sets
from tw_jax.preprocess.runners.accounting import require_complete
from tw_jax.time import period_named

Outcome = tuple[QA | None, str]


def _names(entities: list[dict[str, str]]) -> list[str]:
    return [e["text"] for e in entities]


class Generator:
    """One passage (or Edited pair) → (QA or None, reason), through ``client``."""

    def __init__(self, client: ChatClient, *, llm_filters: bool = True) -> None:
        self.client = client
        self.llm_filters = llm_filters

    def _verified(self, title: str, context: str, question: str, answer: str) -> str:
        if not self.llm_filters:
            return filters.KEPT
        reply = self.client.complete(prompts.verification_messages(title, context, question,
                                                                   answer))
        return filters.hallucination_verdict(prompts.parse_choice(reply))

    def passage(self, record: dict[str, Any]) -> Outcome:
        """Unchanged and New passages: ``question,answer``."""
        entities = _names(record.get("entities", []))
        if not entities:
            return None, filters.NO_ENTITIES
        month = layout.month_name(record["month"])
        reply = self.client.complete(
            prompts.passage_messages(record["title"], month, record["text"], entities))
        parsed = prompts.parse_reply(reply, two_answers=False)
        if parsed is None:
            return None, filters.UNPARSEABLE
        if not filters.in_passage(parsed.answer, record["text"]):
            return None, filters.NOT_IN_PASSAGE
        verdict = self._verified(record["title"], record["text"], parsed.question, parsed.answer)
        if verdict != filters.KEPT:
            return None, verdict
        return QA(parsed.question, parsed.answer, source=record["id"]), filters.KEPT

    def edited(self, record: dict[str, Any]) -> Outcome:
        """Edited pairs: ``question,answer1,answer2`` (outdated, updated), or "no factual update"."""
        old_entities, new_entities = _names(record["old_entities"]), _names(record["new_entities"])
        if not old_entities or not new_entities:
            return None, filters.NO_ENTITIES
        old_month = layout.month_name(record["old_month"])
        new_month = layout.month_name(record["new_month"])
        reply = self.client.complete(prompts.edited_messages(
            record["title"], old_month, new_month, record["old_text"], record["new_text"],
            old_entities, new_entities))
        if prompts.says_no_factual_update(reply):
            return None, filters.NO_FACTUAL_UPDATE
        parsed = prompts.parse_reply(reply, two_answers=True)
        if parsed is None or parsed.answer2 is None:
            return None, filters.UNPARSEABLE
        if not (filters.in_passage(parsed.answer, record["old_text"])
                and filters.in_passage(parsed.answer2, record["new_text"])):
            return None, filters.NOT_IN_PASSAGE
        if filters.same_answer(parsed.answer, parsed.answer2):
            return None, filters.SAME_ANSWER
        if self.llm_filters:
            verdict = filters.equivalence_verdict(prompts.parse_choice(self.client.complete(
                prompts.equivalence_messages(parsed.answer, parsed.answer2))))
            if verdict != filters.KEPT:
                return None, verdict
        for context, answer in ((record["old_text"], parsed.answer),
                                (record["new_text"], parsed.answer2)):
            verdict = self._verified(record["title"], context, parsed.question, answer)
            if verdict != filters.KEPT:
                return None, verdict
        return QA(parsed.question, parsed.answer, parsed.answer2, record["id"]), filters.KEPT


def _run(records: Iterable[dict[str, Any]], work: Callable[[dict[str, Any]], Outcome],
         concurrency: int, tally: Counter) -> list[QA]:
    """``work`` over ``records`` on ``concurrency`` threads, results in input order; records are
    read a window at a time, so a file of 200K passages is never all in flight."""
    kept: list[QA] = []
    window = max(64, 16 * concurrency)
    records = iter(records)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        while batch := list(islice(records, window)):
            for qa, reason in pool.map(work, batch):
                tally[reason] += 1
                if qa is not None:
                    kept.append(qa)
    return kept


def pairs_with_passages(data: str | os.PathLike[str]) -> list[str]:
    """The month pairs of a build folder that have an extraction folder, in order (complete or
    not: :func:`generate_with_llm` refuses an incomplete one rather than leave its pair out)."""
    if not paths.isdir(data):
        return []
    found = [name for name in paths.listdir(data)
             if layout.is_pair(name) and paths.isdir(layout.extraction_dir(data, name))]
    return sorted(found, key=period_named)


def finished_pairs(data: str) -> list[str]:
    """:func:`pairs_with_passages`, once the window's folder and every pair's extraction folder
    are finished: the build writes each folder's stats.json last, and without it the folder's
    passages are cut short (an error naming the build command)."""
    pairs = pairs_with_passages(data)
    for folder in (layout.window_dir(data), *(layout.extraction_dir(data, p) for p in pairs)):
        require_complete(folder, "tw-jax evolvingqa build")
    return pairs


PASSAGE_FIELDS = ("id", "title", "month", "text", "entities")
EDITED_FIELDS = ("id", "title", "old_month", "new_month", "old_text", "new_text",
                 "old_entities", "new_entities")


def _limited(path: str, limit: int | None, fields: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    return islice(jsonl.records(path, fields), limit)


def generate_with_llm(
    data: str | os.PathLike[str],
    client: ChatClient,
    *,
    qa_dir: str | os.PathLike[str] | None = None,
    llm_filters: bool = True,
    limit: int | None = None,
    concurrency: int = 1,
    finetune_fraction: float = PAPER_FINETUNE_FRACTION,
    seed: int = 0,
) -> dict[str, Any]:
    """Generates every QA set of a build folder; returns the ``generate.json`` contents.

    ``limit`` caps the passages read from each file (a trial run before paying for all).
    """
    data = os.fspath(data)
    unchanged_path = paths.join(layout.window_dir(data), layout.UNCHANGED_PASSAGES)
    if not paths.exists(unchanged_path):
        from tw_jax.errors import DumpError

        raise DumpError(unchanged_path, None, "no such file; run `tw-jax evolvingqa build`")
    pairs = finished_pairs(data)
    generator = Generator(client, llm_filters=llm_filters)
    reasons: dict[str, Counter] = {"unchanged": Counter()}
    unchanged = _run(_limited(unchanged_path, limit, PASSAGE_FIELDS), generator.passage, concurrency,
                     reasons["unchanged"])
    new: dict[str, list[QA]] = {}
    edited: dict[str, list[QA]] = {}
    for pair in pairs:
        folder = layout.extraction_dir(data, pair)
        reasons[f"new_{pair}"], reasons[f"edited_{pair}"] = Counter(), Counter()
        new[pair] = _run(_limited(paths.join(folder, layout.NEW_PASSAGES), limit, PASSAGE_FIELDS),
                         generator.passage, concurrency, reasons[f"new_{pair}"])
        edited[pair] = _run(_limited(paths.join(folder, layout.EDITED_PAIRS), limit, EDITED_FIELDS),
                            generator.edited, concurrency, reasons[f"edited_{pair}"])
    details = {
        "generator": "llm", "endpoint": client.url, "model": client.model,
        "llm_filters": llm_filters, "requests": client.requests,
        "reasons": {name: dict(sorted(c.items())) for name, c in reasons.items()},
    }
    target = os.fspath(qa_dir) if qa_dir is not None else layout.qa_dir(data)
    return write_qa_sets(target, unchanged, new, edited, finetune_fraction=finetune_fraction,
                         seed=seed, details=details)
