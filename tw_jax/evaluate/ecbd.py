"""ECBD evaluation: span perplexity under four input types, and recall@k from T5 beam search.

Perplexity (ECBD §3, Figure 3) is token-normalised over the masked span only; each model
family builds its example (:meth:`~tw_jax.models.base.BaseModel.cloze_example`):

- T5: input the (modified) masked sentence + EOS, target ``<extra_id_0> span <extra_id_1>`` + EOS;
  only the span's tokens between the two sentinels are scored.
- BART: input the
  sentence with one ``<mask>`` in place of the span, framed ``<s> … </s>`` (ECBD, Section 3:
  "For T5 and BART, we condition on the input with a single mask"); target the whole sentence
  with the span filled in, framed likewise, as in BART's pre-training; only the span's tokens are
  scored. Teacher forcing feeds the decoder ``<s>`` and the left context before the span (ECBD,
  Section 3: "At decoding, for BART we initialize the decoder with the left context of the span
  and compute perplexity on the true span filler following this left context"); the right
  context follows the span in the target, where the causal decoder cannot see it while scoring
  the span, and conditions it through the input. A context longer than the learned positions
  loses its first tokens (counted as ``truncated``).
- GPT-2: the text left of the mask, then the span; the span's tokens are scored given the left
  context only (the right context cannot condition a left-to-right model). The text is preceded
  by EOS acting as BOS (the decoder-only ``span_example`` of :mod:`tw_jax.models.base`); a
  context longer than the model's positions loses its first tokens (counted as ``truncated``).

Each example's NLL is the mean over its span tokens. *Micro* perplexity is ``exp`` of the mean
over examples; *entity-averaged* perplexity (the paper's headline number) is ``exp`` of the mean
over entities of each entity's mean NLL. Both are reported per subset, per pooled group (Table 3:
``2017-2019`` and ``2020-2021``), per input type and per span type (``all``, ``NP``, ``RANDOM``).

Recall@k (Appendix D, T5 only: the fillers a family writes for the blank,
:meth:`~tw_jax.models.base.BaseModel.cloze_fillers`): beam search (paper: 100 beams); each
finished sequence's text after ``<extra_id_0>`` (from the start if the model emitted none) up to
the next sentinel or EOS is a prediction; the top ``k`` distinct non-empty predictions count as a
hit when one equals the gold span (whitespace-normalised). Reported as a percentage, micro over examples.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tw_jax.errors import DumpError
from tw_jax.evaluate import results as results_module
from tw_jax.evaluate.results import (
    BASE,
    ECBD_REPORT,
    NO_MONTH,
    Result,
    iter_results,
    method_name,
    metric_spec,
)
from tw_jax.io import paths
from tw_jax.models import model_for
from tw_jax.tasks.ecbd import INPUTS, SENTINEL_0, EcbdExample, input_sentence, random_definitions

INPUT_LABELS = {"original": "ORIGINAL", "no_ent": "NO ENT", "random_def": "RANDOM DEF.",
                "definition": "DEFINITION"}
GROUPS: dict[str, tuple[str, ...]] = {"2017-2019": ("2017", "2018", "2019"),
                                      "2020-2021": ("2020", "2021")}
SPAN_TYPES = ("all", "NP", "RANDOM")
PPL, PPL_ENTITY = "ppl", "ppl_entity"
RECALL_SKIPPED = "recall@k skipped: T5 only (ECBD Appendix D)"


def recall_metric(k: int) -> str:
    return f"recall_at_{k}"


@dataclass(frozen=True)
class EcbdOptions:
    """What to measure: input types, definition length, seed, batching, and recall@k."""

    input_types: tuple[str, ...] = INPUTS
    n_definition: int = 1
    seed: int = 0
    batch_size: int = 32
    recall_k: int = 0  # 0: no recall (it needs beam search, T5 only)
    beam_size: int = 100
    max_new_tokens: int = 16


@dataclass(frozen=True)
class EcbdResult:
    """One number of one table cell, with the examples and entities behind it; written to
    ``results.jsonl`` as rows of :class:`~tw_jax.evaluate.results.Result` (:func:`to_results`)."""

    model: str
    subset: str
    split: str
    input: str
    span_type: str
    metric: str
    value: float
    examples: int
    entities: int

    @property
    def key(self) -> tuple[str, str, str, str, str, str]:
        return (self.model, self.subset, self.split, self.input, self.span_type, self.metric)


@dataclass
class EcbdRun:
    """Results, per-example records, and notes on what could not be built as asked."""

    results: list[EcbdResult] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, int] = field(default_factory=dict)

    def note(self, what: str, n: int = 1) -> None:
        self.notes[what] = self.notes.get(what, 0) + n


# --- per-example scoring --------------------------------------------------------------------


def span_example(model: Any, vocabulary: Any, example: EcbdExample, sentence: str, *,
                 max_length: int | None = None) -> tuple[Any, bool]:
    """The scoring example of one masked sentence, as the model builds a cloze example (see the
    module docstring), and whether its context was cut to ``max_length`` tokens."""
    left, right = sentence.split(SENTINEL_0, 1)
    return model_for(model).cloze_example(vocabulary, left, example.span, right,
                                          max_length=max_length)


def sentences_for(examples: Sequence[EcbdExample], input_type: str, options: EcbdOptions,
                  pool: Sequence[EcbdExample], run: EcbdRun) -> list[str] | None:
    """The masked sentences of one input type; unbuildable ones fall back to the original
    sentence (counted), and None means the type cannot be built at all (one entity only)."""
    randoms: list[str | None] = [None] * len(examples)
    if input_type == "random_def":
        by_source = {ex.source: i for i, ex in enumerate(pool)}
        drawn = random_definitions(pool, options.n_definition, options.seed)
        randoms = [drawn[by_source[ex.source]] for ex in examples]
        if examples and all(r is None for r in randoms):
            return None
    out = []
    for example, rand in zip(examples, randoms, strict=True):
        text = input_sentence(example, input_type, n_definition=options.n_definition,
                              random_definition=rand)
        if text is None:
            run.note(f"{input_type}: unchanged (no mention or definition)")
            text = example.masked_sentence
        out.append(text)
    return out


def span_nlls(model: Any, params: Any, vocabulary: Any, examples: Sequence[EcbdExample],
              sentences: Sequence[str], *, batch_size: int = 32,
              run: EcbdRun | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mean NLL over each example's span tokens, and their count."""
    model = model_for(model)
    built = [span_example(model, vocabulary, ex, s, max_length=model.max_length)
             for ex, s in zip(examples, sentences, strict=True)]
    if run is not None and any(cut for _, cut in built):
        run.note("truncated contexts", sum(cut for _, cut in built))
    scores = model.score(params, [b for b, _ in built], batch_size=batch_size)
    with np.errstate(divide="ignore", invalid="ignore"):
        nll = -scores.log_likelihood / scores.num_tokens
    return nll, scores.num_tokens


# --- aggregation ---------------------------------------------------------------------------


def micro_perplexity(nlls: Sequence[float]) -> float:
    """``exp(mean NLL over examples)``."""
    return math.exp(float(np.mean(np.asarray(nlls, np.float64))))


def entity_perplexity(nlls: Sequence[float], entities: Sequence[str]) -> float:
    """``exp`` of the mean over entities of each entity's mean NLL."""
    per_entity: dict[str, list[float]] = defaultdict(list)
    for value, entity in zip(nlls, entities, strict=True):
        per_entity[entity].append(float(value))
    return math.exp(float(np.mean([np.mean(v) for v in per_entity.values()])))


def _cells(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str, str], list]:
    """Records by (subset or group, split, input, span type), including pooled cells."""
    cells: dict[tuple[str, str, str, str], list] = defaultdict(list)
    for record in records:
        subsets = [record["subset"]] + [g for g, members in GROUPS.items()
                                        if record["subset"] in members]
        for subset in subsets:
            for span_type in ("all", record["span_group"]):
                cells[(subset, record["split"], record["input"], span_type)].append(record)
    return cells


def aggregate(model: str, records: Sequence[Mapping[str, Any]], recall_k: int = 0
              ) -> list[EcbdResult]:
    """The results of per-example records (``nll``, and ``hit`` when recall was run)."""
    results = []
    for (subset, split, input_type, span_type), rows in sorted(_cells(records).items()):
        scored = [r for r in rows if r.get("nll") is not None and math.isfinite(r["nll"])]
        entities = len({r["entity"] for r in rows})
        if scored:
            nlls, owners = [r["nll"] for r in scored], [r["entity"] for r in scored]
            for metric, value in ((PPL, micro_perplexity(nlls)),
                                  (PPL_ENTITY, entity_perplexity(nlls, owners))):
                results.append(EcbdResult(model, subset, split, input_type, span_type, metric,
                                          value, len(scored), entities))
        hits = [r["hit"] for r in rows if r.get("hit") is not None]
        if recall_k and hits:
            results.append(EcbdResult(model, subset, split, input_type, span_type,
                                      recall_metric(recall_k), 100.0 * float(np.mean(hits)),
                                      len(hits), entities))
    return results


def evaluate_ecbd(model: Any, params: Any, vocabulary: Any,
                  data: Mapping[tuple[str, str], Sequence[EcbdExample]], model_name: str,
                  options: EcbdOptions | None = None) -> EcbdRun:
    """Score every (subset, split) of ``data`` under every input type (module docstring)."""
    options = options or EcbdOptions()
    unknown = [t for t in options.input_types if t not in INPUTS]
    if unknown:
        raise ValueError(f"unknown input types {unknown}; known: {', '.join(INPUTS)}")
    # Recall@k reads the fillers the model writes for the blank (ECBD Appendix D: T5 only).
    family = model_for(model)
    recall_k = options.recall_k
    run = EcbdRun()
    pool = [ex for examples in data.values() for ex in examples]
    for examples in data.values():
        if not examples:
            continue
        for input_type in options.input_types:
            sentences = sentences_for(examples, input_type, options, pool, run)
            if sentences is None:
                run.note(f"{input_type}: skipped (no other entity to draw a definition from)")
                continue
            nll, tokens = span_nlls(model, params, vocabulary, examples, sentences,
                                    batch_size=options.batch_size, run=run)
            predictions = family.cloze_fillers(
                params, vocabulary, sentences, k=recall_k, beam_size=options.beam_size,
                max_new_tokens=options.max_new_tokens) if recall_k else None
            if recall_k and predictions is None:
                run.notes[RECALL_SKIPPED] = 1
            for i, (example, sentence) in enumerate(zip(examples, sentences, strict=True)):
                record = {
                    "model": model_name, "subset": example.subset, "split": example.split,
                    "input": input_type, "source": example.source, "ex_id": example.ex_id,
                    "entity": example.entity, "span_type": example.span_type,
                    "span_group": example.span_group, "input_text": sentence,
                    "span": example.span, "tokens": int(tokens[i]),
                    "nll": float(nll[i]) if tokens[i] > 0 else None,
                }
                if predictions is not None:
                    gold = " ".join(example.span.split())
                    record["predictions"] = predictions[i]
                    record["hit"] = int(gold in predictions[i])
                run.records.append(record)
            if np.any(tokens == 0):
                run.note("examples with no span token", int(np.sum(tokens == 0)))
    run.results = aggregate(model_name, run.records, recall_k)
    return run


def latest(results: Iterable[EcbdResult]) -> list[EcbdResult]:
    """A later result with the same key replaces an earlier one (re-running appends)."""
    found: dict[tuple, EcbdResult] = {}
    for result in results:
        found.pop(result.key, None)
        found[result.key] = result
    return list(found.values())


# --- results.jsonl ---------------------------------------------------------------------------
# ECBD's cells are results.jsonl lines like every benchmark's (the mapping is in
# tw_jax.evaluate.results' docstring): the value under ``ecbd_<metric>``, and beside it the
# counts of examples and entities behind it. Earlier versions wrote ``ecbd_results.jsonl``, one
# EcbdResult per line; it is still read, into the same rows.

LEGACY_RESULTS_FILE = "ecbd_results.jsonl"
PREFIX = "ecbd_"
EXAMPLES, RECALL_EXAMPLES, ENTITIES = "ecbd_examples", "ecbd_recall_examples", "ecbd_entities"
COUNTS = (EXAMPLES, RECALL_EXAMPLES, ENTITIES)
_FIELDS = tuple(EcbdResult.__dataclass_fields__)


def _examples_metric(metric: str) -> str:
    """The count behind a value: perplexities count the examples with a span token scored,
    recall the examples the model wrote fillers for (they differ when a span has no token)."""
    return RECALL_EXAMPLES if metric.startswith("recall_at_") else EXAMPLES


def to_results(results: Iterable[EcbdResult]) -> list[Result]:
    """The results.jsonl rows of ECBD cells: each value, then its cell's example and entity
    counts (once per cell). The model's name is lower-cased; ``ValueError`` names it when it is
    no method name."""
    rows: dict[tuple, Result] = {}
    for cell in results:
        method = method_name(cell.model)
        slice_ = {"input": cell.input, "span_type": cell.span_type, "split": cell.split}
        for metric, value in ((PREFIX + cell.metric, float(cell.value)),
                              (_examples_metric(cell.metric), int(cell.examples)),
                              (ENTITIES, int(cell.entities))):
            row = Result(method, BASE, NO_MONTH, cell.subset, metric, value, dict(slice_))
            rows[row.key] = row
    return list(rows.values())


def is_ecbd(result: Result) -> bool:
    """Whether a results.jsonl row is one of ECBD's (``tw-jax ecbd report`` tabulates it)."""
    spec = metric_spec(result.metric)
    return spec is not None and spec.tables == ECBD_REPORT


def _cell(row: Result) -> tuple:
    """A row's key without its metric: the cell its value and counts share."""
    return row.key[:4] + row.key[5:]


def from_results(results: Iterable[Result]) -> list[EcbdResult]:
    """The ECBD cells of results.jsonl rows (other benchmarks' rows are passed over), each
    value with its cell's counts; the inverse of :func:`to_results` for lower-case names."""
    rows = [r for r in results if is_ecbd(r)]
    counts = {(_cell(r), r.metric): r.value for r in rows if r.metric in COUNTS}
    cells = []
    for row in rows:
        if row.metric in COUNTS:
            continue
        metric, cell = row.metric.removeprefix(PREFIX), _cell(row)
        # The counts are written in the same append as the value; 0 only for a value alone.
        examples = int(counts.get((cell, _examples_metric(metric)), 0))
        entities = int(counts.get((cell, ENTITIES), 0))
        cells.append(EcbdResult(row.method, row.category, row.slice["split"],
                                row.slice["input"], row.slice["span_type"], metric, row.value,
                                examples, entities))
    return cells


def check_names(model_name: str, subsets: Iterable[str]) -> None:
    """``ValueError`` when the results could not be written (checked before anything is
    scored): the model's name is no method name, or a subset's no category."""
    for subset in subsets:
        cell = EcbdResult(model_name, subset, "test", "original", "all", PPL, 1.0, 1, 1)
        for row in to_results([cell]):
            try:
                row.validate()
            except ValueError as error:
                raise ValueError(f"ECBD subset {subset!r}: {error}") from None


def append_results(out_dir: str | os.PathLike[str], results: Sequence[EcbdResult]) -> str:
    """Append the cells to ``OUT_DIR/results.jsonl`` in one write, validated first, as every
    benchmark's (:func:`tw_jax.evaluate.results.append_results`: a torn last line repaired
    first; in a bucket the old bytes plus the new lines are uploaded under a temporary name and
    moved into place). Two runs appending to one bucket file at once may lose one run's lines
    (the later upload wins): give concurrent runs their own ``OUT_DIR`` (``tw-jax ecbd report``
    reads many). Returns the file."""
    return str(results_module.append_results(out_dir, to_results(results)))


def read_legacy(path: str) -> list[EcbdResult]:
    """The rows of an ``ecbd_results.jsonl`` of an earlier version, one EcbdResult a line; bad
    lines name file and line."""
    results = []
    with paths.open_file(path, "r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                results.append(EcbdResult(**{f: record[f] for f in _FIELDS}))
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise DumpError(path, f"line {number}",
                                f"not an ECBD result ({type(error).__name__}: {error})") from None
    return results


def read_results(path: str | os.PathLike[str]) -> list[EcbdResult]:
    """ECBD's cells of an ``OUT_DIR`` (its ``results.jsonl``, after the ``ecbd_results.jsonl``
    of an earlier version where there is one, so the newer lines win) or of one such file,
    local or ``gs://``; latest per key; bad lines name file and line."""
    path = os.fspath(path)
    if paths.isdir(path):
        files = [f for f in (paths.join(path, LEGACY_RESULTS_FILE),
                             paths.join(path, results_module.RESULTS_FILE)) if paths.isfile(f)]
        if not files:
            raise DumpError(path, None, f"no {results_module.RESULTS_FILE} (tw-jax ecbd eval "
                                        f"writes it) or {LEGACY_RESULTS_FILE}")
    elif paths.isfile(path):
        files = [path]
    else:
        raise DumpError(path, None, "no such results file (tw-jax ecbd eval writes "
                                    f"{results_module.RESULTS_FILE})")
    found: list[EcbdResult] = []
    for file in files:
        legacy = posixpath.basename(file) == LEGACY_RESULTS_FILE
        found += read_legacy(file) if legacy else from_results(iter_results(file))
    return latest(found)
