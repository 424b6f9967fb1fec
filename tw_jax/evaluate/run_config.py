"""The configuration ``tw-jax eval`` / ``infer`` read for a trained run, and their shortcuts.

A trained MODEL_DIR holds ``config.gin``, written by the trainer with every binding it trained
with (the demo's and the lifelong runner's runs too: their vocabulary size, their model's
shape). Shipped gin files rebuild another model (``models/gpt2_tiny.gin`` has GPT-2's 50257
tokens, the demo's vocabulary 1257), so a run is evaluated with its own file, as T5X's
``eval.py --gin_file=MODEL_DIR/config.gin``. Given ``--gin.MODEL_DIR=DIR`` and no
``--gin_file``, the commands read ``DIR/config.gin`` (:func:`gin_files`); ``--task`` and
``--split`` are the bindings of the task and split (:func:`shortcut_bindings`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.runtime.gin_setup import binding_key, binding_value

RUN_CONFIG = "config.gin"


def model_dir_binding(bindings: Sequence[str]) -> str | None:
    """The value of the last ``MODEL_DIR=...`` binding (quoted or not), or None."""
    found = None
    for binding in bindings:
        if binding_key(binding) == "MODEL_DIR" and binding.partition("=")[2].strip():
            value = binding_value(binding)
            found = None if value is None else str(value)
    return found


def run_config_path(model_dir: str) -> str:
    """``MODEL_DIR/config.gin``: where the trainer records a run's configuration."""
    return paths.join(model_dir, RUN_CONFIG)


def gin_files(command: str, gin_file: Sequence[str], bindings: Sequence[str]) -> list[str]:
    """The gin files to parse: those given, else the run's own ``MODEL_DIR/config.gin``.

    With neither a ``--gin_file`` nor a MODEL_DIR that holds ``config.gin``, a
    :class:`UsageError` says what to pass."""
    if gin_file:
        return list(gin_file)
    model_dir = model_dir_binding(bindings)
    if model_dir is None:
        raise UsageError(f"pass --gin.MODEL_DIR=DIR (a trained run: its {RUN_CONFIG} is read) or "
                         f"the run's gin files (--gin_file=...); see tw-jax {command} --help")
    config = run_config_path(model_dir)
    if not paths.exists(config):
        raise UsageError(f"{config} not found: {model_dir} is not a trained run's folder; pass "
                         "the gin files it was trained with (--gin_file=...)")
    return [config]


def shortcut_bindings(command: str, task: str | None, split: str | None) -> list[str]:
    """The bindings of ``--task`` (the ``MIXTURE_OR_TASK_NAME`` macro) and ``--split`` (the
    command's own ``split``, which a run's ``EVAL_SPLIT`` sets otherwise)."""
    bindings = [f"MIXTURE_OR_TASK_NAME={task}"] if task else []
    if split:
        bindings.append(f"tw_jax.evaluate.{'evaluate' if command == 'eval' else 'infer'}"
                        f".split={split}")
    return bindings


def mismatch_hint(command: str, gin_file: Sequence[str], bindings: Sequence[str]) -> str:
    """What to say after a checkpoint that does not fit the configured model: the run was
    trained with another configuration, recorded in its ``config.gin``."""
    model_dir = model_dir_binding(bindings)
    if model_dir is None:
        return "the checkpoint was trained with another configuration: pass its own gin files"
    config = run_config_path(model_dir)
    if config in gin_file or not paths.exists(config):
        return ("the checkpoint was trained with another configuration than the gin files "
                "given")
    return (f"the checkpoint was trained with another configuration, the one {config} records: "
            f"leave out the --gin_file flags to use it (tw-jax {command} "
            f"--gin.MODEL_DIR={model_dir} --task ...)")
