"""Every zero-shot measurement of one checkpoint on one period's evaluation data (a month,
or any :class:`tw_jax.time.Period`).

The lifelong runner asks for *metric groups*; each group turns into one or more result metrics
of :mod:`tw_jax.evaluate.results`:

=============  ==============================================  ====================================
group          result metrics                                  categories
=============  ==============================================  ====================================
``ppl``        ``ppl`` (probe text; T5: object given prompt)   unchanged, updated, new, deleted,
``ppl_object`` ``ppl_object``                                  changed (= UPDATED then NEW
``ppl_cloze``  ``ppl_cloze``                                   rows)
``qa``         ``em``, ``f1``; ``em_previous``/``f1_previous``  same; the ``_previous`` pair only
               on rows with a previous object                  where rows have previous objects
``rank``       ``rank_acc``, ``rank_acc_norm``: new object vs  categories with previous objects
               previous one(s) by teacher-forced likelihood    (UPDATED)
``propn``      ``propn_ppl_diffset``, ``propn_ppl_nondiff``    ``diffset``, ``nondiff``
=============  ==============================================  ====================================

The probe groups (``ppl*`` and ``qa``) are measured as any seqio user measures them:
``seqio.Evaluator`` on the period's probe mixtures with tw_jax's model functions
(:mod:`tw_jax.evaluate.mixture_eval`), so the numbers are the probe tasks' metric functions,
``tw-jax eval``'s. ``changed`` is its own task (UPDATED then NEW rows), so its mean is exact.
Rank classification reads the probe rows of ``DATA/<period>/probes/<category>.csv``; proper-noun
perplexity the period's DiffSet (``diffset.jsonl``) and NON-DiffSet (``unchanged.jsonl``)
articles cut into ``propn_instances`` blocks of ``propn_length`` tokens
(:mod:`tw_jax.evaluate.propn`). Tagging a corpus with spaCy costs far more than scoring it, so
:class:`BlockCache` tags each (month, corpus) once per vocabulary and keeps the sampled blocks in
its folder (local or in a bucket, beside the run's results) for every later checkpoint and rerun.
The data folder may be local or in a bucket too: every file here is read through
:mod:`tw_jax.io.paths`. A category without rows is skipped and named; nothing is silently
dropped.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import seqio

import tw_jax.tasks
from tw_jax.errors import DumpError
from tw_jax.evaluate import propn
from tw_jax.evaluate.groups import GROUPS
from tw_jax.evaluate.mixture_eval import (
    SHARED,
    FormRun,
    MixtureEvaluators,
    plan_forms,
    probe_fingerprint,
    probe_forms,
    run_forms,
    vocabulary_name,
)
from tw_jax.evaluate.per_probe import PerProbe, ProbeScores, probe_keys
from tw_jax.evaluate.probe_contexts import output_dir as contexts_dir
from tw_jax.evaluate.propn import propn_perplexity
from tw_jax.evaluate.qa import PROTOCOLS
from tw_jax.evaluate.rank import probe_rank_items, rank_classify
from tw_jax.evaluate.seqio_eval import SeqioModel
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.io.progress import progress
from tw_jax.preprocess.probes.probe_csv import read_stage_probes
from tw_jax.tasks import names
from tw_jax.time import Period

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


def read_probes(data_dir: str, period: Period, category: str,
                limit: int | None = None) -> list[dict]:
    """Rows of ``DATA/<period>/probes/<category>.csv`` (the first ``limit`` when given)."""

    path = paths.join(data_dir, period.name, "probes", f"{category}.csv")
    if not paths.exists(path):
        raise DumpError(path, None, f"no {category} probes for {period.label} (run tw-jax probes)")
    rows = read_stage_probes(path)
    return rows[:limit] if limit is not None else rows


def _rank(module: Any, params: Any, vocabulary: Any, rows: Mapping[str, list],
          settings: EvalSettings, bar: Any) -> Values:
    values: Values = {}
    for category, category_rows in rows.items():
        items = probe_rank_items(category_rows, module)
        if items:
            result = rank_classify(module, params, vocabulary, items,
                                   batch_size=settings.batch_size)
            values[(category, "rank_acc")] = result.accuracy
            values[(category, "rank_acc_norm")] = result.accuracy_normalised
        if category_rows:
            bar.update(len(category_rows))
    return values


class BlockCache:
    """Proper-noun-tagged blocks per (period, corpus), sampled once, kept under ``folder``.

    The file name carries the sampling settings and a fingerprint of the vocabulary (its
    size and the ids of a fixed text), so a model with another tokenizer never reads blocks
    cut for a different one.
    """

    PROBE_TEXT = "Proper nouns such as Wikipedia, London and Barack Obama tell us the facts."

    def __init__(self, folder: str | os.PathLike[str] | None, settings: EvalSettings) -> None:
        self.folder = os.fspath(folder) if folder is not None else None
        self.settings = settings
        self._memory: dict[tuple[Period, str, str], Any] = {}
        self._nlp: Any = None

    def _fingerprint(self, vocabulary: Any) -> str:
        ids = list(vocabulary.encode(self.PROBE_TEXT))
        text = f"{vocabulary.vocab_size}:{ids}:{vocabulary.eos_id}"
        return hashlib.sha1(text.encode()).hexdigest()[:10]

    def blocks(self, vocabulary: Any, data_dir: str, period: Period,
               corpus: str) -> list[Any] | None:
        """The period's sampled blocks of ``corpus`` (``None`` when it has no file)."""

        s = self.settings
        key = (period, corpus, self._fingerprint(vocabulary))
        if key in self._memory:
            return self._memory[key]
        name = (f"{period.name}_{corpus}_{s.propn_instances}x{s.propn_length}_s{s.propn_seed}_"
                f"{key[2]}")
        cached = paths.join(self.folder, f"{name}.npz") if self.folder is not None else None
        if cached is not None and paths.isfile(cached):
            with np.load(io.BytesIO(paths.read_bytes(cached))) as stored:
                blocks = [propn.Block(int(i), tuple(map(int, ids)), tuple(map(bool, flags)))
                          for i, ids, flags in zip(stored["index"], stored["ids"],
                                                   stored["propn"], strict=True)]
        else:
            source = paths.join(data_dir, period.name, "diffset", PROPN_CORPORA[corpus])
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


def _propn(module: Any, params: Any, vocabulary: Any, data_dir: str, period: Period,
           settings: EvalSettings, cache: BlockCache, skipped: dict[str, str],
           bar: Any) -> Values:
    values: Values = {}
    for corpus, filename in PROPN_CORPORA.items():
        bar.update(settings.propn_instances)
        blocks = cache.blocks(vocabulary, data_dir, period, corpus)
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


@dataclass(frozen=True)
class MonthScores:
    """What :func:`evaluate_month` measured: ``values`` (``{(category, metric): value}``), what
    was ``skipped`` (``{category: reason}``), the probes behind each probe category
    (``counts``: the rows evaluation read, after ``max_probes``) and the per-probe perplexity
    scores (``probes``, :mod:`tw_jax.evaluate.per_probe`)."""

    values: Values
    skipped: dict[str, str]
    counts: dict[str, int] = field(default_factory=dict)
    probes: PerProbe = field(default_factory=dict)

    def probe_counts(self) -> Values:
        """``n_probes`` of every probe category ``values`` scored (CHANGED: the UPDATED then NEW
        rows its task held), so the report can say how many probes stand behind a number."""
        scored = {c for c, _ in self.values if c in self.counts}
        return {(c, "n_probes"): float(self.counts[c]) for c in sorted(scored)}


def evaluate_month(
    model: Any, params: Any, vocabulary: Any, data_dir: str, period: Period,
    settings: EvalSettings, cache: BlockCache | None = None, *, mesh: Any = None,
    evaluators: MixtureEvaluators | None = None, source: str | None = None,
) -> MonthScores:
    """Every measurement of one checkpoint on ``period`` (:class:`MonthScores`), spelled as the
    data folder spells it (:func:`tw_jax.tasks.layout.spelled`).

    ``model`` (a model object, config or module) with ``params`` on ``mesh`` (None: one
    device). The probe groups go through the period's probe mixtures (registered for
    ``data_dir`` here when they are not); ``evaluators`` keeps their tokenised examples for the
    next checkpoint; ``source`` names a retriever whose open-book probes to read instead.
    """
    where = paths.join(data_dir, period.name)
    skipped: dict[str, str] = {}
    values: Values = {}
    probe_groups = [g for g in settings.groups if g != "propn"]
    rows: dict[str, list] = {}
    plan: list[FormRun] = []
    if probe_groups:
        rows = {c: read_probes(data_dir, period, c, settings.max_probes) for c in CATEGORIES}
        skipped.update({c: "no probe rows" for c, r in rows.items() if not r})
        if not any(rows.get(c) for c in CHANGED_PARTS):
            skipped[CHANGED] = "no updated or new probe rows"
        plan = _plan(model, data_dir, period, probe_groups, settings, evaluators, source, rows)
    fns = SeqioModel(model, params, mesh, vocabulary=vocabulary,
                     qa_protocol=settings.qa_protocol, batch_size=settings.batch_size,
                     max_new_tokens=settings.max_new_tokens, beam_size=settings.beam_size)
    with _period_progress(period, settings, rows, plan) as bar:
        fns.on_examples = bar.update
        try:
            scored, per_example = run_forms(fns, period, plan, source)
            values.update(scored)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        for group in settings.groups:
            if group in ("rank", "propn"):
                try:
                    values.update(_group(group, model, params, vocabulary, data_dir, period,
                                         rows, settings, cache, skipped, bar))
                except ValueError as error:
                    raise ValueError(f"{where} {group}: {error}") from None
    for (category, metric), value in values.items():
        if not np.isfinite(value):
            raise ValueError(f"{where} {category} {metric}: not finite ({value})")
    if rows:  # CHANGED is its own task: the first max_probes of UPDATED then NEW
        rows[CHANGED] = [r for c in CHANGED_PARTS for r in rows[c]][: settings.max_probes]
    return MonthScores(values, skipped, {c: len(r) for c, r in rows.items()},
                       _per_probe(per_example, rows, where))


def _per_probe(per_example: Mapping[tuple[str, str], np.ndarray],
               rows: Mapping[str, list], where: str) -> PerProbe:
    """Each category's per-example scores with the keys of the probe rows they score (example
    ``i`` is row ``i``: a probe task has one example per row, in row order)."""
    scores: PerProbe = {}
    for (category, metric), pairs in per_example.items():
        probes = rows.get(category, [])
        if len(probes) != len(pairs):
            raise ValueError(f"{where} {category}: {len(pairs)} {metric} scores for "
                             f"{len(probes)} probe rows (re-register the probe tasks)")
        scores[(category, metric)] = ProbeScores(probe_keys(probes), pairs[:, 0], pairs[:, 1])
    return scores


def _plan(model: Any, data_dir: str, period: Period, groups: Sequence[str],
          settings: EvalSettings,
          evaluators: MixtureEvaluators | None, source: str | None,
          rows: Mapping[str, list]) -> list[FormRun]:
    """The period's probe mixtures for ``groups``, checked to hold the categories the data
    folder has rows for (a registry of another folder would silently score other probes)."""
    needed = [names.probes(period, None, suffix, source) for suffix in probe_forms(model, groups)]
    tw_jax.tasks.ensure_registered(data_dir, needed)
    folder = (contexts_dir(data_dir, period, source) if source
              else paths.join(data_dir, period.name, "probes"))
    data = probe_fingerprint(folder, [f"{c}.csv" for c in CATEGORIES])
    data += "|" + "|".join(sorted({_vocabulary_path(name) for name in needed}))
    plan = plan_forms(model, period, groups, evaluators or SHARED,
                      max_probes=settings.max_probes, source=source, data=data)
    expected = {c for c, r in rows.items() if r}
    if any(rows.get(c) for c in CHANGED_PARTS):
        expected.add(CHANGED)
    for form in plan:
        found = {names.probe_category(t.name, period, form.suffix, source)
                 for t in form.evaluator.eval_tasks}
        if found != expected:
            raise ValueError(
                f"{paths.join(data_dir, period.name)}: the registered probe tasks hold {sorted(found)}, the "
                f"probe files {sorted(expected)} (re-register: tw_jax.tasks.register_all)")
    return plan


def _vocabulary_path(mixture: str) -> str:
    """Where a registered mixture's vocabulary comes from (part of what its evaluator caches)."""
    return vocabulary_name(seqio.get_mixture_or_task(mixture).output_features["targets"].vocabulary)


def _period_progress(period: Period, settings: EvalSettings, rows: Mapping[str, list],
                    plan: Sequence[FormRun]) -> Any:
    """A bar (a terminal) or a plain line a minute (a log) over the period's model calls: every
    example of each probe mixture once per model function, the rank rows and the proper-noun
    blocks."""
    calls = sum(form.calls for form in plan)
    if "rank" in settings.groups:
        calls += sum(len(r) for r in rows.values())
    if "propn" in settings.groups:
        calls += settings.propn_instances * len(PROPN_CORPORA)
    return progress(total=calls, desc=f"evaluating {period.label}", unit="examples", leave=False)


def _group(group: str, model: Any, params: Any, vocabulary: Any, data_dir: str, period: Period,
           rows: Mapping[str, list], settings: EvalSettings, cache: BlockCache | None,
           skipped: dict[str, str], bar: Any) -> Values:
    """Rank classification or proper-noun perplexity (see the module docstring)."""
    if group == "rank":
        ranked = _rank(model, params, vocabulary, rows, settings, bar)
        if not ranked:
            skipped["rank"] = "no probe row has a previous object"
        return ranked
    return _propn(model, params, vocabulary, data_dir, period, settings,
                  cache or BlockCache(None, settings), skipped, bar)
