"""The results file every evaluation writes and ``tw-jax report`` reads: ``OUT_DIR/results.jsonl``.

One JSON object per line, one measured number each::

    {"method": "diff", "trained_through": "2024-12_2025-01", "eval_month": "2024-12_2025-01",
     "category": "updated", "metric": "ppl", "value": 268.58}

- ``method``: lower-case name; the paper's are :data:`METHODS` (others are allowed and sort last).
- ``trained_through``: the last period the model was trained on (a :class:`tw_jax.time.Period`,
  written as its name: ``"2024-12_2025-01"``, or ``"0910"`` in the 2021 layout), or
  :data:`BASE` (``"base"``) for a model before any update (INITIAL, or phase 0 of FUAR).
- ``eval_month``: the period whose probes or corpus were scored, or :data:`NO_MONTH` (``"-"``)
  for numbers tied to no evaluation set (``train_seconds``, ``train_steps``,
  ``compile_seconds``).
- ``category`` and ``metric``: see :data:`METRICS`, which also says which categories each metric
  takes. Probe categories are the TemporalWiki ones plus ``changed`` (UPDATED then NEW, the final
  paper's CHANGED, scored as one set so its per-instance average is exact) and ``new_easy`` (CKL's
  NewLAMA-Easy); for CKL, ``unchanged``/``updated``/``new`` hold InvariantLAMA/UpdatedLAMA/NewLAMA.
- ``value``: a finite number. ``n_probes`` is a count, not a score: how many probes stand
  behind a category's numbers, which the report needs to tell a difference from noise (files
  written before it existed simply lack it).
- ``slice`` (only where the metric has one): the further dimensions a benchmark's cells need
  beyond the five, a JSON object of lower-case names to values, keys sorted::

      {"method": "t5-small", "trained_through": "base", "eval_month": "-",
       "category": "2017-2019", "metric": "ecbd_ppl_entity", "value": 40.1,
       "slice": {"input": "no_ent", "span_type": "all", "split": "test"}}

  Which names a metric takes is :attr:`MetricSpec.slice_keys`; every other metric takes none
  and its lines carry no ``slice``, so TemporalWiki, CKL and EvolvingQA lines are as before and
  files written before ``slice`` existed read unchanged.

Entity Cloze By Date (``tw-jax ecbd eval``, :mod:`tw_jax.evaluate.ecbd`) writes its table cells
here too: ``method`` is the model's name, lower-cased; ``trained_through`` is :data:`BASE` and
``eval_month`` :data:`NO_MONTH` (ECBD scores a frozen model on one dated set, no month pair);
``category`` is the subset (``popular``, ``2017`` … ``2021``, or a built folder's name) or a
pooled group of ECBD Table 3 (``2017-2019``, ``2020-2021``); ``slice`` is ``{"input",
"span_type", "split"}`` (input type ``original`` / ``no_ent`` / ``random_def`` / ``definition``,
span type ``all`` / ``NP`` / ``RANDOM``, split ``dev`` / ``test``); the metrics are
``ecbd_ppl``, ``ecbd_ppl_entity``, ``ecbd_recall_at_<k>`` (ECBD §3 and Appendix D) and the
counts ``ecbd_examples``, ``ecbd_recall_examples`` and ``ecbd_entities`` behind them.
:attr:`MetricSpec.tables` names the command whose tables show a metric: ``tw-jax report``
leaves ECBD's lines to ``tw-jax ecbd report``.

A later line with the same key (method, trained_through, eval_month, category, metric, and the
slice's items where it has one) replaces an earlier one, so re-running an evaluation just
appends. In a :class:`Result` the two period fields are typed (:class:`~tw_jax.time.Period`
or :class:`~tw_jax.time.Mark`); periods order by date (``1112 < 1201 < 0102`` in the 2021
layout, ``2024-12_2025-01 < 2025-01_2025-02``), and one period spelled two ways
(``0809``, ``2021-08_2021-09``) is one key.

The file may be local or in a bucket (``OUT_DIR`` a ``gs://`` URL). Locally, lines are appended
whole with one ``write`` on a file opened in append mode and flushed to disk: concurrent writers
(several evaluation jobs) never interleave inside a line on a local or POSIX file system, and an
interrupted write leaves at most one torn last line, which the reader reports with the file and
line number. Objects cannot be appended to, so in a bucket an append reads the object, adds the
lines and uploads the whole file under a temporary name, then moves it into place: readers see
the old file or the new one, never a torn line. Two jobs appending to one bucket file at the
same moment can lose one job's lines (the later upload wins), so give concurrent jobs their own
``OUT_DIR`` and combine them with ``tw-jax report OUT_A OUT_B``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.io.jsonl import append_lines, parse_record, write_records
from tw_jax.methods import METHOD_NAMES
from tw_jax.time import (
    BASE,
    NO_MONTH,
    Evaluated,
    Period,
    Trained,
    parse_evaluated,
    parse_trained,
)

RESULTS_FILE = "results.jsonl"

# The methods' names in the report's order (tw_jax.methods, the one table of methods).
METHODS: tuple[str, ...] = METHOD_NAMES
PROBE_CATEGORIES: tuple[str, ...] = ("unchanged", "updated", "new", "deleted", "changed")
CKL_CATEGORIES: tuple[str, ...] = ("unchanged", "updated", "new", "new_easy")
QA_CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(PROBE_CATEGORIES + CKL_CATEGORIES))
CORPUS_CATEGORIES: tuple[str, ...] = ("diffset", "nondiff")
CATEGORIES: tuple[str, ...] = QA_CATEGORIES + CORPUS_CATEGORIES + ("all",)


REPORT = "tw-jax report"


@dataclass(frozen=True)
class MetricSpec:
    """What a metric name means, which categories and slice names it takes, and which command
    tabulates it (the other benchmarks' lines share the file but not ``tw-jax report``'s
    tables)."""

    description: str
    categories: tuple[str, ...]
    lower_is_better: bool
    # The slice names every result of the metric carries (none: the five key fields suffice).
    slice_keys: tuple[str, ...] = ()
    # Where the categories are a benchmark's own folder names, a pattern they match instead.
    category_pattern: str = ""
    tables: str = REPORT

    def takes_category(self, category: object) -> bool:
        if self.category_pattern:
            return isinstance(category, str) and re.fullmatch(self.category_pattern,
                                                              category) is not None
        return category in self.categories

    def categories_text(self) -> str:
        """What :meth:`takes_category` accepts, for error messages."""
        if self.category_pattern:
            return f"a category matching {self.category_pattern}"
        return f"category {' / '.join(self.categories)}"


# The vocabulary of metric names. Perplexities are per-instance perplexities averaged over
# instances (TemporalWiki footnote 6): ppl_i = exp(-(1/|y_i|) Σ_j log p(y_ij | context)) over
# instance i's scored tokens, then the mean over instances; `tw-jax eval` reports the same
# number as `perplexity` on the matching probe task (docs/metrics.md). EM/F1/accuracies are
# percentages (0-100).
_PER_PROBE = "mean over probes of exp(-mean log p of the probe's scored tokens)"
METRICS: dict[str, MetricSpec] = {
    "ppl": MetricSpec(f"zero-shot probe perplexity, {_PER_PROBE}: GPT-2 on the probe text (every "
                      "token, EOS in front as BOS); T5 on the object given 'subject relation "
                      "<extra_id_0>' (object tokens only). tw-jax eval's `perplexity` on "
                      "twiki_probes_<P>_<category> (_ssm for T5)", QA_CATEGORIES, True),
    "ppl_object": MetricSpec(f"GPT-2 perplexity of the object tokens given 'subject relation', "
                             f"{_PER_PROBE} (twiki_probes_<P>_<category>_object)",
                             QA_CATEGORIES, True),
    "ppl_cloze": MetricSpec(f"perplexity of the object in the cloze sentence, {_PER_PROBE} "
                            "(GPT-2: object tokens given the sentence before it; T5: object "
                            "given the masked sentence, twiki_probes_<P>_<category>_ssm_cloze)",
                            QA_CATEGORIES, True),
    "lt_ppl": MetricSpec(f"probe perplexity after light-tuning (TemporalWiki Table 4), as ppl: "
                         f"{_PER_PROBE}", QA_CATEGORIES, True),
    "em": MetricSpec("exact match of the decoded object with the current answer (SQuAD "
                     "normalisation, %)", QA_CATEGORIES, False),
    "f1": MetricSpec("token F1 of the decoded object with the current answer (%)",
                     QA_CATEGORIES, False),
    "em_previous": MetricSpec("exact match with the previous (outdated) answer (%)",
                              QA_CATEGORIES, False),
    "f1_previous": MetricSpec("token F1 with the previous (outdated) answer (%)",
                              QA_CATEGORIES, False),
    "lt_em": MetricSpec("exact match after light-tuning (%)", QA_CATEGORIES, False),
    "lt_f1": MetricSpec("token F1 after light-tuning (TemporalWiki Table 6, %)",
                        QA_CATEGORIES, False),
    "rank_acc": MetricSpec("rank classification accuracy, summed log-likelihood (%)",
                           QA_CATEGORIES, False),
    "rank_acc_norm": MetricSpec("rank classification accuracy, length-normalised (%)",
                                QA_CATEGORIES, False),
    "propn_ppl_diffset": MetricSpec("proper-noun-token perplexity on TWiki-DiffSet blocks",
                                    ("diffset",), True),
    "propn_ppl_nondiff": MetricSpec("proper-noun-token perplexity on NON-TWiki-DiffSet blocks",
                                    ("nondiff",), True),
    "train_seconds": MetricSpec("wall-clock seconds of the update that produced the model",
                                ("all",), True),
    "train_steps": MetricSpec("steps the update trained in the invocation its train_seconds "
                              "counts (after a resume, the resumed part)", ("all",), True),
    "compile_seconds": MetricSpec("seconds of the update's first step, which compiles the "
                                  "training step (part of train_seconds)", ("all",), True),
    "train_tokens": MetricSpec("tokens the update trained on (unmasked inputs and targets, "
                               "every step)", ("all",), True),
    "train_flops": MetricSpec("model FLOPs of the update's training (forward and backward, "
                              "every step)", ("all",), True),
    "n_probes": MetricSpec("number of probes behind the category's scores (after any "
                           "max_probes limit)", QA_CATEGORIES, False),
}

# Entity Cloze By Date (Onoe et al. 2022), tw_jax/evaluate/ecbd.py: one cell per model, subset or
# Table 3 group (the category), split, input type and span type (the slice). A subset is an
# ECBD folder's name (the released ``popular`` and years, or whatever ``tw-jax ecbd build``
# wrote), so its categories are a pattern, not a list.
ECBD_REPORT = "tw-jax ecbd report"
ECBD_SLICE: tuple[str, ...] = ("input", "span_type", "split")
_ECBD_CELL = dict(categories=(), slice_keys=ECBD_SLICE,
                  category_pattern=r"[0-9A-Za-z][0-9A-Za-z_.\-]*", tables=ECBD_REPORT)
_SPAN_NLL = "mean NLL over the masked span's tokens only (ECBD §3, Figure 3)"
METRICS.update({
    "ecbd_ppl": MetricSpec(f"ECBD micro span perplexity: exp of the mean over examples of each "
                           f"example's {_SPAN_NLL}", lower_is_better=True, **_ECBD_CELL),
    "ecbd_ppl_entity": MetricSpec(f"ECBD entity-averaged span perplexity, the paper's headline "
                                  f"(ECBD Tables 3, 5, 6): exp of the mean over entities of each "
                                  f"entity's mean {_SPAN_NLL}", lower_is_better=True,
                                  **_ECBD_CELL),
    "ecbd_examples": MetricSpec("number of examples behind the cell's ecbd_ppl and "
                                "ecbd_ppl_entity (those with a span token scored)",
                                lower_is_better=False, **_ECBD_CELL),
    "ecbd_recall_examples": MetricSpec("number of examples behind the cell's "
                                       "ecbd_recall_at_<k> (those the model wrote fillers for)",
                                       lower_is_better=False, **_ECBD_CELL),
    "ecbd_entities": MetricSpec("number of entities of the cell's examples",
                                lower_is_better=False, **_ECBD_CELL),
})
# Metric names with a number in them: display name -> (pattern, spec).
METRIC_PATTERNS: dict[str, tuple[str, MetricSpec]] = {
    "ecbd_recall_at_<k>": (r"ecbd_recall_at_[1-9][0-9]*", MetricSpec(
        "ECBD recall@k (%), micro over examples: the gold span is among the top k distinct "
        "fillers of T5's beam search (ECBD Appendix D, Tables 7 and 8)", lower_is_better=False,
        **_ECBD_CELL)),
}


def metric_spec(metric: object) -> MetricSpec | None:
    """The spec of a metric name, listed in :data:`METRICS` or matching :data:`METRIC_PATTERNS`
    (None: unknown)."""
    if not isinstance(metric, str):
        return None
    if metric in METRICS:
        return METRICS[metric]
    return next((spec for pattern, spec in METRIC_PATTERNS.values()
                 if re.fullmatch(pattern, metric)), None)


_NAME = re.compile(r"^[a-z][a-z0-9_\-]*$")
_SLICE_VALUE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.\-]*$")
FIELDS: tuple[str, ...] = ("method", "trained_through", "eval_month", "category", "metric", "value")
SLICE = "slice"


def method_name(name: str) -> str:
    """``name`` lower-cased as a results ``method``; ``ValueError`` naming it when it is not a
    name (a benchmark that takes a model's name from its folder checks it before scoring)."""
    method = name.lower() if isinstance(name, str) else name
    if not isinstance(method, str) or not _NAME.match(method):
        raise ValueError(f"{name!r} is not a method name: a letter, then letters, digits, "
                         "'_' or '-'")
    return method


@dataclass(frozen=True)
class Result:
    """One measured number; see the module docstring for each field. ``trained_through`` and
    ``eval_month`` may be given as their names (``"0809"``, ``"base"``, ``"-"``): they are read
    into the types, and a name that is neither a period nor its mark is a ``ValueError``."""

    method: str
    trained_through: Trained
    eval_month: Evaluated
    category: str
    metric: str
    value: float
    # Left out of the hash (a dict has none); equal results still hash alike.
    slice: dict[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        try:
            trained = parse_trained(self.trained_through)
        except ValueError as error:
            raise ValueError(f"trained_through: {error}") from None
        try:
            evaluated = parse_evaluated(self.eval_month)
        except ValueError as error:
            raise ValueError(f"eval_month: {error}") from None
        object.__setattr__(self, "trained_through", trained)
        object.__setattr__(self, "eval_month", evaluated)

    @property
    def key(self) -> tuple[Any, ...]:
        """The five fields, then the slice's (name, value) items sorted: a result without a
        slice keeps the five-part key the report indexes by."""
        return (self.method, self.trained_through, self.eval_month, self.category, self.metric,
                *sorted(self.slice.items()))

    def validate(self) -> None:
        """Raise ``ValueError`` saying what is wrong with this result."""
        if not isinstance(self.method, str) or not _NAME.match(self.method):
            raise ValueError(f"method {self.method!r} is not a lower-case name")
        if self.trained_through is not BASE and not isinstance(self.trained_through, Period):
            raise ValueError(f"trained_through {self.trained_through} is neither a period nor "
                             f"{BASE.value!r}")
        if self.eval_month is not NO_MONTH and not isinstance(self.eval_month, Period):
            raise ValueError(f"eval_month {self.eval_month} is neither a period nor "
                             f"{NO_MONTH.value!r}")
        spec = metric_spec(self.metric)
        if spec is None:
            known = ", ".join([*METRICS, *METRIC_PATTERNS])
            raise ValueError(f"unknown metric {self.metric!r} (known: {known})")
        if not spec.takes_category(self.category):
            raise ValueError(
                f"metric {self.metric!r} takes {spec.categories_text()}, not {self.category!r}"
            )
        _check_slice(self.metric, spec, self.slice)
        value = self.value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value
        ):
            raise ValueError(f"value {value!r} is not a finite number")

    def to_json(self) -> str:
        """The JSON line; ``slice`` (sorted) only when there is one, so a line without one is
        exactly what was written before it existed."""
        record = asdict(self)
        record.update(trained_through=str(self.trained_through), eval_month=str(self.eval_month))
        if self.slice:
            record[SLICE] = dict(sorted(self.slice.items()))
        else:
            del record[SLICE]
        return json.dumps(record, ensure_ascii=False, allow_nan=False)


def _check_slice(metric: str, spec: MetricSpec, slice_: object) -> None:
    """The slice is a mapping of lower-case names to values, with exactly the metric's names."""
    if not isinstance(slice_, Mapping):
        raise ValueError(f"slice {slice_!r} is not a mapping of names to values")
    for name, value in slice_.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"slice name {name!r} is not a lower-case name")
        if not isinstance(value, str) or not _SLICE_VALUE.match(value):
            raise ValueError(f"slice {name} value {value!r} is not a name (letters, digits, "
                             "'_', '.' or '-')")
    if sorted(slice_) != sorted(spec.slice_keys):
        takes = f"slice {', '.join(sorted(spec.slice_keys))}" if spec.slice_keys else "no slice"
        has = f"slice {', '.join(sorted(slice_))}" if slice_ else "none"
        raise ValueError(f"metric {metric!r} takes {takes}, not {has}")


def results_path(out_dir: str | os.PathLike[str]) -> paths.Path:
    """``OUT_DIR/results.jsonl``; a path that already names a ``.jsonl`` file is kept. A URL stays
    a URL (the path object is :class:`etils.epath.Path`, equal to a ``pathlib.Path`` locally)."""
    path = paths.as_path(out_dir)
    return path if path.suffix == ".jsonl" else path / RESULTS_FILE


BENCHMARK_FILE = "benchmark.txt"
TWIKI_PROBES = "TWiki-Probes"


def mark_benchmark(out_dir: str | os.PathLike[str], name: str) -> None:
    """Name the probe sets a run folder's results are on (``OUT_DIR/benchmark.txt``), for the
    report's titles: the lines themselves look alike for TemporalWiki and EvolvingQA."""
    path = os.fspath(results_path(out_dir).parent / BENCHMARK_FILE)
    if read_benchmark(out_dir) != name:
        with atomic_open(path, "w", encoding="utf-8") as handle:
            handle.write(name + "\n")


def read_benchmark(out_dir: str | os.PathLike[str]) -> str:
    """The name :func:`mark_benchmark` wrote, else TemporalWiki's probes (the lifelong runner's)."""
    path = os.fspath(results_path(out_dir).parent / BENCHMARK_FILE)
    if not paths.isfile(path):
        return TWIKI_PROBES
    return paths.read_text(path).strip() or TWIKI_PROBES


def append_results(out_dir: str | os.PathLike[str], results: Iterable[Result]) -> paths.Path:
    """Validate, then append ``results`` to ``OUT_DIR/results.jsonl`` in one write
    (:func:`tw_jax.io.jsonl.append_lines`: a torn last line is repaired first, a failed write
    leaves the file as it was, a bucket object is rewritten whole); returns the file. Nothing is
    written when any result is invalid."""
    results = list(results)
    for index, result in enumerate(results):
        try:
            result.validate()
        except ValueError as error:
            raise ValueError(f"result {index} ({result}): {error}") from None
    path = results_path(out_dir)
    if not paths.is_url(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    append_lines(path, [r.to_json() for r in results])
    return path


def write_prediction_rows(folder: str | os.PathLike[str], name: str,
                          rows: Iterable[Mapping[str, Any]], predictions: Iterable[str]) -> str:
    """``folder/<name>.jsonl`` beside the results: each row (its id, or the question and its
    answers) with what the model predicted, for error analysis; ``folder`` is local or a
    ``gs://`` URL. Every benchmark writes its predictions this way."""

    return write_records(paths.join(folder, f"{name}.jsonl"), (
        {**row, "prediction": prediction}
        for row, prediction in zip(rows, predictions, strict=True)))


def parse_line(line: str, path: str, number: int) -> Result:
    """One line of a results file; :class:`DumpError` names the file and line when it is bad."""
    where = f"line {number}"
    record = parse_record(line, path, number, hint="; a torn last line?")
    missing = [f for f in FIELDS if f not in record]
    extra = sorted(set(record) - {*FIELDS, SLICE})
    if missing or extra:
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unexpected {', '.join(extra)}"] if extra else []
        )
        raise DumpError(path, where, "; ".join(problems))
    texts = [f for f in FIELDS[:-1] if not isinstance(record[f], str)]
    if texts:
        raise DumpError(path, where, f"{', '.join(texts)} must be strings")
    slice_ = record.get(SLICE, {})
    if not isinstance(slice_, dict):
        raise DumpError(path, where, f"slice must be a JSON object, not {slice_!r}")
    try:
        result = Result(**{f: record[f] for f in FIELDS}, slice=slice_)
        result.validate()
    except ValueError as error:
        raise DumpError(path, where, str(error)) from None
    return result


def iter_results(path: str | os.PathLike[str]) -> Iterator[Result]:
    """Every result of one file (local or in a bucket) in order (blank lines skipped),
    validated."""
    path = os.fspath(results_path(path))
    if not paths.exists(path):
        raise DumpError(path, None, "no results file (evaluations write results.jsonl)")
    with paths.open_file(path, "r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield parse_line(line, path, number)


def read_results(paths: Iterable[str | os.PathLike[str]]) -> list[Result]:
    """Results of several runs; a later line with the same key replaces an earlier one."""
    latest: dict[tuple[Any, ...], Result] = {}
    for path in paths:
        for result in iter_results(path):
            latest.pop(result.key, None)
            latest[result.key] = result
    return list(latest.values())
