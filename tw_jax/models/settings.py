"""The settings a run gives whatever model it trains, as one typed object: precision,
rematerialisation, the method's variant and what it freezes.

Every family's config has fields of these names (``dtype``, ``remat``, ``lora`` ...), but a gin
file that binds them per config class (``T5Config.dtype = 'bfloat16'``) leaves every other family
alone: a Llama under such a ``runs/gpu.gin`` would train in float32, and under such a
``lora.gin`` without LoRA. :class:`ModelSettings` names each setting once, for any family; a run
file or a method file binds it (``tw_jax.models.ModelSettings.dtype = 'bfloat16'``) and
:func:`apply_settings` writes it into the run's model config. Each field left None leaves the
model's own value.

A setting the model cannot take is a :class:`ModelSettingsError` naming the setting and the
family, never ignored: its config has no such field (Modular on GPT-2, K-Adapter on a Llama), or
the family refuses the value (its ``__post_init__`` raises: BART with K-Adapter; or it cannot
freeze that way: ``freeze='encoder'`` on a decoder-only model).

``freeze`` takes the policies of :mod:`tw_jax.models.variants` (``'none'``, ``'encoder'``,
``'base'``) and :data:`FREEZE_AUTO`: the family's choice for the variants the model carries, as
:func:`~tw_jax.models.variants.freeze_policy` makes it of a config whose ``freeze`` is None (T5
freezes its encoder, as CKL does; every other family its base parameters, as TemporalWiki does
for GPT-2; nothing without a variant), written into the config as that policy. A config that
already names its freeze (a gin file binding it per class, a run Python changed) keeps it. The
method files use it, so T5 keeps its ``'encoder'`` and GPT-2 its ``'base'``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from tw_jax.models.variants import (
    FREEZE_POLICIES,
    VARIANT_FIELDS,
    KAdapterConfig,
    LoRAConfig,
    ModularConfig,
    freeze_policy,
)

FREEZE_AUTO = "auto"
FREEZE_SETTINGS = (*FREEZE_POLICIES, FREEZE_AUTO)
_VARIANT_TYPES = {"lora": LoRAConfig, "kadapter": KAdapterConfig, "modular": ModularConfig}

__all__ = ["FREEZE_AUTO", "ModelSettings", "ModelSettingsError", "apply_settings"]


class ModelSettingsError(ValueError):
    """A setting the run's model cannot take; one line naming the setting and the family.

    ``setting`` (``ModelSettings.modular (the modular method)``), ``family`` (``a GPT2Config``)
    and ``reason`` (``has no modular variant: pick another method or model``) let a caller say
    where the setting came from (gin's ``gin binds ... but the run's MODEL is ...``)."""

    def __init__(self, setting: str, family: str, reason: str) -> None:
        super().__init__(f"{setting} cannot apply to the run's model, {family}, which {reason}")
        self.setting, self.family, self.reason = setting, family, reason

    def __reduce__(self) -> tuple[Any, ...]:  # pickles with its three parts
        return type(self), (self.setting, self.family, self.reason)


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """What a run sets on whatever model it uses; None leaves the model's value.

    ``dtype`` is the compute dtype (``'bfloat16'`` on accelerators), ``param_dtype`` the
    parameters'; ``remat`` rematerialises each block in the backward pass; ``lora``,
    ``kadapter``, ``modular`` switch a method's variant on; ``freeze`` says which base
    parameters train (see the module docstring for ``'auto'``). They are applied in this
    order, ``freeze`` last: ``'auto'`` depends on the variants.
    """

    dtype: str | None = None
    param_dtype: str | None = None
    remat: bool | None = None
    lora: LoRAConfig | None = None
    kadapter: KAdapterConfig | None = None
    modular: ModularConfig | None = None
    freeze: str | None = None

    def __post_init__(self) -> None:
        for name in ("dtype", "param_dtype"):
            value = getattr(self, name)
            if value is not None and not _is_float_dtype(value):
                raise ValueError(f"ModelSettings.{name}={value!r} is not a floating-point dtype "
                                 "name ('float32', 'bfloat16', 'float16')")
        if self.remat is not None and not isinstance(self.remat, bool):
            raise TypeError(f"ModelSettings.remat={self.remat!r} must be True, False or None")
        for name, cls in _VARIANT_TYPES.items():
            value = getattr(self, name)
            if value is not None and not isinstance(value, cls):
                raise TypeError(f"ModelSettings.{name} must be a {cls.__name__} "
                                f"(@tw_jax.models.{cls.__name__}()), got {value!r}")
        if self.freeze is not None and self.freeze not in FREEZE_SETTINGS:
            raise ValueError(f"ModelSettings.freeze={self.freeze!r} is not one of "
                             f"{FREEZE_SETTINGS}")

    def bound(self) -> dict[str, Any]:
        """The settings given (not None), in field order."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)
                if getattr(self, field.name) is not None}


def apply_settings(config: Any, settings: ModelSettings) -> Any:
    """``config`` with every setting of ``settings`` given (``dataclasses.replace``, one field
    at a time so that a refusal names its setting); a setting the config cannot take is a
    :class:`ModelSettingsError`. Applying the same settings again changes nothing."""
    fields = {field.name for field in dataclasses.fields(config)}
    for name, value in settings.bound().items():
        if name not in fields:
            kind = "variant" if name in VARIANT_FIELDS else "field"
            advice = ": pick another method or model" if name in VARIANT_FIELDS else ""
            raise ModelSettingsError(_setting(name, value), _family(config),
                                     f"has no {name} {kind}{advice}")
        if name == "freeze" and value == FREEZE_AUTO:
            if config.freeze is not None:
                continue  # the model's config names its freeze already
            value = freeze_policy(config)
        if getattr(config, name) == value:
            continue
        try:
            config = dataclasses.replace(config, **{name: value})
            if name == "freeze":
                freeze_policy(config)  # what the family cannot freeze, refused now
        except (ValueError, TypeError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            raise ModelSettingsError(_setting(name, value), _family(config),
                                     f"refuses it: {reason}") from None
    return config


def _setting(name: str, value: Any) -> str:
    if name in VARIANT_FIELDS:
        return f"ModelSettings.{name} (the {name} method)"
    return f"ModelSettings.{name} = {value!r}"


def _family(config: Any) -> str:
    """``a GPT2Config``: the family, by its config class."""
    return f"a {type(config).__name__}"


def _is_float_dtype(name: Any) -> bool:
    if not isinstance(name, str):
        return False
    try:
        return bool(jnp.issubdtype(jnp.dtype(name), jnp.floating))
    except TypeError:
        return False
