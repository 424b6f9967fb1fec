"""The trainer's optimizer: one frozen config per base rule, assembled with clipping,
accumulation and freezing.

A run names its optimizer as a config (gin: ``OPTIMIZER = @tw_jax.train.AdamWConfig()``,
``tw_jax.train.AdamWConfig.b2 = 0.98``; Python: ``AdamWConfig(b2=0.98)``), as Levanter's
``OptimizerConfig`` and T5X's gin-bound optax factories do: :class:`AdafactorConfig`,
:class:`AdamWConfig`, :class:`RecAdamConfig`, :class:`ScheduleFreeAdamWConfig` (TiC-LM's
schedule-free AdamW: evaluate and export :func:`tw_jax.train.schedule_free.eval_params`, not the
params the step trains) or :class:`SGDConfig`, each holding only its own settings. Calling a config,
``config(schedule, accumulate_steps=k, labels=labels)``, returns one
``optax.GradientTransformation`` built inside out as::

    freeze( MultiSteps( chain( clip_by_global_norm,
                               adafactor | adamw | recadam | schedule_free_adamw | sgd ), k ),
            labels )

- Clipping (``clip_norm``, every config) sees the gradient averaged over the microbatches of one
  update, and only the trainable leaves (frozen ones are masked out before it), as PyTorch
  Lightning's clipping does after accumulation.
- ``optax.MultiSteps`` averages ``accumulate_steps`` microbatch gradients and applies the inner
  rule once per ``k`` calls; in between it returns zero updates, so params change only every
  ``k`` steps. Schedules and RecAdam count optimizer updates, not microbatches: set their
  ``total_steps`` to the number of updates. ``optax.tree_utils.tree_get(state, "gradient_step")``
  reads that number from the state.
- Freezing wraps everything (see :mod:`tw_jax.train.freezing`), so frozen leaves get neither
  optimizer state nor an accumulator.

Adafactor uses the settings of T5 and T5X: factored second moments for matrices whose two
largest dimensions are at least 128, ``decay_rate`` 0.8 (β2 = 1 − t^−0.8), update clipping at
RMS 1.0, step scaled by the parameter's RMS (``multiply_by_parameter_scale``, floor 1e-3),
ε1 = 1e-30 and no momentum (set ``momentum`` for a first moment). Our models keep attention
kernels 3-D, ``(embed, heads, kv)`` and ``(heads, kv, embed)``, where Mesh TensorFlow's T5 had
2-D ``(d_model, heads·d_kv)`` matrices; optax would factor only the two largest axes
(``embed`` × ``kv`` = 1024 × 64 in T5-large, under the 128 threshold) and keep a full second
moment for ~40% of T5-large. :func:`as_matrices` runs Adafactor on the 2-D view instead (on by
default, ``as_matrices``): the factored statistics of T5, ~1.1 GiB less state for T5-large. Its
``weight_decay`` is optax's ``weight_decay_rate``: applied after the learning rate, so not scaled
by it (T5X likewise). AdamW's ``weight_decay`` is PyTorch's: multiplied by the learning rate.
Plain :class:`SGDConfig` (no momentum, no decay) is there for tests and debugging.

The configs replace ``make_optimizer``'s 21 flat parameters. A run recorded before them
(``config.gin`` binding ``optimizer_fn = @tw_jax.train.make_optimizer``) still parses and trains
the same optimizer (:func:`from_legacy`, with a warning); a ``make_optimizer.*`` binding that
nothing uses any more is an error naming the new binding (:func:`flat_binding_moved`); and an
optimizer given by its old name (``OPTIMIZER = 'adamw'``) still works, with a warning
(:func:`resolve`).
"""

from __future__ import annotations

import abc
import dataclasses
import warnings
from typing import Any, ClassVar

import gin
import jax
import optax

from tw_jax.train.freezing import freeze
from tw_jax.train.recadam import recadam

GIN_MODULE = "tw_jax.train"


@dataclasses.dataclass(frozen=True)
class OptimizerConfig(abc.ABC):
    """What every optimizer takes: ``clip_norm`` clips the global norm of each update's gradient
    (None: no clipping). A subclass gives its base rule (:meth:`base`) and its ``name``."""

    name: ClassVar[str]
    clip_norm: float | None = None

    def __post_init__(self) -> None:
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ValueError(f"clip_norm must be > 0 or None, got {self.clip_norm}")

    @abc.abstractmethod
    def base(self, schedule: optax.ScalarOrSchedule) -> optax.GradientTransformation:
        """The base rule at learning rate ``schedule`` (a float or a schedule of updates)."""

    def __call__(
        self, schedule: optax.ScalarOrSchedule, *, accumulate_steps: int = 1, labels: Any = None,
    ) -> optax.GradientTransformation:
        """The transformation the trainer applies: :meth:`base` after clipping,
        ``accumulate_steps`` microbatches an update, frozen where ``labels`` (a
        "trainable"/"frozen" tree, or a function of the params giving one) say so."""
        if accumulate_steps < 1:
            raise ValueError(f"accumulate_steps must be >= 1, got {accumulate_steps}")
        tx = self.base(schedule)
        if self.clip_norm is not None:
            tx = optax.chain(optax.clip_by_global_norm(self.clip_norm), tx)
        if accumulate_steps > 1:
            tx = optax.MultiSteps(tx, every_k_schedule=accumulate_steps).gradient_transformation()
        if labels is not None:
            tx = freeze(tx, labels)
        return tx


@dataclasses.dataclass(frozen=True)
class AdafactorConfig(OptimizerConfig):
    """Adafactor with T5's settings (see the module docstring); ``as_matrices`` factors 3-D
    kernels as the 2-D matrices of Mesh TensorFlow's T5."""

    name: ClassVar[str] = "adafactor"
    weight_decay: float = 0.0
    decay_rate: float = 0.8
    clipping_threshold: float | None = 1.0
    momentum: float | None = None
    factored: bool = True
    min_dim_size_to_factor: int = 128
    multiply_by_parameter_scale: bool = True
    as_matrices: bool = True

    def base(self, schedule: optax.ScalarOrSchedule) -> optax.GradientTransformation:
        rule = optax.adafactor(
            learning_rate=schedule,
            min_dim_size_to_factor=self.min_dim_size_to_factor,
            decay_rate=self.decay_rate,
            multiply_by_parameter_scale=self.multiply_by_parameter_scale,
            clipping_threshold=self.clipping_threshold,
            momentum=self.momentum,
            weight_decay_rate=self.weight_decay or None,
            eps=1e-30,
            factored=self.factored,
        )
        return as_matrices(rule) if self.as_matrices else rule


@dataclasses.dataclass(frozen=True)
class AdamWConfig(OptimizerConfig):
    """AdamW; ``weight_decay`` is PyTorch's (multiplied by the learning rate)."""

    name: ClassVar[str] = "adamw"
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8

    def base(self, schedule: optax.ScalarOrSchedule) -> optax.GradientTransformation:
        return optax.adamw(schedule, b1=self.b1, b2=self.b2, eps=self.eps,
                           weight_decay=self.weight_decay)


@dataclasses.dataclass(frozen=True)
class RecAdamConfig(AdamWConfig):
    """RecAdam (:func:`tw_jax.train.recadam.recadam`: its ``gamma``, ``k``, ``t0``, ``anneal``;
    ``total_steps`` switches its time to a fraction of training) with Adam's settings."""

    name: ClassVar[str] = "recadam"
    gamma: float = 5000.0
    k: float = 0.5
    t0: float = 250.0
    anneal: str = "sigmoid"
    total_steps: int | None = None

    def base(self, schedule: optax.ScalarOrSchedule) -> optax.GradientTransformation:
        return recadam(
            schedule, b1=self.b1, b2=self.b2, eps=self.eps, gamma=self.gamma, k=self.k,
            t0=self.t0, anneal=self.anneal, total_steps=self.total_steps,
            weight_decay=self.weight_decay,
        )


@dataclasses.dataclass(frozen=True)
class ScheduleFreeAdamWConfig(OptimizerConfig):
    """Schedule-free AdamW, ``optax.contrib.schedule_free_adamw`` (Defazio et al., 2024): the
    optimizer of TiC-LM's "Schedulefree" runs (``training/open_lm.patch``, ``main``:
    ``schedulefree.AdamWScheduleFree(lr, betas=(beta1, beta2), eps, weight_decay=wd)``, with a
    constant learning rate, README: lr 1e-4, wd 0.01).

    ``b1`` is the interpolation between the averaged and the base iterate (no first moment),
    ``b2``/``eps`` Adam's second moment (bias-corrected, ``eps`` outside the root),
    ``weight_decay`` PyTorch's (added to the normalised gradient at ``y``, times the rate),
    ``weight_lr_power`` the power of the running maximum rate that weights the average, and
    ``warmup_steps`` optax's own linear warm-up from 0 inside the optimizer (None: none;
    TiC-LM warms up in its scheduler instead, ``SCHEDULE = 'constant_warmup'``).

    The params the step returns are the gradient point ``y``; evaluate and export
    :func:`tw_jax.train.schedule_free.eval_params` of the state and the params. The step gives
    the optimizer a constant schedule at each update's rate: the rate that weights the average
    is then the current update's, as in PyTorch's ``AdamWScheduleFree`` (optax's own, given a
    schedule, reads it one update ahead for the weights: the same only for a constant rate).
    """

    name: ClassVar[str] = "schedule_free_adamw"
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    warmup_steps: int | None = None
    weight_lr_power: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.b1 <= 1.0:
            raise ValueError(f"schedule-free b1 must be in (0, 1], got {self.b1}")
        if self.warmup_steps is not None and self.warmup_steps < 1:
            raise ValueError(f"warmup_steps must be >= 1 or None, got {self.warmup_steps}")

    def base(self, schedule: optax.ScalarOrSchedule) -> optax.GradientTransformation:
        rate = schedule
        if self.warmup_steps is not None:
            # schedule_free_adamw's own warm-up, warmup_constant_schedule(0, rate, warmup_steps),
            # takes a number; the step's rate is a schedule (constant per step), so apply it
            # per count: for a constant rate the very same values.
            rate = _warmed_up(schedule, self.warmup_steps)
        return optax.contrib.schedule_free_adamw(
            rate, warmup_steps=None, b1=self.b1, b2=self.b2, eps=self.eps,
            weight_decay=self.weight_decay, weight_lr_power=self.weight_lr_power)


def _warmed_up(schedule: optax.ScalarOrSchedule, warmup_steps: int) -> optax.Schedule:
    """``optax.warmup_constant_schedule(0, schedule(count), warmup_steps)`` at each count."""
    if not callable(schedule):
        return optax.warmup_constant_schedule(0.0, schedule, warmup_steps)

    def rate(count: Any) -> Any:
        return optax.warmup_constant_schedule(0.0, schedule(count), warmup_steps)(count)

    return rate


@dataclasses.dataclass(frozen=True)
class SGDConfig(OptimizerConfig):
    """Plain gradient descent: no momentum, no weight decay."""

    name: ClassVar[str] = "sgd"

    def base(self, schedule: optax.ScalarOrSchedule) -> optax.GradientTransformation:
        return optax.sgd(schedule)


CONFIGS: dict[str, type[OptimizerConfig]] = {
    cls.name: cls
    for cls in (AdafactorConfig, AdamWConfig, RecAdamConfig, ScheduleFreeAdamWConfig, SGDConfig)
}
# What make_optimizer's flat parameters could build (the configs a recorded run can name).
LEGACY_CONFIGS: dict[str, type[OptimizerConfig]] = {
    cls.name: cls for cls in (AdafactorConfig, AdamWConfig, RecAdamConfig, SGDConfig)
}
OPTIMIZERS: tuple[str, ...] = tuple(CONFIGS)
for _cls in CONFIGS.values():
    gin.external_configurable(_cls, module=GIN_MODULE)


def resolve(optimizer: Any) -> Any:
    """``optimizer`` as the trainer calls it: a config (or any function of the same call) as
    given; None as Adafactor (T5X's default); an old-style name (``OPTIMIZER = 'adamw'``) as that
    optimizer's config with its gin bindings, with a warning naming the new binding."""
    if optimizer is None:
        return AdafactorConfig()
    if not isinstance(optimizer, str):
        return optimizer
    cls = CONFIGS.get(optimizer)
    if cls is None:
        raise ValueError(f"unknown optimizer {optimizer!r}; expected one of {OPTIMIZERS} or a "
                         f"config such as @{GIN_MODULE}.AdamWConfig()")
    warnings.warn(
        f"OPTIMIZER = {optimizer!r} is deprecated: bind the optimizer's config, "
        f"OPTIMIZER = @{GIN_MODULE}.{cls.__name__}()", FutureWarning, stacklevel=2)
    return gin.get_configurable(f"{GIN_MODULE}.{cls.__name__}")()


def _flat_field(parameter: str) -> tuple[tuple[type[OptimizerConfig], ...], str]:
    """The configs that hold ``make_optimizer``'s flat ``parameter``, and its field name there
    (``adafactor_decay_rate`` → AdafactorConfig.decay_rate, ``b2`` → AdamW and RecAdam)."""
    for prefix, cls in (("adafactor_", AdafactorConfig), ("recadam_", RecAdamConfig)):
        if parameter.startswith(prefix):
            return (cls,), parameter.removeprefix(prefix)
    owners = tuple(cls for cls in LEGACY_CONFIGS.values()
                   if parameter in {field.name for field in dataclasses.fields(cls)})
    return owners, parameter


def flat_binding_moved(parameter: str) -> str:
    """Where a binding of ``make_optimizer``'s flat ``parameter`` went."""
    configs = ", ".join(f"{GIN_MODULE}.{cls.__name__}" for cls in LEGACY_CONFIGS.values())
    if parameter == "name":
        return f"bind the optimizer's config instead of its name: OPTIMIZER = @{GIN_MODULE}." \
               f"AdamWConfig() (one of {configs})"
    owners, field_name = _flat_field(parameter)
    if owners:
        return "bind " + " or ".join(f"{GIN_MODULE}.{cls.__name__}.{field_name}" for cls in owners)
    return f"bind the fields of the optimizer's config ({configs})"


def legacy_config(name: str = "adafactor", **flat: Any) -> OptimizerConfig:
    """The config of a ``make_optimizer(name, **flat)`` call (runs recorded before the configs:
    their ``config.gin`` binds ``train.optimizer_fn = @tw_jax.train.make_optimizer``). A flat
    parameter of another optimizer than ``name`` is ignored, as ``make_optimizer`` ignored it."""
    cls = LEGACY_CONFIGS.get(name)
    if cls is None:
        raise ValueError(f"unknown optimizer {name!r}; expected one of {tuple(LEGACY_CONFIGS)}")
    fields = {field.name for field in dataclasses.fields(cls)}
    values = {}
    for parameter, value in flat.items():
        owners, field_name = _flat_field(parameter)
        if not owners and parameter not in ("schedule", "labels", "accumulate_steps"):
            raise TypeError(f"make_optimizer has no parameter {parameter!r}")
        if cls in owners and field_name in fields:
            values[field_name] = value
    return cls(**values)


def make_optimizer(name: str = "adafactor", schedule: optax.ScalarOrSchedule = 1e-3, *,
                   accumulate_steps: int = 1, labels: Any = None,
                   **flat: Any) -> optax.GradientTransformation:
    """Deprecated: the flat function the configs replace, kept so that a run's recorded
    ``config.gin`` from before them still parses (``tw-jax eval --gin_file=MODEL_DIR/config.gin``)
    and trains the same: it builds :func:`legacy_config` and calls it."""
    return legacy_config(name, **flat)(schedule, accumulate_steps=accumulate_steps,
                                       labels=labels)


gin.external_configurable(make_optimizer, module=GIN_MODULE)


def from_legacy(optimizer_fn: Any) -> OptimizerConfig | Any:
    """The config a recorded ``optimizer_fn`` (``@tw_jax.train.make_optimizer`` with its gin
    bindings) stands for, with a warning naming the new binding; another function as is."""
    raw = getattr(optimizer_fn, "__wrapped__", None)
    if raw is not make_optimizer:
        return optimizer_fn
    warnings.warn(
        "optimizer_fn = @tw_jax.train.make_optimizer is deprecated: bind the optimizer's config, "
        f"optimizer = @{GIN_MODULE}.AdamWConfig() (or another of {OPTIMIZERS})",
        FutureWarning, stacklevel=2)
    return legacy_config(**gin.get_bindings(optimizer_fn))


def matrix_shape(shape: tuple[int, ...]) -> tuple[int, int] | None:
    """The 2-D view of an array of 3 or more dims: the split into leading and trailing axes whose
    two products are most balanced (first such split on ties); None for 0-2 dims.

    ``(1024, 16, 64)`` → ``(1024, 1024)``; ``(16, 64, 1024)`` → ``(1024, 1024)``.
    """
    if len(shape) <= 2:
        return None
    best: tuple[int, int] | None = None
    for split in range(1, len(shape)):
        rows = 1
        for dim in shape[:split]:
            rows *= int(dim)
        cols = 1
        for dim in shape[split:]:
            cols *= int(dim)
        if best is None or min(rows, cols) > min(best):
            best = (rows, cols)
    return best


def as_matrices(inner: optax.GradientTransformation) -> optax.GradientTransformation:
    """``inner`` applied to row-major 2-D views of arrays with 3 or more dims (see
    :func:`matrix_shape`); updates come back in the params' shapes.

    Only shape-sensitive rules change (Adafactor's factoring); element-wise and whole-array
    steps (RMS clipping, parameter scale) are the same on either view. The state holds the 2-D
    shapes, so ``optax.tree_map_params`` shardings of 3-D params do not fit an unfactored ``v``.
    """

    def view(tree: Any) -> Any:
        def flat(leaf: Any) -> Any:
            shape = matrix_shape(tuple(getattr(leaf, "shape", ())))
            return leaf if shape is None else leaf.reshape(shape)

        return jax.tree.map(flat, tree)

    def init_fn(params: Any) -> Any:
        return inner.init(view(params))

    def update_fn(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        flat_params = None if params is None else view(params)
        new, state = inner.update(view(updates), state, flat_params)
        return jax.tree.map(lambda u, ref: u.reshape(ref.shape), new, updates), state

    return optax.GradientTransformation(init_fn, update_fn)
