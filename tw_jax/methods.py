"""Every method tw_jax compares, in one table: the lifelong runner, the demo's ``--methods``, the
report's order and colours and the results schema all read it, so a new method is one entry
here plus its gin file(s) (``gin/methods/<name>.gin`` with the method's settings and
``gin/<name>.gin``, the paper's run), and, when it adds a term to the loss, one module in
``tw_jax/train/`` (:mod:`tw_jax.train.loss_terms`). Plain data: ``tw-jax --help`` lists the
methods without loading JAX or TensorFlow.

``trains_on`` is what each update trains on (:data:`DIFFSET`: the period's DiffSet;
:data:`FULL`: the new snapshot whole; :data:`MIXREVIEW`: the DiffSet mixed with the initial
snapshot, as the papers define Mix-Review; :data:`REPLAY`: the DiffSet mixed with every earlier
period's DiffSet and the initial snapshot, TiC-LM's replay); ``None`` for INITIAL and for the
open-book methods, which train nothing. ``t5x`` says whether ``python -m t5x.train`` runs it
(``gin/t5x/<name>.gin``); the others are ``tw-jax train``'s only.
"""

from __future__ import annotations

from dataclasses import dataclass

DIFFSET, FULL, MIXREVIEW, REPLAY = "diffset", "full", "mixreview", "replay"
TRAINING_DATA: tuple[str, ...] = (DIFFSET, FULL, MIXREVIEW, REPLAY)


@dataclass(frozen=True)
class Method:
    """One method: its name (the gin file's stem, the results' ``method``), what it trains on,
    where it comes from, and whether the real T5X runs it."""

    name: str
    trains_on: str | None
    source: str
    t5x: bool = True
    open_book: bool = False


# The report's order: INITIAL, TemporalWiki's methods as its tables list them, the methods a
# 2026 study adds (TiC-LM's), then open book.
METHOD_TABLE: tuple[Method, ...] = (
    Method("initial", None, "the model every method starts from"),
    Method("full", FULL, "TemporalWiki: the whole new snapshot"),
    Method("diff", DIFFSET, "TemporalWiki: the DiffSet (Vanilla)"),
    Method("recadam", DIFFSET, "Chen et al. 2020 (TemporalWiki, CKL)"),
    Method("mixreview", MIXREVIEW, "He et al. 2021 (TemporalWiki, CKL)"),
    Method("lora", DIFFSET, "Hu et al. 2022 (TemporalWiki, CKL)"),
    Method("kadapter", DIFFSET, "Wang et al. 2021 (TemporalWiki, CKL)"),
    Method("modular", DIFFSET, "CKL: a new encoder beside the frozen one"),
    Method("bm25", None, "open book: INITIAL reading BM25 passages", open_book=True),
    Method("dpr", None, "open book: INITIAL reading DPR passages", open_book=True),
    Method("ewc", DIFFSET, "Kirkpatrick et al. 2017 (TiC-LM)", t5x=False),
    Method("lwf", DIFFSET, "Li and Hoiem 2017 (TiC-LM)", t5x=False),
    Method("replay", REPLAY, "TiC-LM: earlier months' data at a fixed ratio"),
    Method("vanilla", DIFFSET, "TemporalWiki's name for DIFF"),
)
BY_NAME: dict[str, Method] = {method.name: method for method in METHOD_TABLE}

# Names in the report's order (the results schema's known methods; others sort last).
METHOD_NAMES: tuple[str, ...] = tuple(m.name for m in METHOD_TABLE if m.name != "vanilla")
# method -> what it trains on each month
TRAINS_ON: dict[str, str] = {m.name: m.trains_on for m in METHOD_TABLE if m.trains_on}
OPEN_BOOK: tuple[str, ...] = tuple(m.name for m in METHOD_TABLE if m.open_book)
T5X_METHODS: tuple[str, ...] = tuple(m.name for m in METHOD_TABLE if m.t5x and m.trains_on)


def under_t5x_refusal(name: str) -> str | None:
    """The one line refusing ``name`` under the real T5X, or None when T5X runs it."""
    method = BY_NAME.get(name)
    if method is None or method.t5x or not method.trains_on:
        return None
    return (f"method {name!r} adds a loss term that only tw-jax's trainer runs: train it with "
            f"`tw-jax train --gin_file={name}.gin ...` (or `tw-jax lifelong` without "
            f"--trainer t5x); T5X runs {', '.join(T5X_METHODS)}")
