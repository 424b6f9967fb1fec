"""The trainer: ``train(config)``, one run of a :class:`~tw_jax.train.config.TrainConfig`.

A run is its config, T5X's ``train`` arguments: model config (with its variant and freeze fields:
the method), the seqio task or mixture, feature lengths, steps, batch size, optimizer and
schedule, mesh shape, checkpoint and log periods, seed, initial checkpoint and MODEL_DIR. Gin
builds it for ``tw-jax train`` (``gin_config.train_config()``: the gin name of its fields is
``tw_jax.train.train``); Python builds or derives it directly. One jitted ``train_step(params, opt_state, step, batch)`` with in/out
shardings from the logical rules runs on one CPU device, a forced-host 8-device mesh or a pod.

Steps. ``train_steps`` counts train steps, one batch each. With ``accumulate_steps = k`` the
optimizer applies an update every ``k`` steps (``optax.MultiSteps``), so schedules get
``train_steps // k`` updates. Checkpoints are taken every ``checkpoint_period`` steps and at the
end; a step's checkpoint holds the state after that many steps.

Resume. If MODEL_DIR has a checkpoint, training continues from the latest one: parameters,
optimizer state (RecAdam's anchor and the loss terms' states included), the tokens trained, the
step (hence the dropout key,
``fold_in(seed, step)``) and the data position (the deterministic stream skips the batches
already consumed). On CPU a run killed at any point and restarted ends bitwise equal to one that
was never interrupted (tests/train/test_resume_sigkill.py kills one with SIGKILL).

Loss terms (``LOSS_TERMS``: EWC, LwF; :mod:`tw_jax.train.loss_terms`) make their state when a
run starts, from its starting parameters and its own batches, and add their values to the token
loss inside the step. A schedule-free run's last checkpoint holds the average ``x``
(:mod:`tw_jax.train.schedule_free`), which is what is scored and what the next update starts
from.

Start. Without a checkpoint in MODEL_DIR, a run starts from ``INITIAL_CHECKPOINT_PATH`` when set:
what the checkpoint lacks starts fresh and is logged; a method's new parameters are expected,
those of the base model refused unless ``ALLOW_NEW_PARAMETERS``
(:func:`~tw_jax.train.resume_check.check_new_parameters`).

Hosts. Every host reads the same global stream of ``batch_size`` examples per step and hands
each of its devices that device's rows (:func:`global_batch`), so the batch of step ``s`` is
the same whatever the number of hosts, and a run checkpointed on 2 hosts continues on 1 along
the same loss curve. The price is that every host runs the whole input pipeline (reading and
tokenising), which is cheap next to the model's step. A batch that does not divide over the
mesh's batch shards (CKL's 60 over 16 chips) is padded with rows that carry no loss.

Preemption. SIGTERM or SIGINT (any host) stops training at a step all hosts agree on, after
saving a checkpoint of it (:mod:`tw_jax.train.preemption`); the summary says ``preempted``.

Full disk. A checkpoint save that fails (its background write, or the part that runs at once)
stops training as soon as it is seen, within a step or two of it, with
:class:`~tw_jax.runtime.checkpoints.CheckpointSaveError` (one line naming the step folder, the
reason and the last good step); what it left is removed, so a rerun with space resumes from the
last good step. Metrics and config files that cannot be written are an ``OutputError`` naming
them.

Divergence. A step whose loss, any gradient or any updated parameter is NaN or infinite
(checked element by element inside the step) stops training with
:class:`TrainingDivergedError` before its state is saved or logged; pending asynchronous saves
are completed first, so the last good checkpoint stays intact and is named in the message.
Hence no checkpoint ever holds non-finite parameters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax

from tw_jax.errors import OutputError
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open
from tw_jax.io.output_claim import claimed
from tw_jax.io.paths import PathLike
from tw_jax.models.sharding import batch_sharding, global_batch, replicated
from tw_jax.models.variants import TRAINABLE
from tw_jax.runtime import checkpoints, distributed
from tw_jax.runtime.run_model import (
    RunModel,
    build_run_model,
    opt_state_shardings,
    with_shardings,
)
from tw_jax.train.config import TrainConfig, TrainSummary, gin_lines
from tw_jax.train.flops import peak_flops_per_device, train_step_flops
from tw_jax.train.loss_terms import (
    LossTerm,
    TermContext,
    check_terms,
    extra_flops,
    saved_states,
)
from tw_jax.train.metrics_log import MetricsLogger
from tw_jax.train.preemption import Preemption
from tw_jax.train.resume_check import (
    check_new_parameters,
    check_resume,
    model_record,
    record_config,
)
from tw_jax.train.schedule_free import EVAL_POINT, eval_params, schedule_free_states, train_params
from tw_jax.train.schedules import make_schedule
from tw_jax.train.steps import make_train_step

log = logging.getLogger(__name__)

class TrainingDivergedError(RuntimeError):
    """A step's loss, gradients or updated parameters were NaN or infinite; training stopped
    without saving that state."""


def gin_config_text(name: str, config: TrainConfig) -> str:
    """The run's gin record (all bindings, or the operative ones: what gin parsed when the config
    was built, :class:`~tw_jax.train.config.GinRecord`), ending with the run's fields that
    Python set after gin (:func:`~tw_jax.train.config.gin_lines`). A config built in Python
    has no gin record: its file lists the fields that differ from the defaults."""
    record = config.gin_record
    text = "" if record is None else (
        record.operative if name == "operative_config.gin" else record.config)
    overrides = gin_lines(config, {} if record is None else record.bound)
    if record is not None:
        overrides = [f"{name} = {value!r}" for name, value in record.macros.items()] + overrides
    if overrides:
        text += "\n# The run's fields as trained (set in Python after gin):\n" + "\n".join(overrides) + "\n"
    return text


def write_gin_config(model_dir: PathLike, name: str, config: TrainConfig) -> None:
    """:func:`gin_config_text` into ``MODEL_DIR/name``, next to the checkpoints."""
    text = gin_config_text(name, config)
    if text.strip() and jax.process_index() == 0:
        with atomic_open(paths.join(model_dir, name), "w", encoding="utf-8") as handle:
            handle.write(text)


def train(config: TrainConfig) -> TrainSummary:
    """Train ``config.model_config`` on ``config.mixture_or_task_name`` (see :class:`TrainConfig`;
    ``tw-jax train`` builds it from gin with ``gin_config.train_config()``)."""
    if config.model_dir is None:
        raise ValueError("model_dir is not set (gin: --gin.MODEL_DIR=...)")
    distributed.initialize()
    _check_arguments(config.train_steps, config.batch_size, config.accumulate_steps,
                     config.checkpoint_period, config.log_period)
    model_dir = paths.resolve(config.model_dir)
    # One run per MODEL_DIR (the first host holds it for all): a second run would interleave
    # checkpoints and metrics lines.
    held = (claimed(model_dir, "tw_jax training") if jax.process_index() == 0
            else contextlib.nullcontext())
    with held:
        return _train(config, model_dir)


def _train(config: TrainConfig, model_dir: str) -> TrainSummary:
    # The input pipeline (seqio on TensorFlow) is imported by a run, not by the module: the
    # compiled step (build_train_step) needs only JAX, so a benchmark or an AOT compile runs
    # where TensorFlow is not installed (tools/bench_gpu.py on an accelerator image).
    from tw_jax.runtime import task_data

    model_config, mixture_or_task_name = config.model_config, config.mixture_or_task_name
    task_feature_lengths, train_steps = config.task_feature_lengths, config.train_steps
    batch_size, accumulate_steps, seed = config.batch_size, config.accumulate_steps, config.seed
    checkpoint_period, log_period = config.checkpoint_period, config.log_period
    paths.makedirs(model_dir)
    mixture_or_task_name = task_data.task_name(mixture_or_task_name, model_config)
    # A model with its own tokenizer: its tasks from the starting folder, and the files kept in
    # MODEL_DIR/tokenizer/ so evaluation and the next update read the same one.
    task_data.ensure_tasks(mixture_or_task_name, model_config, model_dir=model_dir,
                           initial_checkpoint=config.initial_checkpoint_path,
                           keep_tokenizer=jax.process_index() == 0)

    run = build_run_model(model_config, config.mesh_shape, rules=config.axis_rules)
    _check_vocabulary(model_config, mixture_or_task_name)

    train_step = build_train_step(
        run, model_config, optimizer=config.optimizer, schedule_fn=config.schedule_fn,
        train_steps=train_steps, accumulate_steps=accumulate_steps, seed=seed, pack=config.pack,
        loss_terms=config.loss_terms,
    )
    abstract_opt, opt_shardings = train_step.abstract_opt_state, train_step.opt_shardings

    flops = train_step_flops(model_config, batch_size, task_feature_lengths).total  # outside the mesh
    mngr = checkpoints.manager(
        model_dir, keep=config.keep_checkpoints, asynchronous=config.async_checkpoints
    )
    latest = checkpoints.latest_intact_step(mngr)
    if latest is not None:  # another model than the checkpoints': refused, MODEL_DIR untouched
        step_dir = checkpoints.step_dir(mngr, latest)
        check_resume(model_dir, step_dir, model_config, run.abstract_params,
                     checkpoints.saved_params(step_dir))
    fresh: list[str] = []
    checkpoint_dir = paths.join(model_dir, checkpoints.CHECKPOINTS)
    with run.activate():
        if latest is not None:
            params, opt_state, meta = checkpoints.restore(
                mngr, latest, run.abstract_params, with_shardings(abstract_opt, opt_shardings)
            )
            start_step = int(meta["step"])
            tokens_before = meta.get("tokens_trained")
            if meta.get("params") == EVAL_POINT:  # a finished schedule-free run trained on
                params = jax.jit(train_params, out_shardings=run.param_shardings)(
                    opt_state, params)
            if int(meta.get("seed", seed)) != seed:
                raise ValueError(
                    f"{model_dir}: the checkpoint of step {start_step} was trained with seed "
                    f"{meta['seed']}, this run has seed {seed}; resume needs the same seed"
                )
            log.info("resuming from %s at step %d", checkpoint_dir, start_step)
        else:
            start_step, tokens_before = 0, 0
            if config.initial_checkpoint_path:  # initialised only if the checkpoint lacks some
                params, fresh = checkpoints.initial_params(
                    lambda: run.init_params(seed), config.initial_checkpoint_path,
                    run.abstract_params, check=functools.partial(
                        check_new_parameters, allowed=config.allow_new_parameters),
                )
            else:
                params = run.init_params(seed)
            opt_state = _initial_opt_state(train_step, run, params, config,
                                           mixture_or_task_name)
        # The run's record, once its parameters are in hand: a refused start or a restore that
        # failed leaves MODEL_DIR's config.gin as it was.
        config_text = gin_config_text("config.gin", config)
        if config_text.strip() and jax.process_index() == 0:  # as write_gin_config: none, no file
            record_config(model_dir, config_text, latest)

        # The global stream on every host (see the module docstring): host-count independent.
        stream = task_data.batches(
            mixture_or_task_name, task_feature_lengths, batch_size, run.model, seed=seed,
            start_batch=start_step, pack=config.pack, use_cached=config.use_cached,
        )
        logger = MetricsLogger(
            model_dir, total_steps=train_steps, start_step=start_step,
            enabled=jax.process_index() == 0, progress=config.progress,
        )
        device_kind = jax.devices()[0].device_kind
        peak = config.peak_flops
        if peak is None:
            peak = peak_flops_per_device(device_kind)
        saves = checkpoints.Saves(mngr, last_good=latest)  # started, polled, sealed
        metrics: dict[str, float] = {}
        done = start_step
        # Tokens trained (unmasked inputs and targets), counted exactly on the host, carried
        # over a resume in the checkpoint's meta (None: resumed from one that predates it).
        tokens = 0
        preempted: str | None = None
        try:
            with Preemption() as preemption:
                for step in range(start_step, train_steps):
                    started = time.perf_counter()
                    batch = global_batch(next(stream), run.mesh)
                    params, opt_state, out = train_step(params, opt_state, step, batch)
                    loss, grads_ok, params_ok, real = jax.device_get(
                        (out["loss"], out["grads_finite"], out["params_finite"],
                         out["real_tokens"])
                    )
                    elapsed = time.perf_counter() - started
                    problem = _non_finite(float(loss), bool(grads_ok), bool(params_ok),
                                          float(out["grad_norm"]))
                    if problem:
                        saves.finish(done)
                        where = (
                            f"the last good checkpoint is step {saves.last_good} in "
                            f"{checkpoint_dir}" if saves.last_good is not None
                            else "no checkpoint was saved"
                        )
                        raise TrainingDivergedError(
                            f"{problem} at step {step + 1}; training stopped, {where}"
                        )
                    done = step + 1
                    tokens += int(real)
                    if step == start_step:
                        write_gin_config(model_dir, "operative_config.gin", config)
                    if done % log_period == 0 or done == train_steps or step == start_step:
                        metrics = _host_metrics(out, elapsed, train_step.learning_rate(step),
                                                flops, peak)
                        logger.log(done, metrics)
                    logger.advance(done, metrics)
                    saves.poll(done)  # a failed save stops training here, not a period later
                    stop = preemption.reached(done) and done < train_steps
                    if done % checkpoint_period == 0 or done == train_steps or stop:
                        meta = {"step": done, "batches_consumed": done, "seed": seed,
                                "model": model_record(model_config),
                                "tokens_trained": _tokens(tokens_before, tokens)}
                        if done == train_steps and train_step.schedule_free:
                            # The result of training is schedule-free's average x, which is
                            # what is scored and what the next update starts from (TiC-LM
                            # saves after optimizer.eval()); a resume recovers y from it.
                            params = jax.jit(eval_params, out_shardings=run.param_shardings)(
                                opt_state, params)
                            meta["params"] = EVAL_POINT
                        saves.start(done, params, opt_state, meta)
                    if stop:
                        preempted = preemption.signal_name
                        break
                saves.finish(done)
        except BaseException as error:
            # Stopping on an error: closing must not raise over it (a full disk fails both).
            with contextlib.suppress(OSError, OutputError):
                logger.close()
            checkpoints.close(mngr, quietly=True)
            if isinstance(error, checkpoints.CheckpointSaveError):
                checkpoints.remove_failed_save(error.path)  # what late writes brought back
            raise
        logger.close()
        checkpoints.close(mngr)
    if preempted:
        log.warning(
            "%s: stopped at step %d of %d; checkpoint saved in %s; run the same command again "
            "to resume", preempted, done, train_steps, checkpoint_dir,
        )
    return TrainSummary(
        step=max(done, start_step), start_step=start_step, resumed=latest is not None,
        preempted=preempted, params=params, last_metrics=metrics, fresh_parameters=fresh,
        tokens_trained=_tokens(tokens_before, tokens), flops_per_step=flops,
        extra_flops=extra_flops(train_step.loss_terms, flops, train_steps),
    )


def _tokens(before: int | None, counted: int) -> int | None:
    """The run's tokens so far: those before this invocation plus those counted in it."""
    return None if before is None else int(before) + counted


def _initial_opt_state(train_step: TrainStep, run: RunModel, params: Any, config: TrainConfig,
                       task: str) -> Any:
    """The optimizer's state at the run's start, with each loss term's state beside it (made
    from the starting parameters and the run's own batches, :mod:`tw_jax.train.loss_terms`),
    placed as the step expects."""
    from tw_jax.runtime import task_data

    tx_state = jax.jit(train_step.tx.init, out_shardings=(
        train_step.opt_shardings[0] if train_step.loss_terms else train_step.opt_shardings))(
        params)
    if not train_step.loss_terms:
        return tx_state

    def batches(seed: int) -> Any:
        for batch in task_data.batches(
                task, config.task_feature_lengths, config.batch_size, run.model, seed=seed,
                start_batch=0, pack=config.pack, use_cached=config.use_cached):
            yield global_batch(batch, run.mesh)

    context = TermContext(model=run.model, params=params, trainable=train_step.trainable,
                          batches=batches, param_shardings=run.param_shardings, seed=config.seed,
                          previous=saved_states(config.initial_checkpoint_path))
    states = {term.name: term.init_state(context) for term in train_step.loss_terms}
    return tx_state, jax.device_put(states, train_step.opt_shardings[1])


def _non_finite(loss: float, grads_finite: bool, params_finite: bool, grad_norm: float) -> str:
    """What makes a step unacceptable ("" when nothing): its parameters are never kept."""
    if not math.isfinite(loss):
        return f"loss is {loss}"
    if not grads_finite:
        return f"the gradients are not finite (norm {grad_norm})"
    if not params_finite:
        return "the updated parameters are not finite"
    return ""


def _host_metrics(
    out: Mapping[str, jax.Array], elapsed: float, learning_rate: jax.Array, flops: float,
    peak: float | None,
) -> dict[str, float]:
    values = {k: float(v) for k, v in jax.device_get(dict(out)).items()}
    elapsed = max(elapsed, 1e-9)
    metrics = {
        "loss": values["loss"],
        "accuracy": values["accuracy"],
        "learning_rate": float(learning_rate),
        "grad_norm": values["grad_norm"],
        "loss_tokens": values["tokens"],
        "tokens_per_second": values["real_tokens"] / elapsed,
        "step_time": elapsed,
    }
    if peak:
        metrics["mfu"] = flops / elapsed / (peak * jax.device_count())
    metrics.update({k: v for k, v in values.items() if k.endswith("_loss")})  # loss terms
    return metrics


@dataclasses.dataclass(frozen=True)
class TrainStep:
    """The jitted train step and what it was built from (optimizer, its state's shardings).

    ``jitted(params, opt_state, step, learning_rate, batch)`` takes the learning rate as an
    argument (:mod:`tw_jax.train.steps`): calling the object, ``train_step(params, opt_state,
    step, batch)``, evaluates the schedule for ``step`` and passes it."""

    tx: optax.GradientTransformation
    schedule: optax.Schedule
    accumulate_steps: int
    abstract_opt_state: Any
    opt_shardings: Any
    batch_shardings: dict[str, Any]
    jitted: Callable[..., tuple[Any, Any, dict[str, jax.Array]]]
    schedule_at: Callable[[jax.Array], jax.Array]  # the schedule, jitted: float32 as in optax
    # The run's loss terms; with any, the step's opt_state is (tx state, {name: term state}).
    loss_terms: tuple[LossTerm, ...] = ()
    trainable: Any = None  # booleans like the params

    @property
    def schedule_free(self) -> bool:
        """Whether the optimizer keeps a schedule-free state (its params are y, not x)."""
        return bool(schedule_free_states(self.abstract_opt_state))
    def learning_rate(self, step: int) -> jax.Array:
        """The rate of the update that microbatch ``step`` (0-based) belongs to: the schedule
        at ``step // accumulate_steps`` updates already applied, computed as optax would inside
        the step (float32, the same operations), so training is the same bit for bit."""
        return jnp.float32(jax.device_get(self.schedule_at(jnp.int32(step // self.accumulate_steps))))

    def __call__(self, params: Any, opt_state: Any, step: int,
                 batch: Mapping[str, jax.Array]) -> tuple[Any, Any, dict[str, jax.Array]]:
        return self.jitted(params, opt_state, jnp.int32(step), self.learning_rate(step), batch)

    def lower(self, params: Any, opt_state: Any, batch: Mapping[str, Any]) -> Any:
        """``jitted.lower`` at step 0 (the program does not depend on the step's values)."""
        return self.jitted.lower(params, opt_state, jnp.int32(0), self.learning_rate(0), batch)


def build_train_step(
    run: RunModel,
    model_config: Any,
    *,
    optimizer: Callable[..., optax.GradientTransformation],
    schedule_fn: Callable[..., optax.Schedule] | None,
    train_steps: int,
    accumulate_steps: int,
    seed: int,
    pack: bool = False,
    loss_terms: Sequence[LossTerm] = (),
) -> TrainStep:
    """The step :func:`train` runs: freezing from the model's parameter labels (an optax
    partition when anything is frozen), the schedule over the run's updates, parameters and
    optimizer state sharded by the rules and donated, batches sharded over data and fsdp; the
    loss terms' states beside the optimizer's (:mod:`tw_jax.train.loss_terms`), sharded like
    the parameters they mirror. ``tools/bench_train.py`` times this very step."""
    loss_terms = check_terms(loss_terms)
    labels = run.model.param_labels(run.abstract_params)
    trainable = jax.tree.map(lambda label: label == TRAINABLE, labels)
    updates = max(train_steps // accumulate_steps, 1)
    schedule = (schedule_fn or (lambda total_steps: make_schedule("constant", 1e-3, total_steps)))(
        total_steps=updates
    )
    frozen_any = not all(jax.tree.leaves(trainable))
    tx = optimizer(
        schedule=schedule, labels=labels if frozen_any else None, accumulate_steps=accumulate_steps
    )  # the run's optimizer as configured: its state is the step's (optimizer_at below)
    abstract_opt = jax.eval_shape(tx.init, run.abstract_params)
    if loss_terms:
        abstract_opt = (abstract_opt, {term.name: term.abstract_state(run.abstract_params)
                                       for term in loss_terms})
    opt_shardings = opt_state_shardings(abstract_opt, run)
    batch_shardings = {k: batch_sharding(run.mesh, 2, run.rules)
                       for k in run.model.batch_features(pack)}
    def optimizer_at(rate: optax.Schedule) -> optax.GradientTransformation:
        return optimizer(schedule=rate, labels=labels if frozen_any else None,
                         accumulate_steps=accumulate_steps)

    scalar = replicated(run.mesh)
    jitted = jax.jit(
        make_train_step(run.model, optimizer_at, trainable, seed, loss_terms),
        in_shardings=(run.param_shardings, opt_shardings, scalar, scalar, batch_shardings),
        out_shardings=(run.param_shardings, opt_shardings, scalar),
        donate_argnums=(0, 1),
    )
    return TrainStep(tx, schedule, accumulate_steps, abstract_opt, opt_shardings,
                     batch_shardings, jitted, jax.jit(schedule), loss_terms, trainable)


def _check_arguments(
    train_steps: int, batch_size: int, accumulate_steps: int, checkpoint_period: int,
    log_period: int,
) -> None:
    for name, value in (
        ("train_steps", train_steps), ("batch_size", batch_size),
        ("accumulate_steps", accumulate_steps), ("checkpoint_period", checkpoint_period),
        ("log_period", log_period),
    ):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _check_vocabulary(config: Any, name: str) -> None:
    from tw_jax.runtime import task_data

    size = task_data.vocabulary(name).vocab_size
    if size > config.vocab_size:
        raise ValueError(
            f"task {name!r} has a vocabulary of {size} ids but the model's vocab_size is "
            f"{config.vocab_size}"
        )
