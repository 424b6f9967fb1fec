"""Gin for every command: configurables, where ``--gin_file`` is looked up, and clear errors.

One run's gin files serve every command (``tw-jax train``, ``eval``, ``compile``, the lifelong
runner reading a run's ``config.gin``), so parsing needs every configurable of every command
known, whichever command parses. :func:`register_configurables` registers the model config of
each family that :mod:`tw_jax.models` registers (:func:`tw_jax.models.registered_families`:
``GPT2Config``, ``T5Config``, ``BARTConfig``) and the variants (``LoRAConfig``,
``KAdapterConfig``, ``ModularConfig``; frozen dataclasses, so gin builds them by keyword) and
imports the modules that declare the other configurables (:data:`CONFIGURABLE_MODULES`: the
trainer's ``train``, ``make_schedule``, the optimizer configs and ``compile``, evaluation's
``evaluate`` and ``infer``, ``tw_jax.tasks.register_all``). They are named, not imported, here:
this layer sits below training and evaluation, the way T5X's gin files name the modules they
need with ``import`` lines.

A ``--gin_file`` is found, in this order, as given (relative to the working folder), below each
``--gin_search_paths`` folder, and below the gin files shipped with the package (the repository's
``gin/`` folder, installed as ``tw_jax.gin_files``), so ``--gin_file=kadapter.gin`` and
``--gin_file=models/t5_tiny.gin`` work from any folder. ``include`` lines inside gin files use the
same search path. Later files and bindings override earlier ones.

The T5X macros a command needs (``MODEL_DIR``, ``MIXTURE_OR_TASK_NAME`` …) are checked after
parsing: an unset one is an error naming it, as are gin's own errors for a misspelt configurable
or parameter (which name the file and line).

Run and method files set what every model takes once, for whichever model the run uses
(:class:`tw_jax.models.ModelSettings`: ``tw_jax.models.ModelSettings.dtype = 'bfloat16'``, ``.lora
= @tw_jax.models.LoRAConfig()`` …). After parsing, ``MODEL`` becomes
``@tw_jax.runtime.gin_setup.with_model_settings()`` of the model the files set, so everything that
reads ``%MODEL`` (``train``, ``evaluate``, ``infer``, ``compile``, the T5X wiring, a test) gets the
model with the settings applied; gin's own parse (the real T5X's) does the same when it finalizes
the config (a finalize hook). A setting the model cannot take, or an old per-class binding
(``tw_jax.models.T5Config.dtype = 'float32'``) that says otherwise than the settings, is a one-line
error naming both when the model is built (:func:`model_config`,
:func:`tw_jax.train.gin_config.train_config`). A ``MODEL/``-scoped binding is what a run's
``operative_config.gin`` records of the model's constructor, before the settings: the settings
apply over it.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import inspect
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gin

from tw_jax.models import (
    FREEZE_AUTO,
    KAdapterConfig,
    LoRAConfig,
    ModelSettings,
    ModelSettingsError,
    ModularConfig,
    apply_settings,
    registered_families,
)
from tw_jax.runtime.start_model import model_of_start

MACROS_TRAIN = ("MODEL_DIR", "MIXTURE_OR_TASK_NAME", "TASK_FEATURE_LENGTHS", "TRAIN_STEPS",
                "BATCH_SIZE")
MACROS_EVAL = ("MODEL_DIR", "MIXTURE_OR_TASK_NAME", "TASK_FEATURE_LENGTHS", "BATCH_SIZE")
MACROS_COMPILE = ("TASK_FEATURE_LENGTHS", "BATCH_SIZE")


class GinConfigError(ValueError):
    """A gin file that is missing, does not parse, or leaves a needed binding unset."""


def shipped_gin_dir() -> Path:
    """The packaged gin files (``tw_jax.gin_files``), or the repository's ``gin/`` folder."""
    # No __init__.py there: a top-level ``gin`` package in the repository would shadow
    # gin-config. Installed, the folder is the namespace package tw_jax.gin_files.
    try:
        import tw_jax.gin_files as shipped

        return Path(next(iter(shipped.__path__)))
    except (ImportError, StopIteration):
        return Path(__file__).resolve().parents[2] / "gin"


# The modules whose import registers the configurables of the commands above this layer.
CONFIGURABLE_MODULES = (
    "tw_jax.tasks",  # register_all, MixReviewSchedule, ReplaySettings
    "tw_jax.train.gin_config",  # train, make_schedule, AdamWConfig ..., compile
    "tw_jax.evaluate.task_eval",  # evaluate, infer
)

# What only the input pipeline and evaluation read (seqio on TensorFlow). A compiled training
# step alone (tools/bench_train.py, tools/bench_gpu.py on an accelerator image that has JAX but
# not TensorFlow) parses the same gin files with these bindings skipped: ``parse(...,
# input_pipeline=False)``.
PIPELINE_MODULES = ("tw_jax.tasks", "tw_jax.evaluate.task_eval")
PIPELINE_CONFIGURABLES = (
    "tw_jax.tasks.register_all", "tw_jax.tasks.MixReviewSchedule", "tw_jax.tasks.ReplaySettings",
    "tw_jax.evaluate.evaluate", "tw_jax.evaluate.infer",
)

_REGISTERED: set[str] = set()


def _package_configs() -> list[type]:
    """The config classes of the families defined in :mod:`tw_jax.models`; a family defined
    elsewhere registers its config with gin itself, under its own module, as its gin file
    names it (``@my_family.MyConfig()``; docs/architecture.md, "Adding a model family")."""
    return [family.config_class for family in registered_families()
            if family.config_class.__module__.startswith("tw_jax.models.")]


def register_configurables(input_pipeline: bool = True) -> None:
    """Make every command's configurables known to gin (idempotent); without
    ``input_pipeline``, all but :data:`PIPELINE_MODULES`'."""
    if "models" not in _REGISTERED:
        for cls in (*_package_configs(), LoRAConfig, KAdapterConfig, ModularConfig, ModelSettings):
            gin.external_configurable(cls, module="tw_jax.models")
        # Under its import path, as gin files with dynamic registration would name it.
        gin.external_configurable(with_model_settings, module=__name__)
        gin.config.register_finalize_hook(_settings_on_finalize)
        _REGISTERED.add("models")
    for module in CONFIGURABLE_MODULES:
        if module not in _REGISTERED and (input_pipeline or module not in PIPELINE_MODULES):
            importlib.import_module(module)
            _REGISTERED.add(module)


def search_paths(extra: Sequence[str] = ()) -> list[Path]:
    return [Path.cwd(), *(Path(p) for p in extra), shipped_gin_dir()]


def resolve_gin_file(name: str, extra: Sequence[str] = ()) -> Path:
    """The gin file ``name`` (see the module docstring for the order of places tried)."""
    candidate = Path(name)
    if candidate.is_absolute():
        if candidate.is_file():
            return candidate
        raise GinConfigError(f"gin file not found: {name}")
    tried = [folder / name for folder in search_paths(extra)]
    for path in tried:
        if path.is_file():
            return path
    raise GinConfigError(
        f"gin file {name!r} not found; looked in: " + ", ".join(str(p.parent) for p in tried)
    )


def binding_key(binding: str) -> str:
    """What a ``KEY=VALUE`` binding binds (``TRAIN_STEPS``, ``tw_jax.train.train.seed``)."""
    return binding.split("=", 1)[0].strip()


def _value_text(binding: str) -> str:
    if "=" not in binding:
        raise GinConfigError(f"--gin binding {binding!r} is not KEY=VALUE")
    return binding.split("=", 1)[1].strip()


def _gin_literal(text: str) -> tuple[bool, Any]:
    """``(True, value)`` of a gin literal, else ``(False, text)``: an unquoted path."""
    try:
        return True, gin.config.parse_value(text)
    except (SyntaxError, ValueError):
        return False, text


def binding_value(binding: str) -> Any:
    """The VALUE of ``KEY=VALUE`` as gin reads it; one that is not a gin literal (an unquoted
    path) is taken as a string."""
    return _gin_literal(_value_text(binding))[1]


def binding_text(binding: str) -> str:
    """``KEY=VALUE``; a VALUE that is not a gin literal (an unquoted path) is taken as a string."""
    text = _value_text(binding)
    literal, _ = _gin_literal(text)
    return f"{binding_key(binding)} = {text if literal else repr(text)}"


def parse(
    gin_files: Sequence[str],
    bindings: Sequence[str] = (),
    gin_search_paths: Sequence[str] = (),
    required_macros: Sequence[str] = (),
    strict_macros: bool = True,
    runner_macros: Sequence[str] = (),
    input_pipeline: bool = True,
) -> None:
    """Clear gin, then parse the files (in order) and the bindings (``KEY=VALUE``) after them.

    Without ``input_pipeline`` the bindings of :data:`PIPELINE_CONFIGURABLES` (and a gin
    ``import`` of a module that cannot be imported) are skipped, so the model, method and
    training settings parse where seqio and TensorFlow are not installed.

    With ``strict_macros``, a binding of a macro that nothing in the parsed configuration uses
    (``TRAIN_STEP=3`` for ``TRAIN_STEPS``: gin would define a new macro and the run would keep
    the default) is a :class:`GinConfigError` naming the closest macros that are used;
    ``runner_macros`` are read by the caller itself (the lifelong runner's ``TRAIN_EPOCHS``),
    so no binding needs to use them."""
    register_configurables(input_pipeline)
    gin.clear_config()
    _reset_search_paths()
    for folder in search_paths(gin_search_paths):
        gin.add_config_file_search_path(str(folder.absolute()))
    files = [str(resolve_gin_file(name, gin_search_paths)) for name in gin_files]
    quiet = _QuietIncludeLookups()
    logging.getLogger().addFilter(quiet)
    try:
        gin.parse_config_files_and_bindings(
            files, [binding_text(b) for b in bindings], finalize_config=False,
            skip_unknown=False if input_pipeline else list(PIPELINE_CONFIGURABLES),
        )
    except (ValueError, SyntaxError, OSError) as error:
        raise GinConfigError(_one_line(error)) from error
    finally:
        logging.getLogger().removeFilter(quiet)
    if strict_macros:
        _check_macro_bindings([b for b in bindings if binding_key(b) not in runner_macros])
    missing = [name for name in required_macros if not _macro_is_set(name)]
    if missing:
        raise GinConfigError(
            f"gin macro(s) {', '.join(missing)} not set: define them in a gin file or pass "
            + " ".join(f"--gin.{m}=..." for m in missing)
        )
    for key, value in settings_bindings().items():
        gin.bind_parameter(key, value)


_NO_PARAMETER = re.compile(r"Configurable '([^']+)' doesn't have a parameter named '([^']+)'")
_NO_CONFIGURABLE = re.compile(r"No configurable matching '([^']+)'")
_WHERE = re.compile(r"^\s*In (.*)$", re.MULTILINE)


def _one_line(error: BaseException) -> str:
    """gin's error (message, "In file X, line N", the line) as one line, with the closest
    parameter or configurable names for a misspelt one."""
    text = str(error)
    first = text.splitlines()[0] if text else type(error).__name__
    where = _WHERE.search(text)
    suffix = (f" ({where.group(1).strip().replace('bindings string', '--gin bindings,')})"
              if where else "")
    match = _NO_PARAMETER.search(first)
    if match:
        configurable = gin.config._REGISTRY.get_match(match[1])  # noqa: SLF001
        known = sorted(inspect.signature(configurable.wrapped).parameters) if configurable else []
        close = difflib.get_close_matches(match[2], known, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        return f"gin: {match[1]} has no parameter {match[2]!r}{hint}{suffix}"
    match = _NO_CONFIGURABLE.search(first)
    if match:
        names = sorted(selector for selector, _ in gin.config._REGISTRY.items())  # noqa: SLF001
        by_short = {name.rsplit(".", 1)[-1]: name for name in names}  # T5Config as users write it
        close = difflib.get_close_matches(match[1], names, n=3, cutoff=0.6) or [
            by_short[short] for short in difflib.get_close_matches(
                match[1].rsplit(".", 1)[-1], sorted(by_short), n=3, cutoff=0.6)]
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        return f"gin: no configurable named {match[1]!r}{hint}{suffix}"
    return f"gin: {first}{suffix}"


def used_macros() -> set[str]:
    """The macros that some binding of the parsed configuration refers to (``%NAME``)."""
    used: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, gin.config.ConfigurableReference):
            if value.configurable.name == "macro":
                used.add(value.scoped_selector.split("/")[0])
        elif isinstance(value, (list, tuple, set)):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)

    # gin keeps its parsed bindings here; it has no public way to list macro references.
    for parameters in gin.config._CONFIG.values():  # noqa: SLF001
        for value in parameters.values():
            walk(value)
    return used


def _check_macro_bindings(bindings: Sequence[str]) -> None:
    keys = [binding_key(b) for b in bindings]
    macros = [k for k in keys if k and "." not in k and "/" not in k]
    if not macros:
        return
    used = used_macros()
    for name in macros:
        if name not in used:
            close = difflib.get_close_matches(name, sorted(used), n=3, cutoff=0.6)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise GinConfigError(
                f"gin macro {name} is bound but nothing in the gin files uses it{hint}"
            )


class _QuietIncludeLookups(logging.Filter):
    """Drops gin's per-prefix include probes ("ERROR Path not found: /cwd/models/x.gin"): gin
    tries every search path in turn and logs each miss as an error, though one of them matches.
    A file found nowhere still fails, with gin's own exception."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.pathname.replace("\\", "/").endswith("gin/resource_reader.py")


def macro(name: str, default: Any = None) -> Any:
    """The value gin holds for macro ``name`` (``MESH_SHAPE``), or ``default`` when unbound."""
    try:
        return gin.query_parameter(f"%{name}")
    except ValueError:
        return default


def model_config() -> Any:
    """The model config the parsed gin files build (their ``MODEL`` macro, with the run's
    :class:`~tw_jax.models.ModelSettings`), as training builds it: inside the macro's scope. Gin
    evaluates ``%MODEL`` in scope ``MODEL``, so a run's ``operative_config.gin`` records the
    model's parameters as ``MODEL/GPT2Config.n_embd = …``; calling the reference outside that
    scope would miss them and build the default model."""
    try:
        reference = gin.query_parameter("%MODEL")
        with gin.config_scope("MODEL"):
            config = reference.scoped_configurable_fn()
    except GinConfigError as error:  # raised inside gin's call, which appends its trail
        raise GinConfigError(str(error).splitlines()[0]) from None
    except ValueError as error:
        raise GinConfigError(f"gin: {error} (add a models/*.gin file)") from None
    # Parsed by gin alone and never finalized, MODEL is the model the files set.
    return config if _has_settings(reference) else with_model_settings(config)


# --- the settings every model takes (tw_jax.models.ModelSettings) ---------------------------

SETTINGS_WRAPPER = f"{__name__}.with_model_settings"


def with_model_settings(config: Any) -> Any:
    """``config`` (the model a models/*.gin file sets) with the parsed
    :class:`~tw_jax.models.ModelSettings` applied: what ``MODEL`` is after parsing. A setting the
    model cannot take, or an unscoped per-class binding that sets the same field otherwise, is a
    one-line :class:`GinConfigError`. Applying it twice changes nothing.

    A run that starts from a Hugging Face folder (``INITIAL_CHECKPOINT_PATH``, or the folder
    ``tw-jax eval`` scores: ``checkpoint_path``) of another family
    trains the folder's model, and one of the same family takes the folder's tokenizer
    (:func:`tw_jax.runtime.start_model.model_of_start`): the settings apply to that model."""
    settings = _parsed_settings()
    start = macro("INITIAL_CHECKPOINT_PATH")
    given = "INITIAL_CHECKPOINT_PATH" if start else "tw_jax.evaluate.evaluate.checkpoint_path"
    try:
        config = model_of_start(config, start or _eval_checkpoint())
    except (OSError, ValueError) as error:
        raise GinConfigError(f"{given}: {str(error).splitlines()[0]}") from None
    _check_class_bindings(config, settings)
    try:
        return apply_settings(config, settings)
    except ModelSettingsError as error:
        raise GinConfigError(f"gin binds {error.setting} but the run's MODEL is {error.family}, "
                             f"which {error.reason}") from None


def _eval_checkpoint() -> str | None:
    """``tw-jax eval``'s ``checkpoint_path`` when bound: a Hugging Face folder scored as it is
    (no run) is the model too, as a start from it would be."""
    try:
        return gin.query_parameter("tw_jax.evaluate.evaluate.checkpoint_path")
    except ValueError:  # not bound (or evaluate not registered)
        return None


def settings_bindings() -> dict[Any, Any]:
    """The bindings that make ``MODEL`` :func:`with_model_settings` of the model the files set
    (``{}`` when MODEL is unset, not a reference, or already that). Nothing is built: files
    that do not fit together still parse, and fail where the model is built."""
    try:
        reference = gin.query_parameter("%MODEL")
    except ValueError:
        return {}
    if not isinstance(reference, gin.config.ConfigurableReference) or _has_settings(reference):
        return {}
    wrapper = gin.config.ConfigurableReference(SETTINGS_WRAPPER, True)
    return {("MODEL", "gin.macro", "value"): wrapper, f"{SETTINGS_WRAPPER}.config": reference}


def _settings_on_finalize(config: Any) -> dict[Any, Any]:
    """gin's finalize hook: the real T5X parses its gin files itself and finalizes them."""
    del config  # settings_bindings reads the parsed configuration through gin
    return settings_bindings()


def _has_settings(reference: Any) -> bool:
    configurable = getattr(reference, "configurable", None)
    return getattr(configurable, "wrapped", None) is with_model_settings


def _parsed_settings() -> ModelSettings:
    try:
        return gin.get_configurable(ModelSettings)()
    except (ValueError, TypeError) as error:
        raise GinConfigError(f"gin: {str(error).splitlines()[0]}") from None


def _check_class_bindings(config: Any, settings: ModelSettings) -> None:
    """An old per-class binding (``tw_jax.models.T5Config.dtype = 'float32'``) of a field the
    settings set to another value: an error naming both (``freeze = 'auto'`` defers to it)."""
    given = {name: value for name, value in settings.bound().items()
             if not (name == "freeze" and value == FREEZE_AUTO)}
    if not given:
        return
    name_of = type(config).__name__
    with gin.config_scope(None):  # unscoped: what a user's file binds
        try:
            bound = gin.get_bindings(type(config), resolve_references=False)
        except ValueError:  # not a gin configurable
            return
        for name, value in given.items():
            if name not in bound:
                continue
            old = copy.deepcopy(bound[name])  # gin's way of evaluating a reference or macro
            if old != value:
                raise GinConfigError(
                    f"gin binds {name_of}.{name} = {old!r} and ModelSettings.{name} = {value!r}, "
                    f"which set the run's model's {name} differently: bind one of them "
                    f"(tw_jax.models.ModelSettings.{name} sets it for every family)")


def _macro_is_set(name: str) -> bool:
    """Bound to something other than None (``base.gin`` gives MODEL_DIR None: unset)."""
    return macro(name, gin.REQUIRED) not in (gin.REQUIRED, None)


def _reset_search_paths() -> None:
    """Empty gin's search path list (it outlives ``clear_config``), the default ``''`` too.

    With ``''`` first, gin tries ``models/x.gin`` relative to the working folder and then as a
    Python package path, which crashes when some folder on ``sys.path`` is called ``models``
    (a namespace package has no file). Absolute prefixes avoid that lookup.
    """
    del gin.config._LOCATION_PREFIXES[:]  # noqa: SLF001
