"""EvolvingQA's evaluation as a function: :func:`evaluate` takes an :class:`EvalConfig` and
returns what it scored; ``tw-jax evolvingqa eval`` only parses its arguments into the config
(as Levanter's ``main(config)``), so a notebook or a sweep calls the same code the command runs.

One call: the month's QA sets are read (:func:`qa_sets`), the checkpoint is loaded once, each set
is answered and scored (:mod:`tw_jax.evaluate.evolvingqa`), the results are appended to
``OUT/results.jsonl`` and the predictions written under ``OUT/predictions/<method>.<trained>.<month>/``.
With :class:`OpenBook` the questions are first followed by their retrieved passages
(:mod:`tw_jax.evaluate.open_book`; the month's index built or reused as ``retrieve`` does it).
A request that cannot work raises :class:`~tw_jax.errors.UsageError` before any model is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tw_jax.errors import UsageError
from tw_jax.evaluate import evolvingqa as eqa
from tw_jax.evaluate import open_book
from tw_jax.evaluate.results import append_results, mark_benchmark
from tw_jax.evaluate.runs import ModelSource, loaded_run
from tw_jax.io import paths
from tw_jax.io.atomic import write_json
from tw_jax.models import model_for
from tw_jax.preprocess.evolvingqa import layout
from tw_jax.preprocess.evolvingqa.sources import no_source_counts
from tw_jax.retrieval import index
from tw_jax.retrieval.options import RetrieverSettings
from tw_jax.retrieval.run import SCORED
from tw_jax.tasks.evolvingqa import EDITED, NEW, UNCHANGED, find_qa_files, task_name
from tw_jax.tasks.vocab import t5_path


def qa_sets(qa: str, month: str, wanted: Sequence[str], *, label: str | None = None,
            max_questions: int | None = None) -> dict[str, list[dict[str, str]]]:
    """Set → rows of the month's QA files in ``qa`` (``new_<label>.csv`` …, label default the
    month), the first ``max_questions`` of each; a missing folder or file is one line."""
    if not paths.exists(qa):
        raise UsageError(f"{qa}: no QA folder (run tw-jax evolvingqa generate, or give --qa)")
    label = label or month
    files = {f.task: f for f in find_qa_files(qa)}
    names = {UNCHANGED: task_name(UNCHANGED), NEW: task_name(NEW, label),
             EDITED: task_name(EDITED, label)}
    missing = [names[s] for s in wanted if names[s] not in files]
    if missing:
        raise UsageError(f"{qa} has no {', '.join(missing)} "
                         f"(found: {', '.join(files) or 'nothing'})")
    return {s: files[names[s]].load()[:max_questions] for s in wanted}


def checked_sets(wanted: Sequence[str], known: Sequence[str]) -> tuple[str, ...]:
    """``wanted`` when every name is a known set and there is at least one."""
    unknown = [s for s in wanted if s not in known]
    if unknown or not wanted:
        raise UsageError(f"unknown set(s) {unknown}; choose from {', '.join(known)}")
    return tuple(wanted)


@dataclass(frozen=True)
class OpenBook:
    """Open-book reading: each question followed by its top ``k`` passages of the month's index
    in ``data`` (the build folder), the reader's input cut to ``input_length`` tokens."""

    data: str
    retriever: RetrieverSettings = field(default_factory=RetrieverSettings)
    k: int = open_book.DEFAULT_K
    input_length: int = open_book.DEFAULT_INPUT_LENGTH
    reader: str = open_book.INITIAL_READER  # the reader checkpoint's method
    rebuild: bool = False  # rebuild the month's index even when its inputs are unchanged


@dataclass(frozen=True)
class EvalConfig:
    """One checkpoint scored on one time step's QA sets (``tw-jax evolvingqa eval``'s flags)."""

    checkpoint: str  # MODEL_DIR, step folder or Hugging Face folder
    month: str  # the time step: the results' eval_month
    out: str  # results.jsonl and predictions/ go here
    method: str = "initial"  # the results' method name (closed book)
    qa: str | None = None  # the QA folder or zip; default DATA/qa of ``data``
    data: str | None = None  # the build folder (tw-jax evolvingqa build --out)
    label: str | None = None  # the sets' file label (default: the month)
    trained_through: str | None = None  # default: base for the initial reader, else the month
    sets: tuple[str, ...] = eqa.SETS
    max_questions: int | None = None
    batch_size: int = 32
    max_answer_tokens: int = eqa.MAX_ANSWER_TOKENS
    gin_files: tuple[str, ...] = ()  # after evolvingqa_qa.gin: a method, a model, a run size
    gin_bindings: tuple[str, ...] = ()
    gin_search_paths: tuple[str, ...] = ()
    t5_vocab: str | None = None  # default $TW_JAX_T5_VOCAB, else DATA/vocab/t5/spiece.model
    open_book: OpenBook | None = None  # None: closed book

    @property
    def reader(self) -> str:
        return self.method if self.open_book is None else self.open_book.reader

    @property
    def result_method(self) -> str:
        """Open book: the results name the retriever (``bm25``, or ``<reader>-bm25``)."""
        if self.open_book is None:
            return self.method
        return open_book.result_method(self.open_book.retriever.name, self.open_book.reader)

    @property
    def trained(self) -> str:
        return self.trained_through or ("base" if self.reader == "initial" else self.month)

    def qa_folder(self) -> str:
        folder = self.qa or (layout.qa_dir(self.data) if self.data else None)
        if folder is None:
            raise UsageError("needs --qa QA (or --data DATA, whose qa/ folder is read)")
        return folder

    def check(self) -> None:
        """Every request that cannot work, in one line, before anything is read."""
        checked_sets(self.sets, eqa.SETS)
        book = self.open_book
        if book is not None and not book.data:
            raise UsageError(f"--method {book.retriever.name} (open book) needs --data DATA, "
                             "the build folder whose month index is searched")
        if book is not None and (book.k < 1 or book.input_length < 1):
            raise UsageError(f"--k and --input-length must be at least 1, got {book.k} and "
                             f"{book.input_length}")


@dataclass
class OpenBookOutcome:
    """What open-book reading found: the index, the reader's input budget and, per reported
    set, answer recall@k, the answer in the reader's input and the share of inputs cut."""

    index: index.MonthIndex
    budget: int
    figures: dict[str, dict[str, Any]]


@dataclass
class EvalOutcome:
    config: EvalConfig
    scored: list[eqa.SetScores]
    results_path: str
    results: int  # lines appended
    predictions: str  # the predictions folder
    open_book: OpenBookOutcome | None = None

    def lines(self) -> list[str]:
        """What the command prints after scoring: Table 1's rows, the open-book figures."""
        config = self.config
        out = [f"EvolvingQA {config.result_method} trained through {config.trained}, time step "
               f"{config.month}:", eqa.format_table(self.scored)]
        book = self.open_book
        if book is not None and config.open_book is not None:
            k = config.open_book.k
            out.insert(0, f"open book: reader {config.reader}, top {k} "
                          f"{config.open_book.retriever.name} passages of {config.month}'s "
                          f"index, input cut to {book.budget} tokens")
            out.extend(_figures_line(name, figures, k) for name, figures in book.figures.items())
        out.append(f"{self.results} results appended to {self.results_path}; predictions in "
                   f"{self.predictions}")
        return out


def _figures_line(name: str, figures: Mapping[str, Any], k: int) -> str:
    rate = {key: "n/a" if value is None else f"{value:.3f}" for key, value in figures.items()}
    dropped = figures.get("no_source_article")
    count = (f"{figures['questions']} questions, {dropped} dropped at generation: no source "
             "article" if dropped else f"{figures['questions']} questions")
    return (f"{name}: answer recall@{k} {rate[f'answer_recall@{k}']}, answer in the reader's "
            f"input {rate['answer_in_input']}, inputs cut {rate['truncated']} ({count})")


def index_line(month: index.MonthIndex, name: str, month_pair: str) -> str:
    """The line ``retrieve`` and open-book ``eval`` print once the month's index is ready."""
    return (f"{name} index of {month_pair}: {len(month.passages)} passages, "
            f"{'reused' if month.reused else 'built'} in {month.seconds:.2f} s ({month.folder})")


def evaluate(config: EvalConfig, echo: Callable[[str], None] = print) -> EvalOutcome:
    """Score ``config.checkpoint`` on the month's sets; append and write (module docstring).
    ``echo`` gets the progress lines a command prints while it works (the index's)."""
    config.check()
    qa_folder = config.qa_folder()
    rows = qa_sets(qa_folder, config.month, config.sets, label=config.label,
                   max_questions=config.max_questions)
    book = config.open_book
    retrieved: dict[str, Any] = {}
    if book is not None:
        retriever = book.retriever.build()
        month = index.month_index(book.data, config.month, retriever, force=book.rebuild)
        echo(index_line(month, book.retriever.name, config.month))
        retrieved = open_book.retrieve(month, rows, book.k)
    source = ModelSource(model_dir=None if config.checkpoint is None
                         else paths.resolve(config.checkpoint),
                         gin_files=[layout.STAGE_GIN["qa"], *config.gin_files],
                         gin_bindings=list(config.gin_bindings),
                         gin_search_paths=list(config.gin_search_paths))
    inputs: dict[str, list[open_book.ReaderInput]] = {}
    scored = []
    with loaded_run(source) as loaded:
        module, params = loaded.module, loaded.params
        vocabulary = model_for(module).load_vocabulary(t5_path(None, config.t5_vocab))
        if book is not None:
            budget = open_book.input_budget(module, book.input_length, config.max_answer_tokens)
            count = open_book.token_counter(module, vocabulary)
            inputs = {name: open_book.reader_inputs(retrieved[name], count_tokens=count,
                                                    max_tokens=budget) for name in config.sets}
        for name in config.sets:
            scored.append(eqa.score_set(
                module, params, vocabulary, name, rows[name],
                max_new_tokens=config.max_answer_tokens, batch_size=config.batch_size,
                inputs=[i.text for i in inputs[name]] if inputs else None))
    method, trained = config.result_method, config.trained
    results = eqa.to_results(method, trained, config.month, scored)
    path = str(append_results(config.out, results))
    mark_benchmark(config.out, "EvolvingQA")
    folder = paths.join(config.out, "predictions", f"{method}.{trained}.{config.month}")
    for scores in scored:
        given = rows[scores.name]
        eqa.write_predictions(folder, scores, open_book.prediction_rows(given, inputs[scores.name])
                              if inputs else given)
    outcome = EvalOutcome(config, scored, path, len(results), folder)
    if book is not None:
        found = open_book.figures(retrieved, inputs, book.k)
        no_source = no_source_counts(qa_folder, config.label or config.month) or {}
        for name, figures in found.items():
            if SCORED[name][0] in no_source:
                figures["no_source_article"] = no_source[SCORED[name][0]]
        write_json(paths.join(folder, "open_book.json"), {
            "retriever": book.retriever.name, "settings": month.retriever.settings(),
            "k": book.k, "input_length": budget, "reader": config.reader,
            "checkpoint": str(config.checkpoint),
            "index": {"folder": month.folder, "fingerprint": month.fingerprint,
                      "passages": len(month.passages), "reused": month.reused},
            "sets": found})
        outcome.open_book = OpenBookOutcome(month, budget, found)
    return outcome


@dataclass(frozen=True)
class RetrieveConfig:
    """Retrieval alone (``tw-jax evolvingqa retrieve``): the month's index searched for its QA
    sets, answer recall@1/5/20 written to ``OUT/retrieval.json``."""

    data: str  # the build folder whose month index is searched
    month: str
    out: str
    retriever: RetrieverSettings = field(default_factory=RetrieverSettings)
    qa: str | None = None  # default DATA/qa
    label: str | None = None
    k: int = 20  # passages kept per question in retrieved_<set>.jsonl
    sets: tuple[str, ...] = eqa.SETS
    max_questions: int | None = None
    rebuild: bool = False


def retrieve(config: RetrieveConfig, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Search and score every set (:func:`tw_jax.retrieval.run.retrieve_month`); its report."""
    from tw_jax.retrieval import run

    checked_sets(config.sets, run.SETS)
    if config.k < 1:
        raise UsageError(f"--k must be at least 1, got {config.k}")
    retriever = config.retriever.build()
    qa = config.qa or layout.qa_dir(config.data)
    sets = qa_sets(qa, config.month, config.sets, label=config.label,
                   max_questions=config.max_questions)
    month = index.month_index(config.data, config.month, retriever, force=config.rebuild)
    echo(index_line(month, config.retriever.name, config.month))
    return run.retrieve_month(month, sets, config.k, config.out,
                              details={"data": config.data, "qa": qa},
                              no_source=no_source_counts(qa, config.label or config.month))
