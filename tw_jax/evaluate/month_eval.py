"""Every zero-shot measurement of one checkpoint on one month's evaluation data.

The lifelong runner asks for *metric groups*; each group turns into one or more result metrics
of :mod:`tw_jax.evaluate.results`:

=============  ==============================================  ====================================
group          result metrics                                  categories
=============  ==============================================  ====================================
``ppl``        ``ppl`` (probe text; T5: object given prompt)   unchanged, updated, new, deleted,
``ppl_object`` ``ppl_object``                                  changed (= UPDATED + NEW rows
``ppl_cloze``  ``ppl_cloze``                                   pooled, so its mean is exact)
``qa``         ``em``, ``f1``; ``em_previous``/``f1_previous``  same; the ``_previous`` pair only
               on rows with a previous object                  where rows have previous objects
``rank``       ``rank_acc``, ``rank_acc_norm``: new object vs  categories with previous objects
               previous one(s) by teacher-forced likelihood    (UPDATED)
``propn``      ``propn_ppl_diffset``, ``propn_ppl_nondiff``    ``diffset``, ``nondiff``
=============  ==============================================  ====================================

Probe rows come from ``DATA/<MMMM>/probes/<category>.csv``; proper-noun perplexity from the
month's DiffSet (``diffset.jsonl``) and NON-DiffSet (``unchanged.jsonl``) articles cut into
``propn_instances`` blocks of ``propn_length`` tokens (:mod:`tw_jax.evaluate.propn`). Tagging a
corpus with spaCy costs far more than scoring it, so :class:`BlockCache` tags each (month,
corpus) once per vocabulary and keeps the sampled blocks in its folder (local or in a bucket,
beside the run's results) for every later checkpoint and rerun. The data folder may be local or
in a bucket too: every file here is read through :mod:`tw_jax.io.paths`. A category without rows
is skipped and named; nothing is silently dropped.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tw_jax.errors import DumpError
from tw_jax.evaluate import propn
from tw_jax.evaluate.groups import GROUPS, PPL_VARIANTS
from tw_jax.evaluate.perplexity import mean_perplexity, probe_perplexities
from tw_jax.evaluate.propn import propn_perplexity
from tw_jax.evaluate.qa import PROTOCOLS, previous_answers, probe_answers, qa_scores
from tw_jax.evaluate.rank import probe_rank_items, rank_classify
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.io.progress import progress
from tw_jax.models import model_for
from tw_jax.preprocess.probes.probe_csv import read_probe_csv

CATEGORIES: tuple[str, ...] = ("unchanged", "updated", "new", "deleted")
CHANGED = "changed"
CHANGED_PARTS: tuple[str, ...] = ("updated", "new")
# propn corpus (results category) -> the DiffSet stage's JSONL file holding it
PROPN_CORPORA: dict[str, str] = {"diffset": "diffset.jsonl", "nondiff": "unchanged.jsonl"}

Values = dict[tuple[str, str], float]


@dataclass(frozen=True)
class EvalSettings:
    """How to measure: which groups, batch sizes, decoding and the proper-noun sample."""

    groups: tuple[str, ...] = ("ppl",)
    batch_size: int = 32
    max_probes: int | None = None
    max_new_tokens: int = 10
    beam_size: int = 1
    qa_protocol: str | None = None  # tw_jax.evaluate.qa.PROTOCOLS; None: the model's default
    propn_instances: int = 10_000
    propn_length: int = 512
    propn_seed: int = 0
    spacy_model: str = "en_core_web_sm"

    def __post_init__(self) -> None:
        unknown = [g for g in self.groups if g not in GROUPS]
        if unknown:
            raise ValueError(f"unknown metric(s) {unknown}; known: {', '.join(GROUPS)}")
        if self.max_probes is not None and self.max_probes < 1:
            raise ValueError(f"max_probes must be positive, got {self.max_probes}")
        if self.qa_protocol is not None and self.qa_protocol not in PROTOCOLS:
            raise ValueError(f"unknown QA protocol {self.qa_protocol!r}; known: "
                             f"{', '.join(PROTOCOLS)}")
        if self.propn_instances < 1 or self.propn_length < 2:
            raise ValueError("propn needs at least 1 instance of at least 2 tokens")


def read_probes(data_dir: str, month: str, category: str, limit: int | None = None) -> list[dict]:
    """Rows of ``DATA/<month>/probes/<category>.csv`` (the first ``limit`` when given)."""

    path = paths.join(data_dir, month, "probes", f"{category}.csv")
    if not paths.exists(path):
        raise DumpError(path, None, f"no {category} probes for {month} (run tw-jax probes)")
    rows = read_probe_csv(path)
    return rows[:limit] if limit is not None else rows


def _with_changed(per_category: Mapping[str, list]) -> dict[str, list]:
    """The categories plus ``changed``: UPDATED then NEW items (when either has any)."""
    out = dict(per_category)
    pooled = [x for c in CHANGED_PARTS for x in per_category.get(c, [])]
    if pooled:
        out[CHANGED] = pooled
    return out


def _perplexities(module: Any, params: Any, vocabulary: Any, rows: Mapping[str, list],
                  group: str, settings: EvalSettings, bar: Any) -> Values:
    per_row = {}
    for c, r in rows.items():
        if r:
            per_row[c] = list(probe_perplexities(module, params, vocabulary, r,
                                                 PPL_VARIANTS[group],
                                                 batch_size=settings.batch_size))
            bar.update(len(r))
    return {(c, group): mean_perplexity(v) for c, v in _with_changed(per_row).items()}


def _qa(module: Any, params: Any, vocabulary: Any, rows: Mapping[str, list],
        settings: EvalSettings, bar: Any) -> Values:
    predicted = {}
    for category, category_rows in rows.items():
        if category_rows:
            answers = probe_answers(module, params, vocabulary, category_rows,
                                    protocol=settings.qa_protocol,
                                    max_new_tokens=settings.max_new_tokens,
                                    beam_size=settings.beam_size,
                                    batch_size=settings.batch_size)
            predicted[category] = list(zip(category_rows, answers, strict=True))
            bar.update(len(category_rows))
    values: Values = {}
    for category, pairs in _with_changed(predicted).items():
        scores = qa_scores([p for _, p in pairs], [[r["object"]] for r, _ in pairs],
                           [previous_answers(r) for r, _ in pairs])
        values.update({(category, metric): value for metric, value in scores.items()})
    return values


def _rank(module: Any, params: Any, vocabulary: Any, rows: Mapping[str, list],
          settings: EvalSettings, bar: Any) -> Values:
    sentinel = model_for(module).fills_sentinel_spans
    values: Values = {}
    for category, category_rows in rows.items():
        items = probe_rank_items(category_rows, sentinel=sentinel)
        if items:
            result = rank_classify(module, params, vocabulary, items,
                                   batch_size=settings.batch_size)
            values[(category, "rank_acc")] = result.accuracy
            values[(category, "rank_acc_norm")] = result.accuracy_normalised
        if category_rows:
            bar.update(len(category_rows))
    return values


class BlockCache:
    """Proper-noun-tagged blocks per (month, corpus), sampled once, kept under ``folder``.

    The file name carries the sampling settings and a fingerprint of the vocabulary (its
    size and the ids of a fixed text), so a model with another tokenizer never reads blocks
    cut for a different one.
    """

    PROBE_TEXT = "Proper nouns such as Wikipedia, London and Barack Obama tell us the facts."

    def __init__(self, folder: str | os.PathLike[str] | None, settings: EvalSettings) -> None:
        self.folder = os.fspath(folder) if folder is not None else None
        self.settings = settings
        self._memory: dict[tuple[str, str, str], Any] = {}
        self._nlp: Any = None

    def _fingerprint(self, vocabulary: Any) -> str:
        ids = list(vocabulary.encode(self.PROBE_TEXT))
        text = f"{vocabulary.vocab_size}:{ids}:{vocabulary.eos_id}"
        return hashlib.sha1(text.encode()).hexdigest()[:10]

    def blocks(self, vocabulary: Any, data_dir: str, month: str, corpus: str) -> list[Any] | None:
        """The month's sampled blocks of ``corpus`` (``None`` when it has no file)."""

        s = self.settings
        key = (month, corpus, self._fingerprint(vocabulary))
        if key in self._memory:
            return self._memory[key]
        name = f"{month}_{corpus}_{s.propn_instances}x{s.propn_length}_s{s.propn_seed}_{key[2]}"
        cached = paths.join(self.folder, f"{name}.npz") if self.folder is not None else None
        if cached is not None and paths.isfile(cached):
            with np.load(io.BytesIO(paths.read_bytes(cached))) as stored:
                blocks = [propn.Block(int(i), tuple(map(int, ids)), tuple(map(bool, flags)))
                          for i, ids, flags in zip(stored["index"], stored["ids"],
                                                   stored["propn"], strict=True)]
        else:
            source = paths.join(data_dir, month, "diffset", PROPN_CORPORA[corpus])
            if not paths.isfile(source):
                return None
            if self._nlp is None:
                self._nlp = propn.load_pos_pipeline(s.spacy_model)
            blocks = propn.corpus_blocks(self._nlp, vocabulary, propn.read_articles(source),
                                         n=s.propn_instances, length=s.propn_length,
                                         seed=s.propn_seed)
            if cached is not None:
                ids, flags = propn.as_array(blocks)
                data = io.BytesIO()  # np.savez seeks; an object being uploaded cannot
                np.savez(data, index=np.asarray([b.index for b in blocks], np.int64),
                         ids=ids, propn=flags)
                with atomic_open(cached, "wb") as handle:
                    handle.write(data.getvalue())
        self._memory[key] = blocks
        return blocks


def _propn(module: Any, params: Any, vocabulary: Any, data_dir: str, month: str,
           settings: EvalSettings, cache: BlockCache, skipped: dict[str, str],
           bar: Any) -> Values:
    values: Values = {}
    for corpus, filename in PROPN_CORPORA.items():
        bar.update(settings.propn_instances)
        blocks = cache.blocks(vocabulary, data_dir, month, corpus)
        if not blocks:
            skipped[corpus] = (f"no {filename}" if blocks is None else
                               f"{filename} is shorter than one {settings.propn_length}-token block")
            continue
        try:
            value, _ = propn_perplexity(module, params, blocks, batch_size=settings.batch_size)
        except ValueError as error:  # no block holds a proper noun
            skipped[corpus] = str(error)
            continue
        values[(corpus, f"propn_ppl_{corpus}")] = value
    return values


def evaluate_month(
    module: Any, params: Any, vocabulary: Any, data_dir: str, month: str,
    settings: EvalSettings, cache: BlockCache | None = None,
) -> tuple[Values, dict[str, str]]:
    """``{(category, metric): value}`` of one checkpoint on ``month``, and what was skipped
    (``{category: reason}``)."""
    skipped: dict[str, str] = {}
    values: Values = {}
    probe_groups = [g for g in settings.groups if g != "propn"]
    rows: dict[str, list] = {}
    if probe_groups:
        rows = {c: read_probes(data_dir, month, c, settings.max_probes) for c in CATEGORIES}
        skipped.update({c: "no probe rows" for c, r in rows.items() if not r})
        if not any(rows.get(c) for c in CHANGED_PARTS):
            skipped[CHANGED] = "no updated or new probe rows"
    with _month_progress(month, settings, rows) as bar:
        for group in settings.groups:
            try:
                values.update(_group(group, module, params, vocabulary, data_dir, month, rows,
                                     settings, cache, skipped, bar))
            except ValueError as error:
                raise ValueError(f"{data_dir}/{month} {group}: {error}") from None
    for (category, metric), value in values.items():
        if not np.isfinite(value):
            raise ValueError(f"{data_dir}/{month} {category} {metric}: not finite ({value})")
    return values, skipped


def _month_progress(month: str, settings: EvalSettings, rows: Mapping[str, list]) -> Any:
    """A bar (a terminal) or a plain line a minute (a log) over the month's examples: every
    probe once per probe group, and the proper-noun blocks."""
    probes = sum(len(r) for r in rows.values())
    groups = [g for g in settings.groups if g != "propn"]
    blocks = settings.propn_instances * len(PROPN_CORPORA) if "propn" in settings.groups else 0
    return progress(total=probes * len(groups) + blocks, desc=f"evaluating {month}",
                    unit="examples", leave=False)


def _group(group: str, module: Any, params: Any, vocabulary: Any, data_dir: str, month: str,
           rows: Mapping[str, list], settings: EvalSettings, cache: BlockCache | None,
           skipped: dict[str, str], bar: Any) -> Values:
    """One metric group's values (see the module docstring)."""
    if group in PPL_VARIANTS:
        return _perplexities(module, params, vocabulary, rows, group, settings, bar)
    if group == "qa":
        return _qa(module, params, vocabulary, rows, settings, bar)
    if group == "rank":
        ranked = _rank(module, params, vocabulary, rows, settings, bar)
        if not ranked:
            skipped["rank"] = "no probe row has a previous object"
        return ranked
    return _propn(module, params, vocabulary, data_dir, month, settings,
                  cache or BlockCache(None, settings), skipped, bar)
