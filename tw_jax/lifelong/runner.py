"""The lifelong runner: train month after month, evaluate every update on the probes.

For the month pairs ``m_1 < m_2 < …`` (a chain: each pair starts where the previous one ended,
``0809, 0910, 1011``), one method (named by its gin file, ``kadapter.gin`` → ``kadapter``):

1. INITIAL. The model every method starts from. With ``initial_checkpoint`` it is that checkpoint
   as is (an orbax MODEL_DIR or step folder, or a Hugging Face folder). Otherwise it is trained
   once on the full snapshot of ``m_1``'s old month (``twiki_full_08_{objective}``) into
   ``OUT/checkpoints/initial/<MM>/``, from the gin's ``INITIAL_CHECKPOINT_PATH`` when set (the
   paper continued GPT-2 Large on the 08 snapshot) or from scratch. Its gin files are
   ``initial_gin_files``, by default the method's files with the first (the method's experiment
   file) replaced by ``initial.gin`` so the model and run files still apply. INITIAL is scored
   on every month's probes as method ``initial`` with ``trained_through="base"``, so relative
   figures need no separate run.
2. Each month ``m_i``: train from ``m_{i-1}``'s checkpoint (``m_1``: from INITIAL) on the
   method's data: the DiffSet ``twiki_diffset_<m_i>_{objective}`` (diff, vanilla, kadapter,
   lora, modular, recadam), the new month's full snapshot ``twiki_full_<new MM>_{objective}``
   (full) or the Mix-Review mixture ``twiki_mixreview_<m_i>_{objective}`` (mixreview), into
   ``OUT/checkpoints/<method>/<m_i>/`` (its MODEL_DIR). Then score the checkpoint on ``m_i``'s
   probes, or with ``eval_matrix`` on every month's probes (TemporalWiki Fig. 5).
3. Open book (methods ``bm25``, ``dpr``: a retriever's name) trains nothing: for each month,
   INITIAL reads that month's probes with the passages the retriever found for them in that
   month's snapshot (``DATA/<m_i>/probes_<retriever>/``, written by ``tw-jax
   probe-contexts``), recorded as trained through ``m_i``, so the report puts "update the
   index" next to "update the weights". Only the probe groups (``ppl*``, ``qa``) apply.

How long an update trains. By default ``TRAIN_STEPS`` steps, the same for every method. With the
gin macro ``TRAIN_EPOCHS`` (in a gin file, or ``--gin.TRAIN_EPOCHS=1``) each monthly update is
sized in passes over its own training data instead: ``steps = ceil(examples · epochs / batch)``,
``examples`` counted after preprocessing at the run's feature lengths (packed GPT-2 blocks, T5
SSM examples) and ``batch`` the ``BATCH_SIZE`` of one step. For a Mix-Review mixture an epoch is
the new data and that epoch's old data (:meth:`MixReviewSchedule.mixed_examples`), so one pass
covers new + old as the reference code's loader does, not DIFF's step count. TemporalWiki,
Section 5.2: "we iterate through the training data only once" (``TRAIN_EPOCHS = 1``). INITIAL
keeps ``TRAIN_STEPS`` (which the trainer's gin still needs set).

Who trains. ``options.trainer`` (:mod:`tw_jax.lifelong.updates`): ``tw-jax train`` in this
process by default, or the real ``python -m t5x.train`` (``tw-jax lifelong --trainer t5x``,
:mod:`tw_jax.t5x.lifelong`), months chained on T5X's checkpoints. Either leaves a tw_jax
checkpoint in the update's MODEL_DIR, which is what is scored below.

Scores go to ``OUT/results.jsonl`` (:mod:`tw_jax.evaluate.results`): per checkpoint, evaluated
month, category (``unchanged``, ``updated``, ``new``, ``deleted``, and ``changed`` = UPDATED and
NEW rows together) and metric, with ``n_probes`` (how many probes each category had), plus
``train_seconds``, ``train_steps`` and ``compile_seconds`` (the first step) per update. ``metrics`` names groups
(:mod:`tw_jax.evaluate.month_eval`): ``ppl`` (the default: per-instance probe perplexity
averaged over instances), ``ppl_object``, ``ppl_cloze``, ``qa`` (EM/F1 of decoded objects,
against the previous object too), ``rank`` (previous vs new object), ``propn`` (proper-noun
perplexity of DiffSet and NON-DiffSet blocks), and ``lighttune``: a copy of the checkpoint is
light-tuned on the evaluated month's light-tuning sets into ``OUT/lighttuned/`` and scored as
``lt_ppl``, ``lt_em``, ``lt_f1`` (TemporalWiki Tables 4 and 6). A category whose CSV has no
rows is skipped and reported in the summary. Beside the results, each probe perplexity's
per-probe scores go to ``OUT/per_probe/`` (:mod:`tw_jax.evaluate.per_probe`), written first,
for the report's test of a difference to INITIAL.

Resuming (:mod:`tw_jax.lifelong.state`). A rerun trains and appends nothing for finished
months and scores only the metric groups a month lacks; an interrupted training resumes from its
latest checkpoint, and SIGTERM or SIGINT during a training (a preempted TPU VM) saves a
checkpoint and stops the run with :class:`TrainingPreempted` before anything of that month is
recorded; an interrupted evaluation is redone (a repeated line replaces the earlier one).

Places. ``OUT`` and the data folder may be local or in a bucket (``--out gs://…``, ``--data
gs://…``): every path is kept as a string (a URL stays a URL; a local path is made absolute),
the runner's own files (results, state, the proper-noun block cache) go through
:mod:`tw_jax.io.paths`, and MODEL_DIRs and the data folder are handed to the trainer and the
evaluator as those strings. In a bucket, ``results.jsonl`` is rewritten whole on each append
(:mod:`tw_jax.evaluate.results`) and the state files are written atomically as objects.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tw_jax.tasks
from tw_jax.evaluate.groups import (
    DIFFSET,
    FULL,
    INITIAL,
    LIGHTTUNE,
    LIGHTTUNED_GROUPS,
    LIGHTTUNED_METRICS,
    METRIC_GROUPS,
    MIXREVIEW,
    OPEN_BOOK,
    OPEN_BOOK_GROUPS,
    TRAINS_ON,
)
from tw_jax.evaluate.month_eval import BlockCache, EvalSettings, evaluate_month
from tw_jax.evaluate.per_probe import PerProbe, per_probe_path, write_file
from tw_jax.evaluate.probe_contexts import output_dir as contexts_dir
from tw_jax.evaluate.results import BASE, NO_MONTH, Result, append_results, results_path
from tw_jax.evaluate.runs import ModelSource, loaded_run
from tw_jax.io import paths
from tw_jax.io.atomic import write_json
from tw_jax.lifelong.state import mark_scored, missing_groups, read_state, state_file
from tw_jax.lifelong.updates import TwJaxTrainer, UpdateTrainer, trained_by
from tw_jax.models import model_for
from tw_jax.preprocess.probes.probe_csv import read_probe_csv
from tw_jax.preprocess.runners.accounting import STATS_FILE
from tw_jax.runtime import gin_setup, task_data
from tw_jax.tasks import LazyVocabulary
from tw_jax.tasks.layout import resolve_data_dir
from tw_jax.tasks.probes import LIGHTTUNING_MIX, QA_SUFFIX
from tw_jax.train import trainer
from tw_jax.train.config import TrainConfig
from tw_jax.train.gin_config import train_config
from tw_jax.train.preemption import TrainingPreempted
from tw_jax.train.schedules import make_schedule

log = logging.getLogger(__name__)

_PAIR = re.compile(r"^\d{4}$")
_NAME = re.compile(r"^[a-z][a-z0-9_\-]*$")
# what one checkpoint scored on one month: (category, metric, value) and per-probe scores
Scored = tuple[list[tuple[str, str, float]], PerProbe]


class LifelongError(ValueError):
    """A lifelong run that cannot start: bad months, unknown method, missing data."""


@dataclass(frozen=True)
class LifelongOptions:
    """Everything a lifelong run needs (the CLI's arguments); :func:`run_lifelong` resolves the
    places into a copy, never into the caller's options."""

    gin_files: list[str]
    months: list[str]
    out_dir: str  # local path or URL (run_lifelong resolves it)
    data_dir: str | None = None
    gin_bindings: list[str] = field(default_factory=list)
    gin_search_paths: list[str] = field(default_factory=list)
    method: str | None = None
    train_on: str | None = None
    eval_matrix: bool = False
    initial_checkpoint: str | None = None
    initial_gin_files: list[str] | None = None
    metrics: list[str] = field(default_factory=lambda: ["ppl"])
    eval_batch_size: int = 32
    max_probes: int | None = None
    max_new_tokens: int = 10
    beam_size: int = 1
    propn_instances: int = 10_000
    propn_length: int = 512
    spacy_model: str = "en_core_web_sm"
    lighttune_lr: float = 1e-5
    lighttune_batch_size: int = 32
    lighttune_length: int = 25
    trainer: UpdateTrainer = field(default_factory=TwJaxTrainer)


@dataclass
class LifelongSummary:
    """What one invocation did: updates trained, (checkpoint, month) pairs scored, skips."""

    method: str
    results: paths.Path
    trained: list[str] = field(default_factory=list)
    evaluated: list[tuple[str, str]] = field(default_factory=list)
    appended: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    _blocks: BlockCache | None = None

    def block_cache(self, options: LifelongOptions, settings: EvalSettings) -> BlockCache:
        """One cache of proper-noun blocks per run, kept under ``OUT/propn_blocks``."""
        if self._blocks is None:
            self._blocks = BlockCache(paths.join(options.out_dir, "propn_blocks"), settings)
        return self._blocks


def method_name(gin_files: Sequence[str], method: str | None = None) -> str:
    """``method``, else the stem of the first gin file (``kadapter.gin`` → ``kadapter``)."""
    name = method or (paths.as_path(gin_files[0]).stem if gin_files else "")
    if not _NAME.match(name):
        raise LifelongError(f"method name {name!r} is not a lower-case name; pass --method")
    return name


def check_months(months: Sequence[str]) -> list[str]:
    """The month pairs as given, checked to be ``MMMM`` ids forming a chain (0809, 0910, …)."""
    months = [m.strip() for m in months if m.strip()]
    if not months:
        raise LifelongError("no months given (e.g. --months 0809,0910,1011)")
    for month in months:
        if not _PAIR.match(month):
            raise LifelongError(f"month {month!r} is not a MMMM pair id such as 0809")
    for before, after in zip(months, months[1:], strict=False):
        if after[:2] != before[2:]:
            raise LifelongError(
                f"months {before} then {after}: a lifelong chain continues from the month the "
                f"previous pair ends in ({before[2:]}..)"
            )
    return months


def training_task(method: str, month: str, train_on: str | None = None) -> str:
    """The seqio task or mixture ``method`` trains on for ``month`` (``{objective}`` kept)."""
    kind = train_on or TRAINS_ON.get(method)
    if kind == DIFFSET:
        return f"twiki_diffset_{month}_{{objective}}"
    if kind == FULL:
        return f"twiki_full_{month[2:]}_{{objective}}"
    if kind == MIXREVIEW:
        return f"twiki_mixreview_{month}_{{objective}}"
    raise LifelongError(
        f"method {method!r}: unknown training data; name a known method "
        f"({', '.join(TRAINS_ON)}) or pass --train-on {DIFFSET}|{FULL}|{MIXREVIEW}"
    )


EPOCHS_MACRO = "TRAIN_EPOCHS"


def update_epochs() -> float | None:
    """``TRAIN_EPOCHS`` of the parsed gin configuration (None: size updates by TRAIN_STEPS)."""
    value = gin_setup.macro(EPOCHS_MACRO)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0 < value < float("inf")):
        raise LifelongError(f"{EPOCHS_MACRO} must be a positive number of passes, got {value!r}")
    return float(value)


def training_examples(task: str, lengths: Mapping[str, int], epochs: float) -> float:
    """Examples in ``epochs`` passes over ``task`` (a concrete task or mixture name) at the
    feature ``lengths``; a Mix-Review mixture's passes include each epoch's old examples."""
    import seqio

    provider = seqio.get_mixture_or_task(task)
    if isinstance(provider, tw_jax.tasks.MixReviewMixture):
        return provider.examples(epochs, lengths)
    stream = task_data.task_dataset(task, lengths, shuffle=False, num_epochs=1)
    count = int(stream.reduce(0, lambda n, _: n + 1))
    if count == 0:
        raise LifelongError(f"{task}: no training examples, so TRAIN_EPOCHS gives no steps")
    return epochs * count


def update_steps(task: str, lengths: Mapping[str, int], batch_size: int, epochs: float) -> int:
    """Steps of one update that passes ``epochs`` times over ``task``:
    ``ceil(examples · epochs / batch_size)``."""
    return max(1, math.ceil(training_examples(task, lengths, epochs) / batch_size))


def _sized(run: TrainConfig, task: str, epochs: float | None) -> TrainConfig:
    """``run`` with TRAIN_STEPS replaced by ``epochs`` (``TRAIN_EPOCHS``) passes over ``task``,
    when set."""
    if epochs is None:
        return run
    concrete = task_data.task_name(task, run.model_config)
    steps = update_steps(concrete, run.task_feature_lengths, run.batch_size, epochs)
    log.info("%s: %g pass(es) at batch %d = %d steps", concrete, epochs, run.batch_size, steps)
    return run.replace(train_steps=steps)


def default_initial_gin_files(gin_files: Sequence[str]) -> list[str]:
    """The method's gin files with the first replaced by ``initial.gin``."""
    return ["initial.gin", *gin_files[1:]]


# --- gin ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedRuns:
    """The runs the gin files describe, parsed once when the run starts and passed down as
    typed Python: ``initial`` (INITIAL's files) and ``method`` (the method's files, None for a
    method that trains nothing), each with its own gin record for its MODEL_DIRs; the method's
    ``TRAIN_EPOCHS`` and ``DATA_DIR``."""

    initial: TrainConfig
    method: TrainConfig | None
    epochs: float | None
    data_dir: str | None

    def with_data_dir(self, data_dir: str) -> ParsedRuns:
        """The runs reading ``data_dir`` (``--data``, which gin never saw): each MODEL_DIR's
        config.gin records it as DATA_DIR, so ``tw-jax eval --gin.MODEL_DIR=...`` needs no more."""

        def reading(run: TrainConfig | None) -> TrainConfig | None:
            if run is None or run.gin_record is None:
                return run
            return run.replace(gin_record=run.gin_record.with_macros(DATA_DIR=data_dir))

        return dataclasses.replace(self, initial=reading(self.initial),
                                   method=reading(self.method), data_dir=data_dir)


def parse_runs(options: LifelongOptions, method: str) -> ParsedRuns:
    """Parse INITIAL's gin files, then the method's (whose state gin keeps: task registration
    reads its bindings). Each update sets its own MODEL_DIR, task and start point on these."""
    initial_files = options.initial_gin_files or default_initial_gin_files(options.gin_files)
    # Not strict: a --gin macro of the method's files may be unused by INITIAL's (the method's
    # parse below checks them).
    gin_setup.parse(initial_files, options.gin_bindings, options.gin_search_paths,
                    strict_macros=False)
    initial = train_config()
    # No gin binding refers to TRAIN_EPOCHS (the runner reads it), so gin's check of unused
    # macros must not count it.
    gin_setup.parse(options.gin_files, options.gin_bindings, options.gin_search_paths,
                    runner_macros=(EPOCHS_MACRO,))
    trains = method not in (INITIAL, *OPEN_BOOK)
    return ParsedRuns(initial, train_config() if trains else None, update_epochs(),
                      gin_setup.macro("DATA_DIR"))


# --- evaluation ---------------------------------------------------------------------------


def _plain_vocabulary(vocabulary: Any) -> Any:
    """The real vocabulary behind a task's lazy one (the scorer needs its tokenizer)."""

    return vocabulary.vocabulary if isinstance(vocabulary, LazyVocabulary) else vocabulary


def _settings(options: LifelongOptions, groups: Sequence[str]) -> EvalSettings:
    return EvalSettings(
        groups=tuple(g for g in groups if g != LIGHTTUNE), batch_size=options.eval_batch_size,
        max_probes=options.max_probes, max_new_tokens=options.max_new_tokens,
        beam_size=options.beam_size, propn_instances=options.propn_instances,
        propn_length=options.propn_length, spacy_model=options.spacy_model,
    )


def _score(
    options: LifelongOptions, run: TrainConfig, model_dir: str, months: Sequence[str],
    groups: Mapping[str, Sequence[str]], data_dir: str, vocabulary_task: str,
    summary: LifelongSummary, rename: Mapping[str, str] | None = None,
    source: str | None = None,
) -> dict[str, Scored]:
    """``{month: ([(category, metric, value)], per-probe scores)}`` of one checkpoint for each
    month's groups (``rename``: result metric names, light-tuning's ``lt_*``)."""

    config = run.model_config
    vocabulary = _plain_vocabulary(task_data.vocabulary(task_data.task_name(vocabulary_task, config)))
    scored: dict[str, Scored] = {}
    with loaded_run(ModelSource(model_dir=model_dir), config, run.mesh_shape) as loaded:
        for month in months:
            settings = _settings(options, groups[month])
            if not settings.groups:
                continue
            found = evaluate_month(
                loaded.model, loaded.params, vocabulary, data_dir, month, settings,
                summary.block_cache(options, settings), mesh=loaded.run.mesh, source=source)
            for category, reason in found.skipped.items():
                summary.skipped[f"{month}/{category}"] = reason
            values = found.values if rename else {**found.values, **found.probe_counts()}
            keep = rename or {m: m for _, m in values}
            scored[month] = (
                [(c, keep[m], v) for (c, m), v in sorted(values.items()) if m in keep],
                {(c, keep[m]): s for (c, m), s in found.probes.items() if m in keep})
    return scored


def lighttuning_rows(data_dir: str, month: str) -> int:
    """How many rows the month's light-tuning sets hold (UNCHANGED, UPDATED, NEW)."""

    files = [paths.join(data_dir, month, "probes", f"lighttuning_{c}.csv")
             for c in LIGHTTUNING_MIX]
    return sum(len(read_probe_csv(p)) for p in files if paths.exists(p))


def _lighttune(
    options: LifelongOptions, run: TrainConfig, model_dir: str, method: str,
    trained_through: str, month: str, data_dir: str, summary: LifelongSummary,
) -> str | None:
    """Light-tune a copy of ``model_dir`` on ``month``'s light-tuning sets (TemporalWiki
    Appendix C: one epoch, every parameter trainable, LR 1e-5, batch 32, lengths 25); returns
    the MODEL_DIR of the light-tuned model, or None when there is nothing to tune on."""

    rows = lighttuning_rows(data_dir, month)
    if rows == 0:
        summary.skipped[f"{month}/lighttune"] = "no light-tuning rows (lighttuning_*.csv)"
        return None
    batch = min(options.lighttune_batch_size, rows)
    steps = -(-rows // batch)
    target = paths.join(options.out_dir, "lighttuned", method, trained_through, month)
    kind = QA_SUFFIX[model_for(run.model_config).objective]
    length = options.lighttune_length
    result = trainer.train(run.replace(
        model_config=dataclasses.replace(run.model_config, freeze="none"),
        model_dir=target, mixture_or_task_name=f"twiki_lighttuning_{month}_all{kind}",
        initial_checkpoint_path=model_dir, train_steps=steps, batch_size=batch,
        schedule_fn=functools.partial(make_schedule, "constant", options.lighttune_lr),
        task_feature_lengths={"inputs": length, "targets": length},
        checkpoint_period=steps, keep_checkpoints=1,
    ))
    if result.preempted:
        raise TrainingPreempted(result.preempted, str(target), result.step)
    return str(target)


def _record(
    options: LifelongOptions, run: TrainConfig, state_path: str, state: dict[str, Any],
    method: str, trained_through: str, months: Sequence[str], data_dir: str,
    vocabulary_task: str, summary: LifelongSummary, source: str | None = None,
) -> None:
    """Append the missing scores (and the training time) of one update, after their per-probe
    scores, then its state; ``source``: the retriever of an open-book method (its probe groups
    only)."""
    requested = list(options.metrics)
    if source is not None:
        requested = [g for g in requested if g in OPEN_BOOK_GROUPS]
    missing = missing_groups(state, months, requested)
    pending = [m for m in months if missing[m]]
    results: list[Result] = []
    if pending:
        scored = _score(options, run, state["model_dir"], pending, missing, data_dir,
                        vocabulary_task, summary, source=source)
        for month in pending:
            if LIGHTTUNE not in missing[month]:
                continue
            tuned = _lighttune(options, run, state["model_dir"], method, trained_through,
                               month, data_dir, summary)
            if tuned is not None:
                lt = _score(options, run, tuned, [month], {month: LIGHTTUNED_GROUPS},
                            data_dir, vocabulary_task, summary, rename=LIGHTTUNED_METRICS)
                tuned_triples, tuned_probes = lt.get(month, ([], {}))
                triples, probes = scored.setdefault(month, ([], {}))
                triples += tuned_triples
                probes.update(tuned_probes)
        for month, (triples, probes) in scored.items():
            if probes:
                write_file(per_probe_path(options.out_dir, method, trained_through, month),
                           probes)
            results += [Result(method, trained_through, month, category, metric, value)
                        for category, metric, value in triples]
        summary.evaluated += [(trained_through, m) for m in pending]
    if not state.get("seconds_recorded", True):
        results += _time_results(method, trained_through, state)
    if not results and not pending:
        return
    append_results(options.out_dir, results)
    summary.appended += len(results)
    mark_scored(state_path, state, {m: missing[m] for m in pending})


def _time_results(method: str, trained_through: str, state: Mapping[str, Any]) -> list[Result]:
    """An update's ``train_seconds``, with its ``train_steps`` and ``compile_seconds`` (the
    first step) where the state has them, so the report can compare methods' speed apart from
    compilation and step counts."""
    times = {"train_seconds": state["train_seconds"]}
    if "step" in state:
        times["train_steps"] = state["step"] - state.get("resumed_from_step", 0)
    if "compile_seconds" in state:
        times["compile_seconds"] = state["compile_seconds"]
    return [Result(method, trained_through, NO_MONTH, "all", metric, float(value))
            for metric, value in times.items()]


# --- the run ------------------------------------------------------------------------------


def _data_dir(options: LifelongOptions, runs: ParsedRuns) -> str:
    found = resolve_data_dir(options.data_dir or runs.data_dir)
    if not found:
        raise LifelongError("no data folder: pass --data (or set DATA_DIR / $TW_JAX_DATA_DIR)")
    return found


def _register_tasks(data_dir: str) -> None:
    """Register the data folder's tasks (gin may name their vocabularies)."""

    tw_jax.tasks.register_all(data_dir)


def _initial_step(
    options: LifelongOptions, run: TrainConfig, months: Sequence[str], data_dir: str,
    summary: LifelongSummary,
) -> dict[str, Any]:
    """Make sure INITIAL (``run``) exists and is scored; returns its state (``model_dir``: its
    checkpoint)."""
    files = options.initial_gin_files or default_initial_gin_files(options.gin_files)
    first = months[0][:2]
    task = f"twiki_full_{first}_{{objective}}"
    state_path = state_file(options.out_dir, INITIAL, BASE)
    state = read_state(state_path)
    pretrained = options.initial_checkpoint
    if state is not None and pretrained and state.get("model_dir") != str(pretrained):
        raise LifelongError(
            f"{state_path}: INITIAL here is {state.get('model_dir')}, not {pretrained}; "
            f"use another --out or delete that file"
        )
    if state is None and pretrained:
        state = {"model_dir": str(pretrained), "given": True, "evaluated": [],
                 "seconds_recorded": True}
    elif state is None:
        model_dir = paths.join(options.out_dir, "checkpoints", INITIAL, first)
        state = options.trainer.train(run, files, model_dir, task, None, data_dir)
        summary.trained.append(INITIAL)
        write_json(state_path, state)
    elif not state.get("given"):
        _check_trainer(state_path, state, options.trainer)
    _record(options, run, state_path, state, INITIAL, BASE, months, data_dir,
            f"twiki_diffset_{months[0]}_{{objective}}", summary)
    return state


def _check_trainer(state_path: str, state: Mapping[str, Any], trainer: UpdateTrainer) -> None:
    """A recorded update trained by another trainer than this run's is not continued: one
    chain, one trainer."""
    if trained_by(state) != trainer.name:
        raise LifelongError(
            f"{state_path}: this update was trained by {trained_by(state)}, and this run trains "
            f"with {trainer.name}; use another --out, or --trainer {trained_by(state)}")


def _open_book(options: LifelongOptions, run: TrainConfig, method: str, months: Sequence[str],
               data_dir: str, initial: str, summary: LifelongSummary) -> None:
    """Retrieval instead of training: INITIAL reads each month's probes with the passages
    ``method`` (a retriever) found for them in that month's snapshot (``tw-jax
    probe-contexts``), recorded as trained through that month: update the index, not the
    weights (EvolvingQA's DPR row, for TemporalWiki); ``run``: INITIAL's."""
    for group in options.metrics:
        if group not in OPEN_BOOK_GROUPS:
            summary.skipped[f"{method}/{group}"] = (
                "open book changes the reader's input, not its weights: INITIAL's figure")
    for month in months:
        marker = paths.join(contexts_dir(data_dir, month, method), STATS_FILE)
        if not paths.isfile(marker):
            raise LifelongError(
                f"{marker}: no {method} contexts for {month} (run tw-jax probe-contexts "
                f"--data {data_dir} --month {month} --retriever {method})")
        state_path = state_file(options.out_dir, method, month)
        state = read_state(state_path) or {
            "model_dir": initial, "reader": INITIAL, "retriever": method, "evaluated": [],
            "train_seconds": _index_seconds(marker), "seconds_recorded": False}
        _record(options, run, state_path, state, method, month, [month], data_dir,
                f"twiki_diffset_{months[0]}_{{objective}}", summary, source=method)


def _index_seconds(contexts_marker: str) -> float:
    """What updating the index of a month cost: the build time its completion marker records
    (the open-book methods' ``train_seconds``, the Time column next to the trained methods)."""
    stats = json.loads(paths.read_text(contexts_marker))
    index = stats.get("index", {})
    if not index.get("reused", True):
        return float(index["seconds"])
    marker = paths.join(str(index.get("folder", "")), "index.json")
    if index.get("folder") and paths.isfile(marker):
        return float(json.loads(paths.read_text(marker)).get("build_seconds", 0.0))
    return 0.0


def run_lifelong(options: LifelongOptions) -> LifelongSummary:
    """Run (or resume) the lifelong schedule of one method; see the module docstring."""
    months = check_months(options.months)
    method = method_name(options.gin_files, options.method)
    if options.max_probes is not None and options.max_probes < 1:
        raise LifelongError(f"--max-probes must be positive, got {options.max_probes}")
    unknown = [m for m in options.metrics if m not in METRIC_GROUPS]
    if unknown:
        raise LifelongError(f"unknown metric(s) {unknown}; known: {', '.join(METRIC_GROUPS)}")
    tasks = {} if method in (INITIAL, *OPEN_BOOK) else {
        m: training_task(method, m, options.train_on) for m in months
    }
    # Checkpoints are found by absolute path; a URL stays a URL (never pathlib: gs:// → gs:/).
    options = dataclasses.replace(options, out_dir=paths.resolve(options.out_dir))
    summary = LifelongSummary(method, results_path(options.out_dir))

    runs = parse_runs(options, method)
    data_dir = _data_dir(options, runs)
    runs = runs.with_data_dir(data_dir)
    options = dataclasses.replace(options, data_dir=data_dir)
    _register_tasks(data_dir)
    for month in months:
        folder = paths.join(data_dir, month)
        if not paths.isdir(folder):
            raise LifelongError(f"{folder}: no data for month {month} (run tw-jax diffset/probes)")

    previous = _initial_step(options, runs.initial, months, data_dir, summary)
    if method == INITIAL:
        return summary
    if method in OPEN_BOOK:
        _open_book(options, runs.initial, method, months, data_dir, previous["model_dir"],
                   summary)
        return summary
    assert runs.method is not None  # parse_runs builds it for every method that trains
    for month in months:
        state_path = state_file(options.out_dir, method, month)
        state = read_state(state_path)
        if state is None:
            model_dir = paths.join(options.out_dir, "checkpoints", method, month)
            run = _sized(runs.method, tasks[month], runs.epochs)
            state = options.trainer.train(run, options.gin_files, model_dir, tasks[month],
                                          previous, data_dir)
            summary.trained.append(month)
            write_json(state_path, state)
        else:
            _check_trainer(state_path, state, options.trainer)
        targets = months if options.eval_matrix else [month]
        _record(options, runs.method, state_path, state, method, month, targets,
                data_dir, tasks[month], summary)
        previous = state
    return summary
