"""What a lifelong run is asked to do (the CLI's arguments, typed), and the checks that need no
model: the method's name, the chain of periods, what each update trains on."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from tw_jax.evaluate.groups import DIFFSET, FULL, MIXREVIEW, REPLAY, TRAINS_ON
from tw_jax.io import paths
from tw_jax.lifelong.updates import TwJaxTrainer, UpdateTrainer
from tw_jax.tasks import names
from tw_jax.time import Period, TimeError, check_chain, parse_chain

_NAME = re.compile(r"^[a-z][a-z0-9_\-]*$")


class LifelongError(ValueError):
    """A lifelong run that cannot start: bad periods, unknown method, missing data."""


@dataclass(frozen=True)
class LifelongOptions:
    """Everything a lifelong run needs (the CLI's arguments). ``months``: the chain of periods,
    as :class:`~tw_jax.time.Period` or their names (``0809``, ``2024-12_2025-01``), or as the
    snapshots between them (``2024-12``, ``2025-01``, ``2025-02``); the run reads them once
    (:func:`check_months`). The run resolves the places into a copy, never into the caller's
    options."""

    gin_files: list[str]
    months: Sequence[str | Period]
    out_dir: str  # local path or URL (the run resolves it)
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


def method_name(gin_files: Sequence[str], method: str | None = None) -> str:
    """``method``, else the stem of the first gin file (``kadapter.gin`` → ``kadapter``)."""
    name = method or (paths.as_path(gin_files[0]).stem if gin_files else "")
    if not _NAME.match(name):
        raise LifelongError(f"method name {name!r} is not a lower-case name; pass --method")
    return name


def check_months(months: Sequence[str | Period]) -> list[Period]:
    """The chain of periods as given: periods (or their names) each following the one before
    (``0809, 0910``; ``2024-12_2025-01, 2025-01_2025-02``), or the snapshots between them
    (``2024-12, 2025-01, 2025-02``)."""
    try:
        if months and all(isinstance(m, Period) for m in months):
            return check_chain(list(months))  # type: ignore[arg-type]
        return parse_chain(str(m) for m in months)
    except TimeError as error:
        raise LifelongError(f"--months: {error}") from None


def training_task(method: str, period: Period, train_on: str | None = None) -> str:
    """The seqio task or mixture ``method`` trains on for ``period`` (``{objective}`` kept): its
    DiffSet, the new snapshot whole (FULL), the Mix-Review mixture, or the DiffSet with every
    earlier period's data replayed (:mod:`tw_jax.tasks.replay`)."""
    kind = train_on or TRAINS_ON.get(method)
    if kind == DIFFSET:
        return names.diffset(period)
    if kind == FULL:
        return names.full(period.new)
    if kind == MIXREVIEW:
        return names.mixreview(period)
    if kind == REPLAY:
        return names.replay(period)
    raise LifelongError(
        f"method {method!r}: unknown training data; name a known method "
        f"({', '.join(TRAINS_ON)}) or pass --train-on {DIFFSET}|{FULL}|{MIXREVIEW}|{REPLAY}"
    )


def default_initial_gin_files(gin_files: Sequence[str]) -> list[str]:
    """The method's gin files with the first replaced by ``initial.gin``."""
    return ["initial.gin", *gin_files[1:]]
