"""Entity Cloze By Date's evaluation and tables as functions: :func:`evaluate` takes an
:class:`EcbdEvalConfig` and :func:`render` the results; ``tw-jax ecbd eval`` and ``report`` only
parse their arguments into them, so a notebook or a sweep runs the same code.

One :func:`evaluate` call reads the ECBD folder (built or released), loads the model once (a
Hugging Face folder, or an orbax MODEL_DIR with the gin files it was trained with), scores span
perplexity (and recall@k) under each input type (:func:`tw_jax.evaluate.ecbd.evaluate_ecbd`),
appends its cells to ``OUT/results.jsonl`` as every benchmark's (rows of
:class:`~tw_jax.evaluate.results.Result`, the mapping in that module's docstring) and writes the
per-example scores (``OUT/ecbd_examples.NAME.jsonl``, NAME the model's name lower-cased, as in
the results). A request that cannot work raises :class:`~tw_jax.errors.UsageError` before the
model is loaded: a model name or a subset that results.jsonl cannot hold included. The tables
read ``results.jsonl``, and the ``ecbd_results.jsonl`` earlier versions wrote
(:func:`tw_jax.evaluate.ecbd.read_results`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field

from tw_jax.errors import UsageError
from tw_jax.evaluate import ecbd
from tw_jax.evaluate.ecbd import (
    GROUPS,
    INPUT_LABELS,
    PPL,
    PPL_ENTITY,
    EcbdOptions,
    EcbdResult,
    EcbdRun,
)
from tw_jax.evaluate.report import Table, fmt
from tw_jax.evaluate.results import method_name
from tw_jax.evaluate.runs import ModelSource, loaded_run
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.io.jsonl import write_records
from tw_jax.tasks.ecbd import INPUTS, read_ecbd, subset_order
from tw_jax.tasks.sources import tfds_active

SPLITS = ("dev", "test")


@dataclass(frozen=True)
class EcbdEvalConfig:
    """One model scored on an ECBD folder (``tw-jax ecbd eval``'s flags)."""

    data: str  # the ECBD folder, built or released
    out: str  # results, per-example scores and tables go here
    model: str | None = None  # a Hugging Face folder; or
    model_dir: str | None = None  # an orbax MODEL_DIR with the gin files that built its model
    gin_files: tuple[str, ...] = ()
    gin_bindings: tuple[str, ...] = ()
    gin_search_paths: tuple[str, ...] = ()
    vocab: str | None = None  # default: the ``model`` folder
    name: str | None = None  # the model's name in the results (default: its folder's)
    subsets: tuple[str, ...] | None = None  # None: every subset
    splits: tuple[str, ...] = ("test",)
    options: EcbdOptions = field(default_factory=EcbdOptions)

    @property
    def run_name(self) -> str:
        """The model's name in the results: ``name``, else its folder's, lower-cased (results'
        method names are; :meth:`check` refuses one that is no name)."""
        return (self.name or posixpath.basename(self.model or self.model_dir or "")).lower()

    def model_source(self) -> ModelSource:
        """The checkpoint to score, loaded like every evaluator's (``evaluate.runs``)."""
        if self.model:
            return ModelSource(hf_dir=self.model)
        if not self.gin_files or not self.vocab:
            raise UsageError("--model-dir needs --gin_file (the model's) and --vocab")
        return ModelSource(model_dir=self.model_dir, gin_files=list(self.gin_files),
                           gin_bindings=list(self.gin_bindings),
                           gin_search_paths=list(self.gin_search_paths))

    def check(self) -> None:
        """Every request that cannot work, in one line, before anything is read."""
        if bool(self.model) == bool(self.model_dir):
            raise UsageError("give one of --model (a Hugging Face folder) and --model-dir")
        try:
            method_name(self.run_name)
        except ValueError as error:
            raise UsageError(f"model name (--name, default the model's folder name): {error}"
                             ) from None
        unknown = [t for t in self.options.input_types if t not in INPUTS]
        if unknown:
            raise UsageError(f"unknown --inputs {unknown}; known: {', '.join(INPUTS)}")
        if any(s not in SPLITS for s in self.splits):
            raise UsageError(f"--splits takes {' / '.join(SPLITS)}, got {list(self.splits)}")


@dataclass
class EcbdOutcome:
    name: str
    run: EcbdRun  # results, per-example records, notes
    results_file: str  # OUT/results.jsonl, the cells appended


def evaluate(config: EcbdEvalConfig) -> EcbdOutcome:
    """Score the model; append the results and write the per-example scores (module
    docstring). A broken ECBD file raises :class:`~tw_jax.errors.DumpError` naming it."""
    config.check()
    # the examples of the ecbd TFDS datasets where the switch is on (tasks.sources.use_tfds)
    data = read_ecbd(config.data, config.subsets, config.splits, from_tfds=tfds_active())
    if not any(data.values()):
        raise UsageError(f"{config.data}: no examples for splits {list(config.splits)}"
                         + (f" and subsets {list(config.subsets)}" if config.subsets else ""))
    try:
        ecbd.check_names(config.run_name, {subset for subset, _ in data})
    except ValueError as error:
        raise UsageError(f"{config.data}: {error}") from None
    source = config.model_source()
    with loaded_run(source) as loaded:
        vocabulary = loaded.model.load_vocabulary(config.vocab or config.model)
        run = ecbd.evaluate_ecbd(loaded.module, loaded.params, vocabulary, data,
                                 config.run_name, config.options)
    results_file = ecbd.append_results(config.out, run.results)
    write_records(paths.join(config.out, f"ecbd_examples.{config.run_name}.jsonl"), run.records)
    return EcbdOutcome(config.run_name, run, results_file)


# --- tables (ECBD Tables 3, 5, 6, 7, 8) ----------------------------------------------------


def _columns(results: Sequence[EcbdResult], split: str, groups: bool) -> list[str]:
    found = {r.subset for r in results if r.split == split}
    if groups:
        return [s for s in ("popular", *GROUPS) if s in found]
    return sorted((s for s in found if s not in GROUPS), key=subset_order)


def _table(results: Sequence[EcbdResult], split: str, metric: str, columns: Sequence[str],
           span_types: Sequence[str], name: str, title: str) -> Table | None:
    values = {(r.model, r.subset, r.input, r.span_type): r.value
              for r in results if r.split == split and r.metric == metric}
    cells = [(c, t) for c in columns for t in span_types]
    short = {"all": "", "NP": " NP", "RANDOM": " RAND"}
    headers = ["model", "input"] + [f"{c.upper() if c == 'popular' else c}{short[t]}"
                                    for c, t in cells]
    rows = []
    digits = 1 if metric.startswith("recall") else 2
    for model in sorted({k[0] for k in values}):
        inputs = [i for i in INPUT_LABELS if any(k[0] == model and k[2] == i for k in values)]
        for input_type in inputs:
            rows.append([model, INPUT_LABELS[input_type]] + [
                fmt(values.get((model, c, input_type, t)), digits) for c, t in cells])
        for other in ("random_def", "definition"):
            if other in inputs and "original" in inputs:
                deltas = []
                for c, t in cells:
                    a, b = values.get((model, c, "original", t)), values.get((model, c, other, t))
                    deltas.append("-" if a is None or b is None else f"{b - a:+.{digits}f}")
                label = "RAND." if other == "random_def" else "DEF."
                rows.append([model, f"Δ(ORIG. → {label})"] + deltas)
    return Table(name, title, headers, rows) if rows else None


def ecbd_tables(results: Sequence[EcbdResult]) -> list[Table]:
    """The paper's tables for every split and metric present in ``results``."""
    tables = []
    for split in SPLITS:
        metrics = {r.metric for r in results if r.split == split}
        groups, subsets = _columns(results, split, True), _columns(results, split, False)
        recalls = sorted(m for m in metrics if m.startswith("recall_at_"))
        specs = [
            ("table3", PPL_ENTITY, groups, ("all",), "entity-averaged perplexity by group "
             "(ECBD Table 3)"),
            ("table5", PPL_ENTITY, subsets, ("all",), "entity-averaged perplexity per subset "
             "(ECBD Table 5)"),
            ("table5_micro", PPL, subsets, ("all",), "micro perplexity per subset"),
            ("table6", PPL_ENTITY, subsets, ("NP", "RANDOM"), "entity-averaged perplexity per "
             "span type (ECBD Table 6)"),
        ]
        for metric in recalls:
            k = metric.rsplit("_", 1)[1]
            specs += [("table7", metric, subsets, ("all",), f"recall@{k} (%) (ECBD Table 7)"),
                      ("table8", metric, subsets, ("NP", "RANDOM"),
                       f"recall@{k} (%) per span type (ECBD Table 8)")]
        for name, metric, columns, span_types, title in specs:
            if metric in metrics and columns:
                table = _table(results, split, metric, columns, span_types,
                               f"ecbd_{name}_{split}", f"{title}, {split}")
                if table is not None:
                    tables.append(table)
    return tables


def render(results: Sequence[EcbdResult], out: str | None = None) -> str:
    """The tables as Markdown; with ``out``, also ``out/ecbd_report.md`` and one CSV per table
    in ``out/ecbd_tables/`` (what ``tw-jax ecbd eval`` and ``report`` print and write)."""
    tables = ecbd_tables(results)
    text = "\n".join(t.markdown() for t in tables) or "no ECBD results to tabulate\n"
    if out is None:
        return text
    with atomic_open(paths.join(out, "ecbd_report.md"), "w", encoding="utf-8") as handle:
        handle.write(text)
    for table in tables:
        with atomic_open(paths.join(out, "ecbd_tables", f"{table.name}.csv"), "w",
                         encoding="utf-8") as handle:
            handle.write(table.csv())
    return text
