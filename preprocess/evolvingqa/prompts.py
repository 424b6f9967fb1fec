"""The chat prompts of EvolvingQA's construction pipeline (paper Appendix A.2) and their replies.

- :func:`edited_messages` — A.2.1, word for word: the system message with the two snapshots'
  months, the one-shot "Alaska" demonstration (user, assistant) and the query ("Document of … in
  {month}: '…'" / "Entities from … in {month}: [a, b]."). The reply is either ``no factual
  update`` or ``Question: … / Answer1: … / Answer2: …``.
- :func:`passage_messages` — Unchanged and New questions. The paper gives no text for them, only
  that the answer must be one of the passage's entities (§2.2); this prompt is A.2.1's with one
  document and one answer, and the same demonstration's March half.
- :func:`equivalence_messages` — A.2.2: are the outdated and updated answers the same thing
  written differently ("(A) True" drops the pair).
- :func:`verification_messages` — A.2.3, after Kadavath et al.: is the proposed answer correct
  given the context ("(B) False" drops the question).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Message = dict[str, str]

NO_FACTUAL_UPDATE = "no factual update"

EDITED_SYSTEM = (
    "You are a helpful assistant and will be provided with two documents that are parts of "
    "Wikipedia articles of the same topic but written in {old} and {new}. First, decide whether "
    "these two documents include any factual update. If there is no factual update, simply "
    'write "no factual update" and do not write anything else. If there is any factual update '
    "between the two, then create ONE short question and TWO answers that the answer for "
    "{old_month} and the answer for {new_month} are different. The answer for the created pair "
    "MUST be selected from one of the entities from the given list."
)
PASSAGE_SYSTEM = (
    "You are a helpful assistant and will be provided with a document that is part of a "
    "Wikipedia article written in {month}. Create ONE short question about a fact that the "
    "document states, and its answer. The answer MUST be selected from one of the entities "
    "from the given list."
)
# The one-shot demonstration of Appendix A.2.1.
DEMO_TITLE = "Alaska"
DEMO_OLD = "If it was an independent nation would be the 16th largest country in the world, larger than Iran."
DEMO_NEW = "If it was an independent nation would be the 17th largest country in the world, larger than Iran."
DEMO_OLD_ENTITIES = ("16th", "Iran")
DEMO_NEW_ENTITIES = ("17th", "Iran")
DEMO_QUESTION = "What is the ranking of Alaska if it was an independent nation?"


def _document(title: str, month: str, text: str, entities: list[str] | tuple[str, ...]) -> str:
    return (
        f"Document of \"{title}\" in {month}: '{text}'\n"
        f"Entities from \"{title}\" in {month}: [{', '.join(entities)}]."
    )


def edited_messages(title: str, old_month: str, new_month: str, old_text: str, new_text: str,
                    old_entities: list[str], new_entities: list[str]) -> list[Message]:
    """A.2.1 for one revised passage; months are display names such as ``August 2021``."""
    system = EDITED_SYSTEM.format(old=old_month, new=new_month, old_month=old_month.split()[0],
                                  new_month=new_month.split()[0])
    demo_user = "\n".join([
        _document(DEMO_TITLE, old_month, DEMO_OLD, DEMO_OLD_ENTITIES),
        _document(DEMO_TITLE, new_month, DEMO_NEW, DEMO_NEW_ENTITIES),
    ])
    demo_reply = f"Question: {DEMO_QUESTION}\nAnswer1: 16th\nAnswer2: 17th"
    query = "\n".join([
        _document(title, old_month, old_text, old_entities),
        _document(title, new_month, new_text, new_entities),
    ])
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": demo_user},
        {"role": "assistant", "content": demo_reply},
        {"role": "user", "content": query},
    ]


def passage_messages(title: str, month: str, text: str, entities: list[str]) -> list[Message]:
    """One question and answer from an Unchanged or New passage."""
    return [
        {"role": "system", "content": PASSAGE_SYSTEM.format(month=month)},
        {"role": "user", "content": _document(DEMO_TITLE, month, DEMO_NEW, DEMO_NEW_ENTITIES)},
        {"role": "assistant", "content": f"Question: {DEMO_QUESTION}\nAnswer: 17th"},
        {"role": "user", "content": _document(title, month, text, entities)},
    ]


def equivalence_messages(first: str, second: str) -> list[Message]:
    """A.2.2: "(A) True" means the two answers are the same and the pair is no update."""
    return [{"role": "user", "content": (
        f"Are '{first}' and '{second}' semantically equivalent or meaning the same?\n"
        "Options:\n(A) True\n(B) False\nAnswer:"
    )}]


def verification_messages(title: str, context: str, question: str, answer: str) -> list[Message]:
    """A.2.3: "(B) False" means the answer is not supported by the context (hallucinated)."""
    return [{"role": "user", "content": (
        f"Context of '{title}': {context}\nQuestion: {question}\nProposed Answer: {answer}\n"
        "Given the context, is the proposed answer:\n(A) True\n(B) False\n"
        "The proposed answer is:"
    )}]


# --- replies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Generated:
    """A parsed reply: a question and one answer (``answer2`` None) or two (outdated, updated)."""

    question: str
    answer: str
    answer2: str | None = None


_FIELD = re.compile(r"^\s*(question|answer1|answer2|answer)\s*:\s*(.*?)\s*$", re.IGNORECASE | re.M)
_QUOTES = "\"'`“”‘’"


def _clean(value: str) -> str:
    return value.strip().strip(_QUOTES).strip()


def says_no_factual_update(reply: str) -> bool:
    return NO_FACTUAL_UPDATE in " ".join(reply.lower().split())


def parse_reply(reply: str, *, two_answers: bool) -> Generated | None:
    """The question and answer(s) of a reply; None when a field is missing or empty.

    An answer's surrounding quotes are removed (the scoring normalises punctuation anyway).
    """
    fields: dict[str, str] = {}
    for match in _FIELD.finditer(reply):
        fields.setdefault(match.group(1).lower(), match.group(2))
    question = fields.get("question", "").strip()
    if two_answers:
        first, second = _clean(fields.get("answer1", "")), _clean(fields.get("answer2", ""))
        return Generated(question, first, second) if question and first and second else None
    answer = _clean(fields.get("answer", fields.get("answer1", "")))
    return Generated(question, answer) if question and answer else None


_CHOICE = re.compile(r"\(\s*([AB])\s*\)|^\s*([AB])\b|\b(true|false)\b", re.IGNORECASE)


def parse_choice(reply: str) -> str | None:
    """``"A"`` or ``"B"`` from a multiple-choice reply ("(A) True", "B", "False"), else None."""
    match = _CHOICE.search(reply)
    if match is None:
        return None
    letter, bare, word = match.groups()
    if letter or bare:
        return (letter or bare).upper()
    return "A" if word.lower() == "true" else "B"
