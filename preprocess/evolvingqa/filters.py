"""The checks a generated question must pass (paper §2.2 and Appendix A.2.2-A.2.3).

Deterministic checks run first and cost nothing: the answer must occur in its passage (the
prompt demands an answer from the passage's entities; an answer found nowhere in the passage is
made up) and an Edited pair's two answers must differ after SQuAD normalisation. The paper's LLM
checks then ask the same endpoint (:mod:`.prompts`): is the answer correct given the context
(A.2.3, "(B) False" drops it) and, for Edited pairs, are the outdated and updated answers the
same thing written differently (A.2.2, "(A) True" drops it). A verdict that is neither A nor B
drops the question too: nothing unverified enters the benchmark.
"""

from __future__ import annotations

from tw_jax.text.answers import normalize_answer

KEPT = "kept"
NO_ENTITIES = "no_entities"
UNPARSEABLE = "unparseable"
NO_FACTUAL_UPDATE = "no_factual_update"
NOT_IN_PASSAGE = "answer_not_in_passage"
SAME_ANSWER = "same_answer"
LLM_EQUIVALENT = "llm_equivalent"
LLM_HALLUCINATION = "llm_hallucination"
UNCLEAR_VERDICT = "unclear_verdict"
REASONS = (KEPT, NO_ENTITIES, UNPARSEABLE, NO_FACTUAL_UPDATE, NOT_IN_PASSAGE, SAME_ANSWER,
           LLM_EQUIVALENT, LLM_HALLUCINATION, UNCLEAR_VERDICT)


def in_passage(answer: str, passage: str) -> bool:
    """Whether ``answer`` occurs in ``passage`` as whole words, after SQuAD normalisation."""
    wanted = normalize_answer(answer)
    return bool(wanted) and f" {wanted} " in f" {normalize_answer(passage)} "


def same_answer(first: str, second: str) -> bool:
    return normalize_answer(first) == normalize_answer(second)


def hallucination_verdict(choice: str | None) -> str:
    """A.2.3: keep on (A) True."""
    if choice == "A":
        return KEPT
    return LLM_HALLUCINATION if choice == "B" else UNCLEAR_VERDICT


def equivalence_verdict(choice: str | None) -> str:
    """A.2.2: keep on (B) False (the two answers differ)."""
    if choice == "B":
        return KEPT
    return LLM_EQUIVALENT if choice == "A" else UNCLEAR_VERDICT
