"""A training run as typed data: :class:`TrainConfig` in, :class:`TrainSummary` out.

``tw-jax train`` builds the config from gin (``gin_config.train_config()``: every field bound in
``base.gin`` to a T5X-named macro, so ``--gin.TRAIN_STEPS=…`` and
``tw_jax.train.train.progress = False`` work as before); Python callers (the lifelong runner,
the CKL and EvolvingQA commands, notebooks) derive one run from another with
:meth:`TrainConfig.replace` instead of writing gin binding strings:

    base = gin_config.train_config()                       # after gin_setup.parse(...)
    trainer.train(base.replace(model_dir="out/0809", mixture_or_task_name="twiki_diffset_0809_lm"))

A config built from gin no longer reads gin: its optimizer is a frozen config and its schedule
function carries its bound parameters (``functools.partial``), its sharding table is resolved
(``axis_rules``), and what gin parsed is kept in it (:class:`GinRecord`, written to MODEL_DIR
as ``config.gin`` and ``operative_config.gin``), so parsing other gin files later changes
nothing in it: the lifelong runner parses INITIAL's and the method's files once each, up front,
and trains both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gin
import optax

from tw_jax.train.optimizers import AdafactorConfig


@dataclasses.dataclass(frozen=True)
class GinRecord:
    """What gin parsed for a run, captured when its :class:`TrainConfig` was built: ``config``
    (every binding, ``gin.config_str()``), ``operative`` (the bindings the run's configurables
    used, ``gin.operative_config_str()``) and ``bound`` (gin's arguments of
    ``tw_jax.train.train``, against which fields Python changed later are recorded)."""

    config: str
    operative: str
    bound: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # Gin macros whose value Python chose after gin (the lifelong runner's DATA_DIR, from
    # --data): written into the run's config.gin, so the file alone evaluates the run.
    macros: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def with_macros(self, **values: Any) -> GinRecord:
        return dataclasses.replace(self, macros={**self.macros, **values})


# Fields Python fills in after gin (train_config), never gin bindings of ``train``.
NOT_GIN_FIELDS = ("axis_rules", "gin_record")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """T5X's ``train`` arguments.

    ``optimizer`` is the optimizer's config (:mod:`tw_jax.train.optimizers`: ``AdamWConfig``,
    ``RecAdamConfig`` ...; default Adafactor, as T5X), or any function called like one,
    ``optimizer(schedule=..., labels=..., accumulate_steps=...)``, giving the optax transformation;
    ``schedule_fn(total_steps=...)`` the learning-rate schedule (None: constant 1e-3).
    ``batch_size`` is global (every host reads the same stream, see :mod:`tw_jax.train.trainer`).
    ``peak_flops`` (per device) overrides the table used for the MFU figure; None on CPU leaves
    MFU out. ``model_dir`` may be local (relative paths are resolved) or a bucket.
    """

    model_config: Any
    mixture_or_task_name: str
    task_feature_lengths: Mapping[str, int]
    train_steps: int
    batch_size: int
    model_dir: str | None  # None: a template for runs that set it (the lifelong runner's)
    optimizer: Callable[..., optax.GradientTransformation] = AdafactorConfig()
    # Terms added to the token loss (tw_jax.train.loss_terms: EWC, LwF); gin:
    # LOSS_TERMS = [@tw_jax.train.EWC()].
    loss_terms: Sequence[Any] = ()
    schedule_fn: Callable[..., optax.Schedule] | None = None
    accumulate_steps: int = 1
    mesh_shape: Sequence[int] = (-1, 1, 1)
    checkpoint_period: int = 1000
    keep_checkpoints: int | None = 3
    async_checkpoints: bool = True
    log_period: int = 10
    seed: int = 0
    initial_checkpoint_path: str | None = None
    # A start from it may initialise parameters of the base model it lacks (a checkpoint of 3
    # layers for a model of 4); a method's new ones always start fresh. gin: ALLOW_NEW_PARAMETERS.
    allow_new_parameters: bool = False
    peak_flops: float | None = None
    progress: bool | None = None  # None: a bar on a terminal, else a plain line per log
    # Several examples a row (seqio's packing, segment ids and positions: each example's loss is
    # what it is alone); T5X's DatasetConfig.pack. gin: PACK = True.
    pack: bool = False
    # Read seqio's offline cache of the task (T5X's DatasetConfig.use_cached; docs/caching.md).
    # gin: USE_CACHED_TASKS = True.
    use_cached: bool = False
    # The logical-axis sharding table (None: gin's ``axis_rules``, else the default table);
    # train_config() resolves it, so a later gin parse cannot change how this run shards.
    axis_rules: Sequence[tuple[str, Any]] | None = None
    gin_record: GinRecord | None = None  # None: built in Python, not from gin
    # Deprecated: runs recorded before the optimizer configs bind ``optimizer_fn =
    # @tw_jax.train.make_optimizer``; train_config() turns it into ``optimizer``.
    optimizer_fn: Callable[..., optax.GradientTransformation] | None = None

    def replace(self, **changes: Any) -> TrainConfig:
        """This run with ``changes`` (field names); an unknown name is a TypeError."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class TrainSummary:
    """What :func:`tw_jax.train.trainer.train` did.

    ``step`` is the last step trained (below ``train_steps`` when ``preempted`` names the
    signal that stopped it); ``start_step`` where this invocation began (0, or the checkpoint it
    resumed from); ``fresh_parameters`` the parameters that were not in the initial checkpoint
    (a method's new adapters); ``tokens_trained`` the tokens (unmasked inputs and targets) the
    run has trained on since step 0, across resumes (None after a resume from a checkpoint that
    did not record them); ``flops_per_step`` the model FLOPs of one step
    (:func:`~tw_jax.train.flops.train_step_flops`); ``extra_flops`` what the loss terms add
    to the whole run (EWC's precision batches, LwF's second forward pass).
    """

    step: int
    start_step: int
    resumed: bool
    preempted: str | None
    params: Any
    last_metrics: dict[str, float]
    fresh_parameters: list[str]
    tokens_trained: int | None = None
    flops_per_step: float | None = None
    extra_flops: float = 0.0


def gin_lines(config: TrainConfig, bound: Mapping[str, Any]) -> list[str]:
    """Gin lines for the fields of ``config`` that differ from ``bound`` (gin's bindings of
    ``tw_jax.train.train``), so a run's ``config.gin`` says what it trained even where Python
    changed the run after gin (the lifelong runner's MODEL_DIR, task and start point).

    Only values gin can write back are recorded (strings, numbers, None, tuples, lists, dicts);
    a model config changed from Python is recorded field by field under its gin name
    (``tw_jax.models.GPT2Config.freeze = 'none'``), a function set from Python is not.
    """
    lines = []
    for field in dataclasses.fields(config):
        if field.name in (*NOT_GIN_FIELDS, "optimizer_fn"):
            continue
        value = getattr(config, field.name)
        if field.name in bound and _equal(bound[field.name], value):
            continue
        if field.name in bound and _same_dataclass_type(bound[field.name], value):
            lines += _changed_fields(bound[field.name], value)
            continue
        if field.name not in bound and field.default is not dataclasses.MISSING \
                and _equal(field.default, value):
            continue
        text = _gin_literal(value)
        if text is not None:
            lines.append(f"tw_jax.train.train.{field.name} = {text}")
    return lines


def _same_dataclass_type(a: Any, b: Any) -> bool:
    return dataclasses.is_dataclass(a) and not isinstance(a, type) and type(a) is type(b)


def _changed_fields(before: Any, after: Any) -> list[str]:
    """``NAME.field = value`` for the fields of a gin-registered dataclass that changed."""
    name = _gin_name(type(after))
    if name is None:
        return []
    lines = []
    for field in dataclasses.fields(after):
        value = getattr(after, field.name)
        text = _gin_literal(value)
        if text is not None and not _equal(getattr(before, field.name), value):
            lines.append(f"{name}.{field.name} = {text}")
    return lines


def _gin_name(cls: type) -> str | None:
    """The name gin knows ``cls`` by (``tw_jax.models.T5Config``), or None."""
    # gin has no public inverse lookup; _inverse_lookup is what get_bindings(cls) uses.
    configurable = gin.config._inverse_lookup(cls)  # noqa: SLF001
    return configurable.selector if configurable is not None else None


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001  (arrays and other values without a plain ==)
        return a is b


def _gin_literal(value: Any) -> str | None:
    """``repr(value)`` when gin parses it back to ``value``, else None."""
    if isinstance(value, Mapping):
        value = dict(value)
    text = repr(value)
    try:
        return text if gin.config.parse_value(text) == value else None
    except (SyntaxError, ValueError):
        return None
