"""The lifelong runner: train period after period, evaluate every update on the probes.

For a chain of periods ``p_1, p_2, …`` (each starting where the one before ended: ``0809, 0910,
1011`` in the 2021 layout, ``2024-11_2024-12, 2024-12_2025-01`` across a year, or the 19 days of
twice-monthly dumps; :mod:`tw_jax.time`), one method (named by its gin file, ``kadapter.gin`` →
``kadapter``):

1. INITIAL. The model every method starts from. With ``initial_checkpoint`` it is that checkpoint
   as is (an orbax MODEL_DIR or step folder, or a Hugging Face folder). Otherwise it is trained
   once on the full snapshot ``p_1`` starts from (``twiki_full_08_{objective}``,
   ``twiki_full_202411_{objective}``) into ``OUT/checkpoints/initial/<snapshot>/``, from the
   gin's ``INITIAL_CHECKPOINT_PATH`` when set (the paper continued GPT-2 Large on the 08
   snapshot) or from scratch. Its gin files are ``initial_gin_files``, by default the method's
   files with the first (the method's experiment file) replaced by ``initial.gin`` so the model
   and run files still apply. INITIAL is scored on every period's probes as method ``initial``
   with ``trained_through="base"``, so relative figures need no separate run.
2. Each period ``p_i``: train from ``p_{i-1}``'s checkpoint (``p_1``: from INITIAL) on the
   method's data: the DiffSet ``twiki_diffset_<p_i>_{objective}`` (diff, vanilla, kadapter,
   lora, modular, recadam), the new snapshot whole ``twiki_full_<new>_{objective}`` (full) or
   the Mix-Review mixture ``twiki_mixreview_<p_i>_{objective}`` (mixreview), into
   ``OUT/checkpoints/<method>/<p_i>/`` (its MODEL_DIR). Then score the checkpoint on ``p_i``'s
   probes, or with ``eval_matrix`` on every period's probes (TemporalWiki Fig. 5).
3. Open book (methods ``bm25``, ``dpr``: a retriever's name) trains nothing: for each period,
   INITIAL reads that period's probes with the passages the retriever found for them in its new
   snapshot (``DATA/<p_i>/probes_<retriever>/``, written by ``tw-jax probe-contexts``), recorded
   as trained through ``p_i``, so the report puts "update the index" next to "update the
   weights". Only the probe groups (``ppl*``, ``qa``) apply.

The periods are read once (:func:`~tw_jax.lifelong.options.check_months`) and spelled as the
data folder spells them (``2021-08_2021-09`` finds ``DATA/0809/``), so folders, task names and
results rows are the data's. How long an update trains, who trains it and how a rerun resumes:

How long. By default ``TRAIN_STEPS`` steps, the same for every method. With the gin macro
``TRAIN_EPOCHS`` (in a gin file, or ``--gin.TRAIN_EPOCHS=1``) each update is sized in passes over
its own training data instead: ``steps = ceil(examples · epochs / batch)``, ``examples`` counted
after preprocessing at the run's feature lengths (packed GPT-2 blocks, T5 SSM examples) and
``batch`` the ``BATCH_SIZE`` of one step (:mod:`tw_jax.lifelong.runs`). For a Mix-Review mixture
an epoch is the new data and that epoch's old data (:meth:`MixReviewSchedule.mixed_examples`),
so one pass covers new + old as the reference code's loader does, not DIFF's step count.
TemporalWiki, Section 5.2: "we iterate through the training data only once" (``TRAIN_EPOCHS =
1``). INITIAL keeps ``TRAIN_STEPS`` (which the trainer's gin still needs set).

Who trains. ``options.trainer`` (:mod:`tw_jax.lifelong.updates`): ``tw-jax train`` in this
process by default, or the real ``python -m t5x.train`` (``tw-jax lifelong --trainer t5x``,
:mod:`tw_jax.t5x.lifelong`), updates chained on T5X's checkpoints. Either leaves a tw_jax
checkpoint in the update's MODEL_DIR, which is what is scored below.

Scores go to ``OUT/results.jsonl`` (:mod:`tw_jax.evaluate.results`): per checkpoint, evaluated
period, category (``unchanged``, ``updated``, ``new``, ``deleted``, and ``changed`` = UPDATED and
NEW rows together) and metric, with ``n_probes`` (how many probes each category had), plus
``train_seconds``, ``train_steps`` and ``compile_seconds`` (the first step) per update.
``metrics`` names groups (:mod:`tw_jax.evaluate.month_eval`): ``ppl`` (the default: per-instance
probe perplexity averaged over instances), ``ppl_object``, ``ppl_cloze``, ``qa`` (EM/F1 of
decoded objects, against the previous object too), ``rank`` (previous vs new object), ``propn``
(proper-noun perplexity of DiffSet and NON-DiffSet blocks), and ``lighttune``: a copy of the
checkpoint is light-tuned on the evaluated period's light-tuning sets into ``OUT/lighttuned/``
and scored as ``lt_ppl``, ``lt_em``, ``lt_f1`` (TemporalWiki Tables 4 and 6). A category whose
CSV has no rows is skipped and reported in the summary. Beside the results, each probe
perplexity's per-probe scores go to ``OUT/per_probe/`` (:mod:`tw_jax.evaluate.per_probe`),
written first, for the report's test of a difference to INITIAL.

Resuming (:mod:`tw_jax.lifelong.state`). A rerun trains and appends nothing for finished periods
and scores only the metric groups a period lacks; an interrupted training resumes from its
latest checkpoint, and SIGTERM or SIGINT during a training (a preempted TPU VM) saves a
checkpoint and stops the run with :class:`TrainingPreempted` before anything of that period is
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tw_jax.tasks
from tw_jax.evaluate.groups import (
    INITIAL,
    LIGHTTUNE,
    LIGHTTUNED_GROUPS,
    LIGHTTUNED_METRICS,
    METRIC_GROUPS,
    OPEN_BOOK,
    OPEN_BOOK_GROUPS,
)
from tw_jax.evaluate.month_eval import BlockCache, EvalSettings, evaluate_month
from tw_jax.evaluate.per_probe import PerProbe, per_probe_path, write_file
from tw_jax.evaluate.probe_contexts import output_dir as contexts_dir
from tw_jax.evaluate.results import Result, append_results, results_path
from tw_jax.evaluate.runs import ModelSource, loaded_run
from tw_jax.io import paths
from tw_jax.lifelong.options import (
    LifelongError,
    LifelongOptions,
    check_months,
    default_initial_gin_files,
    method_name,
    training_task,
)
from tw_jax.lifelong.run_record import (
    check_run,
    data_fingerprint,
    run_settings,
    training_settings,
)
from tw_jax.lifelong.runs import (
    EPOCHS_MACRO,
    ParsedRuns,
    across_updates,
    parse_runs,
    sized,
    training_examples,
    update_epochs,
    update_steps,
)
from tw_jax.lifelong.state import UpdateState, read_state, state_file, write_state
from tw_jax.lifelong.updates import UpdateTrainer
from tw_jax.models import model_for
from tw_jax.preprocess.probes.probe_csv import read_probe_csv
from tw_jax.preprocess.runners.accounting import STATS_FILE
from tw_jax.runtime import task_data
from tw_jax.runtime.model_tokenizer import use_model_tokenizer
from tw_jax.tasks import LazyVocabulary, names
from tw_jax.tasks.layout import discover, resolve_data_dir
from tw_jax.tasks.probes import LIGHTTUNING_MIX
from tw_jax.time import BASE, Period, Trained, label
from tw_jax.train import trainer
from tw_jax.train.config import TrainConfig
from tw_jax.train.preemption import TrainingPreempted
from tw_jax.train.schedules import make_schedule

log = logging.getLogger(__name__)

__all__ = [
    "EPOCHS_MACRO", "INITIAL", "LifelongError", "LifelongOptions", "LifelongRun",
    "LifelongSummary", "ParsedRuns", "check_months", "default_initial_gin_files",
    "lighttuning_rows", "method_name", "parse_runs", "run_lifelong", "training_examples",
    "training_task", "update_epochs", "update_steps",
]

# what one checkpoint scored on one period: (category, metric, value) and per-probe scores
Scored = tuple[list[tuple[str, str, float]], PerProbe]


@dataclass
class LifelongSummary:
    """What one invocation did: the updates trained (INITIAL as ``base``), the (checkpoint,
    period) pairs scored, the results appended and what was skipped."""

    method: str
    results: paths.Path
    trained: list[Trained] = field(default_factory=list)
    evaluated: list[tuple[Trained, Period]] = field(default_factory=list)
    appended: int = 0
    skipped: dict[str, str] = field(default_factory=dict)

    def trained_text(self) -> str:
        """The updates trained, as a person reads them (``initial, 0809, 0910``)."""
        return ", ".join(INITIAL if t is BASE else label(t) for t in self.trained)


def lighttuning_rows(data_dir: str, period: Period) -> int:
    """How many rows the period's light-tuning sets hold (UNCHANGED, UPDATED, NEW)."""

    files = [paths.join(data_dir, period.name, "probes", f"lighttuning_{c}.csv")
             for c in LIGHTTUNING_MIX]
    return sum(len(read_probe_csv(p)) for p in files if paths.isfile(p))


def _plain_vocabulary(vocabulary: Any) -> Any:
    """The real vocabulary behind a task's lazy one (the scorer needs its tokenizer)."""

    return vocabulary.vocabulary if isinstance(vocabulary, LazyVocabulary) else vocabulary


@dataclass(frozen=True)
class _Update:
    """One update being recorded: who (``method``), through what (``trained_through``), with
    which run's model (``run``), and the task whose vocabulary its scores read."""

    method: str
    trained_through: Trained
    run: TrainConfig
    vocabulary_task: str
    source: str | None = None  # the retriever of an open-book update


class LifelongRun:
    """One method's lifelong run over a chain of periods (the module docstring). Built from its
    options, which it checks before anything trains; :meth:`run` runs or resumes it."""

    def __init__(self, options: LifelongOptions) -> None:
        self.periods = check_months(options.months)
        self.method = method_name(options.gin_files, options.method)
        if options.max_probes is not None and options.max_probes < 1:
            raise LifelongError(f"--max-probes must be positive, got {options.max_probes}")
        unknown = [m for m in options.metrics if m not in METRIC_GROUPS]
        if unknown:
            raise LifelongError(f"unknown metric(s) {unknown}; known: {', '.join(METRIC_GROUPS)}")
        self.trains = self.method not in (INITIAL, *OPEN_BOOK)
        if self.trains:  # the training data is known before any gin is parsed
            for period in self.periods:
                training_task(self.method, period, options.train_on)
        # Checkpoints are found by absolute path; a URL stays a URL (never pathlib: gs:// → gs:/).
        self.options = dataclasses.replace(options, out_dir=paths.resolve(options.out_dir))
        self.summary = LifelongSummary(self.method, results_path(self.options.out_dir))
        self._blocks: BlockCache | None = None

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> LifelongSummary:
        """Run (or resume) the schedule; see the module docstring."""
        runs = parse_runs(self.options, self.method)
        found = resolve_data_dir(self.options.data_dir or runs.data_dir)
        if not found:
            raise LifelongError("no data folder: pass --data (or set DATA_DIR / $TW_JAX_DATA_DIR)")
        self.data_dir = found
        self.runs = runs.with_data_dir(found)
        self.options = dataclasses.replace(self.options, data_dir=found)
        self.periods = self._spelled(self.periods)
        self._check_rerun()
        tw_jax.tasks.register_all(found)  # gin may name the tasks' vocabularies
        self._register_model_tokenizer()

        initial = self._initial()
        if self.method == INITIAL:
            return self.summary
        if self.method in OPEN_BOOK:
            self._open_book(initial)
            return self.summary
        assert self.runs.method is not None  # parse_runs builds it for every method that trains
        previous = initial
        steps_before = 0  # optimizer updates the chain's earlier updates applied
        for number, period in enumerate(self.periods):
            previous = self._update(period, previous, steps_before, number)
            steps_before += (previous.step or 0) // max(self.runs.method.accumulate_steps, 1)
        return self.summary

    def _register_model_tokenizer(self) -> None:
        """A model with a tokenizer of its own (a Hugging Face folder's) has its tasks from
        the start: INITIAL is scored before anything trains (which would register them)."""
        start = self.options.initial_checkpoint
        for run in (self.runs.initial, self.runs.method):
            if run is not None:
                use_model_tokenizer(run.model_config, initial_checkpoint=str(
                    start or run.initial_checkpoint_path or "") or None)

    def _check_rerun(self) -> None:
        """A rerun resumes only the run it recorded (:mod:`tw_jax.lifelong.run_record`)."""
        layout, options = discover(self.data_dir), self.options
        first = self.periods[0].old
        fingerprints = {first.name: data_fingerprint([paths.join(self.data_dir, first.name,
                                                                 "full")])}
        for period in self.periods:
            pair = layout.pair(period)
            if pair is not None:
                fingerprints[period.name] = data_fingerprint([pair.diffset, pair.probes,
                                                              pair.ssm])
        run = self.runs.initial if self.method == INITIAL else self.runs.method
        settings = run_settings(
            method=self.method, training=training_settings(run), fingerprints=fingerprints,
            periods=self.periods,
            max_probes=options.max_probes, trainer=options.trainer.name,
            train_on=options.train_on,
            initial_checkpoint=None if options.initial_checkpoint is None
            else str(options.initial_checkpoint))
        check_run(options.out_dir, self.method, settings)

    def _spelled(self, periods: Sequence[Period]) -> list[Period]:
        """The periods as the data folder spells them; a period without a folder is an error."""
        layout = discover(self.data_dir)
        spelled = []
        for period in periods:
            pair = layout.pair(period)
            if pair is None:
                folder = paths.join(self.data_dir, period.name)
                raise LifelongError(f"{folder}: no data for {period.label} (run tw-jax build, "
                                    "or tw-jax diffset/probes)")
            spelled.append(pair.period)
        return spelled

    def _initial(self) -> UpdateState:
        """Make sure INITIAL exists and is scored; returns its state (``model_dir``: its
        checkpoint)."""
        options, first = self.options, self.periods[0].old
        files = options.initial_gin_files or default_initial_gin_files(options.gin_files)
        state_path = state_file(options.out_dir, INITIAL, BASE)
        state = read_state(state_path)
        pretrained = options.initial_checkpoint
        if state is not None and pretrained and state.model_dir != str(pretrained):
            raise LifelongError(
                f"{state_path}: INITIAL here is {state.model_dir}, not {pretrained}; "
                f"use another --out or delete that file"
            )
        if state is None and pretrained:
            state = UpdateState(model_dir=str(pretrained), given=True, seconds_recorded=True)
        elif state is None:
            model_dir = paths.join(options.out_dir, "checkpoints", INITIAL, first.name)
            state = options.trainer.train(self.runs.initial, files, model_dir,
                                          names.full(first), None, self.data_dir)
            self.summary.trained.append(BASE)
            write_state(state_path, state)
        elif not state.given:
            check_trainer(state_path, state, options.trainer)
        update = _Update(INITIAL, BASE, self.runs.initial, names.diffset(self.periods[0]))
        return self._record(update, state_path, state, self.periods)

    def _update(self, period: Period, previous: UpdateState, steps_before: int = 0,
                updates_before: int = 0) -> UpdateState:
        """Train (unless recorded) and score the method's update through ``period``, the
        update after ``updates_before`` others that applied ``steps_before`` optimizer updates
        (a schedule across updates reads them: :func:`~tw_jax.lifelong.runs.across_updates`)."""
        options = self.options
        assert self.runs.method is not None
        task = training_task(self.method, period, options.train_on)
        state_path = state_file(options.out_dir, self.method, period)
        state = read_state(state_path)
        if state is None:
            model_dir = paths.join(options.out_dir, "checkpoints", self.method, period.name)
            run = across_updates(sized(self.runs.method, task, self.runs.epochs),
                                 steps_before, updates_before)
            state = options.trainer.train(run, options.gin_files, model_dir, task, previous,
                                          self.data_dir)
            self.summary.trained.append(period)
            write_state(state_path, state)
        else:
            check_trainer(state_path, state, options.trainer)
        targets = self.periods if options.eval_matrix else [period]
        update = _Update(self.method, period, self.runs.method, task)
        return self._record(update, state_path, state, targets)

    def _open_book(self, initial: UpdateState) -> None:
        """Retrieval instead of training: INITIAL reads each period's probes with the passages
        the method (a retriever) found for them in that period's snapshot (``tw-jax
        probe-contexts``), recorded as trained through that period: update the index, not the
        weights (EvolvingQA's DPR row, for TemporalWiki)."""
        method = self.method
        for group in self.options.metrics:
            if group not in OPEN_BOOK_GROUPS:
                self.summary.skipped[f"{method}/{group}"] = (
                    "open book changes the reader's input, not its weights: INITIAL's figure")
        for period in self.periods:
            marker = paths.join(contexts_dir(self.data_dir, period, method), STATS_FILE)
            if not paths.isfile(marker):
                raise LifelongError(
                    f"{marker}: no {method} contexts for {period.label} (run tw-jax "
                    f"probe-contexts --data {self.data_dir} --month {period.name} "
                    f"--retriever {method})")
            state_path = state_file(self.options.out_dir, method, period)
            state = read_state(state_path) or UpdateState(
                model_dir=initial.model_dir, reader=INITIAL, retriever=method,
                train_seconds=_index_seconds(marker))
            update = _Update(method, period, self.runs.initial, names.diffset(self.periods[0]),
                             source=method)
            self._record(update, state_path, state, [period])

    # --- scoring ---------------------------------------------------------------------------

    def _record(self, update: _Update, state_path: str, state: UpdateState,
                periods: Sequence[Period]) -> UpdateState:
        """Append the missing scores (and the training time) of one update, after their
        per-probe scores, then its state; an open-book update scores its probe groups only."""
        requested = list(self.options.metrics)
        if update.source is not None:
            requested = [g for g in requested if g in OPEN_BOOK_GROUPS]
        missing = state.missing_groups(periods, requested)
        pending = [p for p in periods if missing[p]]
        results: list[Result] = []
        if pending:
            scored = self._score(update, state.model_dir, {p: missing[p] for p in pending})
            for period in pending:
                if LIGHTTUNE in missing[period]:
                    self._add_lighttuned(update, state.model_dir, period, scored)
            for period, (triples, probes) in scored.items():
                if probes:
                    write_file(per_probe_path(self.options.out_dir, update.method,
                                              update.trained_through, period), probes)
                results += [Result(update.method, update.trained_through, period, category,
                                   metric, value) for category, metric, value in triples]
            self.summary.evaluated += [(update.trained_through, p) for p in pending]
        if not state.seconds_recorded:
            results += state.time_results(update.method, update.trained_through)
        if not results and not pending:
            return state
        append_results(self.options.out_dir, results)
        self.summary.appended += len(results)
        state = state.with_scored({p: missing[p] for p in pending})
        write_state(state_path, state)
        return state

    def _score(self, update: _Update, model_dir: str, groups: Mapping[Period, Sequence[str]],
               rename: Mapping[str, str] | None = None) -> dict[Period, Scored]:
        """``{period: ([(category, metric, value)], per-probe scores)}`` of one checkpoint for
        each period's groups (``rename``: result metric names, light-tuning's ``lt_*``)."""
        config = update.run.model_config
        vocabulary = _plain_vocabulary(
            task_data.vocabulary(task_data.task_name(update.vocabulary_task, config)))
        scored: dict[Period, Scored] = {}
        with loaded_run(ModelSource(model_dir=model_dir), config, update.run.mesh_shape) as loaded:
            for period, wanted in groups.items():
                settings = self._settings(wanted)
                if not settings.groups:
                    continue
                found = evaluate_month(
                    loaded.model, loaded.params, vocabulary, self.data_dir, period, settings,
                    self._block_cache(settings), mesh=loaded.run.mesh, source=update.source)
                for category, reason in found.skipped.items():
                    self.summary.skipped[f"{period.label}/{category}"] = reason
                values = found.values if rename else {**found.values, **found.probe_counts()}
                keep = rename or {m: m for _, m in values}
                scored[period] = (
                    [(c, keep[m], v) for (c, m), v in sorted(values.items()) if m in keep],
                    {(c, keep[m]): s for (c, m), s in found.probes.items() if m in keep})
        return scored

    def _add_lighttuned(self, update: _Update, model_dir: str, period: Period,
                        scored: dict[Period, Scored]) -> None:
        """Light-tune a copy of the checkpoint on ``period`` and add its ``lt_*`` scores."""
        tuned = self._lighttune(update, model_dir, period)
        if tuned is None:
            return
        lt = self._score(update, tuned, {period: LIGHTTUNED_GROUPS}, rename=LIGHTTUNED_METRICS)
        tuned_triples, tuned_probes = lt.get(period, ([], {}))
        triples, probes = scored.setdefault(period, ([], {}))
        triples += tuned_triples
        probes.update(tuned_probes)

    def _lighttune(self, update: _Update, model_dir: str, period: Period) -> str | None:
        """Light-tune a copy of ``model_dir`` on ``period``'s light-tuning sets (TemporalWiki
        Appendix C: one epoch, every parameter trainable, LR 1e-5, batch 32, lengths 25);
        returns the MODEL_DIR of the light-tuned model, or None when there is nothing to tune
        on."""
        options, run = self.options, update.run
        rows = lighttuning_rows(self.data_dir, period)
        if rows == 0:
            self.summary.skipped[f"{period.label}/lighttune"] = (
                "no light-tuning rows (lighttuning_*.csv)")
            return None
        batch = min(options.lighttune_batch_size, rows)
        steps = -(-rows // batch)
        target = paths.join(options.out_dir, "lighttuned", update.method,
                            str(update.trained_through), period.name)
        kind = names.qa_suffix(model_for(run.model_config).objective)
        length = options.lighttune_length
        result = trainer.train(run.replace(
            model_config=dataclasses.replace(run.model_config, freeze="none"),
            model_dir=target, mixture_or_task_name=names.lighttuning(period, "all", kind),
            initial_checkpoint_path=model_dir, train_steps=steps, batch_size=batch,
            schedule_fn=functools.partial(make_schedule, "constant", options.lighttune_lr),
            task_feature_lengths={"inputs": length, "targets": length},
            checkpoint_period=steps, keep_checkpoints=1,
            loss_terms=(),  # the paper's plain fine-tuning, whatever the method adds to its loss
        ))
        if result.preempted:
            raise TrainingPreempted(result.preempted, str(target), result.step)
        return str(target)

    def _settings(self, groups: Sequence[str]) -> EvalSettings:
        options = self.options
        return EvalSettings(
            groups=tuple(g for g in groups if g != LIGHTTUNE),
            batch_size=options.eval_batch_size, max_probes=options.max_probes,
            max_new_tokens=options.max_new_tokens, beam_size=options.beam_size,
            propn_instances=options.propn_instances, propn_length=options.propn_length,
            spacy_model=options.spacy_model,
        )

    def _block_cache(self, settings: EvalSettings) -> BlockCache:
        """One cache of proper-noun blocks per run, kept under ``OUT/propn_blocks``."""
        if self._blocks is None:
            self._blocks = BlockCache(paths.join(self.options.out_dir, "propn_blocks"), settings)
        return self._blocks


def check_trainer(state_path: str, state: UpdateState, trainer: UpdateTrainer) -> None:
    """A recorded update trained by another trainer than this run's is not continued: one
    chain, one trainer."""
    if state.trained_by != trainer.name:
        raise LifelongError(
            f"{state_path}: this update was trained by {state.trained_by}, and this run trains "
            f"with {trainer.name}; use another --out, or --trainer {state.trained_by}")


def _index_seconds(contexts_marker: str) -> float:
    """What updating the index of a period cost: the build time its completion marker records
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
    return LifelongRun(options).run()
