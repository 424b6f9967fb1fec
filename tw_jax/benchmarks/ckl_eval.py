"""CKL's zero-shot evaluation as a function: :func:`evaluate` takes a :class:`CklEvalConfig`;
``tw-jax ckl eval`` only parses its arguments into it, so a notebook or a sweep runs the same
code (``eval-phases`` is :func:`tw_jax.benchmarks.ckl_phases.evaluate_phases`).

One call registers the CKL folder's probe tasks, checks the request (tasks, their results
categories, the method and phase names) before any model is loaded, loads the model once, decodes
and scores each chosen set (:func:`tw_jax.evaluate.ckl.evaluate_task`), appends
``OUT/results.jsonl`` and, with ``predictions``, writes each set's predictions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tw_jax.errors import UsageError
from tw_jax.evaluate import ckl
from tw_jax.evaluate.results import CKL_CATEGORIES, Result, append_results
from tw_jax.io import paths
from tw_jax.tasks.ckl import register_ckl

# The four sets of CKL Table 2, scored when no task is named.
MAIN_TASKS = ("ckl_invariant_lama", "ckl_updated_lama", "ckl_new_lama", "ckl_new_lama_easy")


def default_vocab(vocab: str | None, model: str | None) -> str | None:
    """``vocab``, else the Hugging Face folder's spiece.model when it has one."""
    if vocab:
        return vocab
    if model and paths.isfile(paths.join(model, "spiece.model")):
        return paths.join(model, "spiece.model")
    return None


@dataclass(frozen=True)
class CklEvalConfig:
    """One model scored on a CKL folder's probe sets (``tw-jax ckl eval``'s flags)."""

    data: str  # a CKL folder or zip, released or built
    out: str  # results.jsonl goes here
    model: str | None = None  # a Hugging Face folder; or
    model_dir: str | None = None  # an orbax MODEL_DIR with the gin files that built its model
    gin_files: tuple[str, ...] = ()
    gin_bindings: tuple[str, ...] = ()
    gin_search_paths: tuple[str, ...] = ()
    vocab: str | None = None  # default: the ``model`` folder's spiece.model
    method: str = "initial"
    phase: str = "0001"  # the eval month these sets belong to
    trained_through: str | None = None  # default: base for initial, else the phase
    # task → results category; None: CKL Table 2's sets present, each in its own category
    tasks: Mapping[str, str] | None = None
    predictions: str | None = None  # also write each set's predictions here
    beam_size: int = 1  # CKL's code used 2 beams
    batch_size: int = 32
    max_probes: int | None = None

    @property
    def trained(self) -> str:
        return self.trained_through or ("base" if self.method == "initial" else self.phase)


def chosen_tasks(config: CklEvalConfig, present: Mapping[str, str]) -> dict[str, str]:
    """Task → results category of the request, checked against the folder's tasks."""
    if config.tasks is None:
        chosen = {t: present[t] for t in present if t in MAIN_TASKS}
    else:
        chosen = {t: c or present.get(t, "") for t, c in config.tasks.items()}
    unknown = [t for t in chosen if t not in present or chosen[t] not in CKL_CATEGORIES]
    if unknown or not chosen:
        raise UsageError(f"no probe task {unknown or ''} in {config.data} (found: "
                         f"{', '.join(present) or 'none'}; categories "
                         f"{', '.join(CKL_CATEGORIES)})")
    if len(set(chosen.values())) != len(chosen):
        raise UsageError(f"tasks {list(chosen)} share a results category; evaluate them apart "
                         "or give one another (TASK:CATEGORY)")
    return chosen


@dataclass
class CklOutcome:
    scored: list[ckl.SetScores]
    results: list[Result]
    results_path: str


def evaluate(config: CklEvalConfig, echo: Callable[[str], None] = print) -> CklOutcome:
    """Score the model on the chosen sets (module docstring); ``echo`` gets one line per set
    as it is scored."""
    names = register_ckl(config.data, default_vocab(config.vocab, config.model))
    chosen = chosen_tasks(config, ckl.category_map(names))
    try:  # a bad method or month is reported before any decoding
        Result(config.method, config.trained, config.phase, "unchanged", "em", 0.0).validate()
    except ValueError as error:
        raise UsageError(str(error)) from None
    source = ckl.ModelSource(hf_dir=config.model, model_dir=config.model_dir,
                             gin_files=list(config.gin_files),
                             gin_bindings=list(config.gin_bindings),
                             gin_search_paths=list(config.gin_search_paths))
    scored = []
    with ckl.loaded_model(source) as loaded:
        for task, category in chosen.items():
            result = ckl.evaluate_task(loaded.module, loaded.params, task, category=category,
                                       beam_size=config.beam_size,
                                       batch_size=config.batch_size, limit=config.max_probes)
            if result is not None:
                scored.append(result)
                echo(ckl.summary_line(result))
    results = ckl.results_of(scored, config.method, config.trained, config.phase)
    if config.predictions:
        for result in scored:
            ckl.write_predictions(config.predictions, f"{config.method}.{config.trained}", result)
    return CklOutcome(scored, results, str(append_results(config.out, results)))
