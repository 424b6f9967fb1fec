"""Orbax checkpoints of a training run, and where a run starts from.

A checkpoint is ``MODEL_DIR/checkpoints/<step>/`` with three items: ``params``, ``opt_state``
(both ``StandardSave`` pytrees, restored straight into their mesh shardings) and ``meta`` (JSON:
step, batches consumed, seed and the dropout key of the next step). Parameters are their own
item so that a later run can start from them without reading the optimizer state (for RecAdam
or Adam that is two or three more copies of the model).

Saving is asynchronous where orbax supports it: the arrays are copied off the devices and written
by a background thread while training goes on. Orbax writes into a temporary folder and renames
it when complete, so a process killed mid-save leaves no checkpoint that looks finished; the
latest *complete* step is what a restart resumes from. Once a save has finished, its files'
checksums are recorded beside it (:func:`seal`, :mod:`tw_jax.runtime.integrity`), and every
restore (resume, a starting point, evaluation) checks them first: a damaged step is skipped for
the newest intact one, with a warning naming it, and a run with no intact step stops with one
line.

A save that fails (a full disk: orbax's background thread fails, or its synchronous part raises)
stops training as soon as it is seen (:class:`Saves` asks after every step whether the save has
finished) with one :class:`CheckpointSaveError` naming the step folder, the reason and the last
good step; what the failed save left is removed, so it is never a step to resume from. Orbax
logs such a failure at ERROR, with tracebacks, from each of its threads; those records go to
this module's log at DEBUG instead (every orbax failure reaches us as an exception anyway), and
the late callbacks of the failed writes into orbax's closed event loop are not printed.

Starting point (:func:`initial_params`): the latest checkpoint in MODEL_DIR (automatic resume,
handled by the trainer), else ``INITIAL_CHECKPOINT_PATH``: a Hugging Face folder
(``config.json`` + safetensors), a checkpoint step folder of ours, or a MODEL_DIR whose latest
checkpoint is taken. Parameters it lacks (new LoRA / adapter / Modular weights) keep their fresh
initialisation and are named in the log; ``check`` (the trainer's) sees them first, and may refuse
a start that would initialise parameters of the base model.

Model settings (:func:`model_record`): every step the trainer saves records its model's config
in ``meta["model"]``, so a resume or an evaluation can say which settings differ
(:func:`setting_changes`: ``n_layer 3 → 4``) from the model it is asked to build.

Any layout. Every restore names its target: the current mesh's shardings (resume, a starting
point, evaluation) or host numpy (:func:`read_params`), so a checkpoint written by 8 devices or
2 hosts loads on 1, and the reverse. MODEL_DIR may be a bucket (gs://): orbax writes through
epath and TensorStore.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import traverse_util

from tw_jax.data.model_folder import is_model_folder
from tw_jax.errors import OutputError
from tw_jax.io import paths
from tw_jax.io.atomic import disk_full_errno, disk_full_reason
from tw_jax.io.paths import PathLike
from tw_jax.models import families_by_type
from tw_jax.models.hf_io import read_config
from tw_jax.runtime.integrity import MANIFEST, check_step, write_manifest

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit the model."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint whose tensors do not fit the model the configuration builds (a tensor of
    another shape, one the model lacks, one it lacks): it was trained with another
    configuration, which its MODEL_DIR's ``config.gin`` records."""


class CheckpointSaveError(OutputError):
    """A checkpoint that could not be written (a full disk, say); training stopped there. An
    :class:`OutputError`: the CLI prints it as one line and exits with status 2."""


class _OrbaxErrorsToDebug(logging.Filter):
    """Moves orbax's ERROR records to this module's log at DEBUG: a failed save is logged with
    its traceback by each orbax thread that sees it (through absl), and asyncio logs the other
    writes of it that nobody awaits any more; the failure itself reaches the trainer as an
    exception, which is reported as one line."""

    # Orbax's messages start "[process=0]" or "[step=10]"; the path names orbax only where
    # absl's own logger class (which finds the real caller) made the "absl" logger.
    _ORBAX_MESSAGE = re.compile(r"^\[(process|step)=")
    _ORBAX_FILE = f"{os.sep}orbax{os.sep}"
    # A never-awaited TensorStore write of a failed save ("Future exception was never
    # retrieved") names no orbax code, only the temporary folder orbax writes into.
    _ORBAX_TEMPORARY = ".orbax-checkpoint-tmp"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not self._from_orbax(record):
            return True
        log.debug("orbax: %s", record.getMessage().splitlines()[0])
        return False

    def _from_orbax(self, record: logging.LogRecord) -> bool:
        if self._ORBAX_FILE in record.pathname or self._ORBAX_MESSAGE.match(str(record.msg)):
            return True
        message = record.getMessage()
        if self._ORBAX_FILE in message:  # asyncio: a task of orbax's, by its code
            return True
        if self._ORBAX_TEMPORARY in message:  # asyncio: a TensorStore write into orbax's folder
            return True
        frames = record.exc_info[2] if record.exc_info else None
        while frames is not None:  # asyncio: an exception raised in orbax's code
            if self._ORBAX_FILE in frames.tb_frame.f_code.co_filename:
                return True
            frames = frames.tb_next
        return False


_ORBAX_FILTER = _OrbaxErrorsToDebug()


class _QuietLateCallbacks:
    """``sys.unraisablehook`` that drops one thing: TensorStore completing the other writes of a
    failed save after orbax has closed their event loop (``RuntimeError: Event loop is closed``
    from ``call_soon_threadsafe``, dozens of tracebacks per failed save); the rest goes to the
    hook it replaced. Installed once per process and left in place, as those callbacks can come
    until the interpreter exits."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        error, frames = unraisable.exc_value, unraisable.exc_traceback
        names = set()
        while frames is not None:
            names.add(frames.tb_frame.f_code.co_name)
            frames = frames.tb_next
        if (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"
                and "call_soon_threadsafe" in names):
            return
        self.previous(unraisable)


def _quiet_failed_saves() -> None:
    for name in ("absl", "asyncio"):
        logging.getLogger(name).addFilter(_ORBAX_FILTER)  # once: filters are a set
    if not isinstance(sys.unraisablehook, _QuietLateCallbacks):
        sys.unraisablehook = _QuietLateCallbacks(sys.unraisablehook)


def manager(model_dir: PathLike, *, keep: int | None, asynchronous: bool = True) -> Any:
    """An orbax ``CheckpointManager`` for ``MODEL_DIR/checkpoints`` keeping the last ``keep``."""
    _quiet_failed_saves()
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep,
        create=True,
        enable_async_checkpointing=asynchronous,
        cleanup_tmp_directories=True,
    )
    directory = paths.as_path(paths.resolve(model_dir)) / CHECKPOINTS
    return ocp.CheckpointManager(directory, item_names=("params", "opt_state", "meta"),
                                 options=options)


def save(mngr: Any, step: int, params: Any, opt_state: Any, meta: dict[str, Any]) -> None:
    """Start saving step ``step`` (returns before the write completes when asynchronous); a
    failure of the part that runs now is a :class:`CheckpointSaveError`."""
    try:
        mngr.save(
            step,
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(params),
                opt_state=ocp.args.StandardSave(opt_state),
                meta=ocp.args.JsonSave(meta),
            ),
            force=True,
        )
    except Exception as error:  # orbax and TensorStore raise many kinds
        raise _save_failed(mngr, step, error) from error


def save_params(model_dir: PathLike, step: int, params: Any, meta: dict[str, Any]) -> str:
    """Write ``params`` alone as step ``step`` of ``MODEL_DIR/checkpoints`` (synchronously,
    sealed): a starting point (INITIAL_CHECKPOINT_PATH) and what evaluation reads, not a run to
    resume (:func:`restore` says so). Returns the step folder; an existing step is an error."""
    mngr = manager(model_dir, keep=None, asynchronous=False)
    try:
        if step in mngr.all_steps():
            raise CheckpointError(f"{step_dir(mngr, step)}: exists already")
        try:
            mngr.save(step, args=ocp.args.Composite(params=ocp.args.StandardSave(params),
                                                    meta=ocp.args.JsonSave(meta)))
        except Exception as error:  # orbax and TensorStore raise many kinds
            raise _save_failed(mngr, step, error) from error
        seal(mngr, step)
        return step_dir(mngr, step)
    finally:
        close(mngr)


def step_dir(mngr: Any, step: int) -> str:
    return paths.join(str(mngr.directory), str(step))


def seal(mngr: Any, step: int | None) -> None:
    """Wait for the save of ``step`` to finish, then record its checksums (process 0), so that
    a later restore can tell it intact (:mod:`tw_jax.runtime.integrity`). A failed save, or
    checksums that cannot be written, is a :class:`CheckpointSaveError`."""
    if step is None:
        return
    try:
        mngr.wait_until_finished()
        if jax.process_index() == 0 and paths.isdir(step_dir(mngr, step)):
            write_manifest(step_dir(mngr, step))
    except Exception as error:  # orbax and TensorStore raise many kinds
        raise _save_failed(mngr, step, error) from error


def _save_failed(mngr: Any, step: int, error: BaseException) -> CheckpointSaveError:
    """The one-line error of a failed save, after removing what it left: the temporary folder
    and a step folder without its checksums (one process only; with several, the next run's
    manager removes orbax's temporaries)."""
    folder = step_dir(mngr, step)
    number = disk_full_errno(error)
    if number is not None:
        reason = disk_full_reason(number, folder)
    else:
        lines = str(error).strip().splitlines()
        reason = lines[0][:300] if lines else type(error).__name__
    remove_failed_save(folder)
    return CheckpointSaveError(folder, f"checkpoint not saved: {reason}")


def _remove_once(folder: str) -> bool:
    """Removes the failed save's temporary folders and an unsealed step folder; True when there
    was something to remove."""
    found = False
    for leftover in paths.glob(f"{folder}.orbax-checkpoint-tmp*"):
        paths.rmtree(leftover)
        found = True
    if paths.isdir(folder) and not paths.exists(paths.join(folder, MANIFEST)):
        paths.rmtree(folder)
        found = True
    return found


def remove_failed_save(folder: str, *, settle: float = 0.5, limit: float = 10.0) -> None:
    """Removes what a failed save of step folder ``folder`` left, until nothing has come back
    for ``settle`` seconds (at most ``limit``). One process only: with several, the next run's
    manager removes orbax's temporaries.

    Why more than once: when one of the save's writes fails, orbax raises at once while the
    other items' TensorStore writes are still running in native threads, and those create their
    folders again after a first removal."""
    if jax.process_count() != 1:
        return
    deadline = time.monotonic() + limit
    quiet_since = time.monotonic()
    while True:
        if _remove_once(folder):
            quiet_since = time.monotonic()
        now = time.monotonic()
        if now - quiet_since >= settle or now >= deadline:
            return
        time.sleep(0.05)


def close(mngr: Any, *, quietly: bool = False) -> None:
    """Waits for a pending save and closes the manager. ``quietly`` when training already stops
    on an error: a failure of the pending save must not replace that error."""
    if not quietly:
        mngr.close()
        return
    with contextlib.suppress(Exception):
        mngr.close()


class Saves:
    """The saves of one training run: each started after its step, sealed as soon as it has
    finished (asked after every step, so a failed save stops training within a step or two of
    it, not one checkpoint period later), and the last good step, for messages."""

    def __init__(self, mngr: Any, last_good: int | None) -> None:
        self.mngr = mngr
        self.last_good = last_good
        self.pending: int | None = None  # saved, checksums not written yet

    def start(self, done: int, params: Any, opt_state: Any, meta: dict[str, Any]) -> None:
        self.finish(done)
        with self._stopping_at(done):
            save(self.mngr, done, params, opt_state, meta)
        self.pending = done

    def poll(self, done: int) -> None:
        """Seals the pending save if it has finished (a failure raises here)."""
        if self.pending is not None and not self.mngr.is_saving_in_progress():
            self.finish(done)

    def finish(self, done: int) -> None:
        """Waits for the pending save and seals it."""
        if self.pending is None:
            return
        step, self.pending = self.pending, None
        with self._stopping_at(done):
            seal(self.mngr, step)
        self.last_good = step

    @contextlib.contextmanager
    def _stopping_at(self, done: int) -> Iterator[None]:
        try:
            yield
        except CheckpointSaveError as error:
            good = ("no checkpoint was saved" if self.last_good is None
                    else f"the last good checkpoint is step {self.last_good}, which a rerun "
                    "resumes from")
            raise CheckpointSaveError(
                error.path, f"{error.message}; training stopped at step {done}, {good}"
            ) from error.__cause__


def _newest_intact(root: str, steps: list[int]) -> tuple[int | None, list[int]]:
    """The newest of ``steps`` (folders ``root/<step>``) whose files match their checksums, and
    the damaged newer ones, each named in a warning. ``(None, [])`` for no steps; a
    :class:`CheckpointError` when every one is damaged."""
    damaged: list[int] = []
    reasons: list[str] = []
    for step in sorted(steps, reverse=True):
        folder = paths.join(root, str(step))
        problem = check_step(folder)
        if problem is None:
            return step, damaged
        log.warning("%s: damaged, not used: %s", folder, problem)
        damaged.append(step)
        reasons.append(f"step {step}: {problem}")
    if damaged:
        raise CheckpointError(
            f"{root}: every checkpoint is damaged ({'; '.join(reasons)}); move the folder away "
            "to start over"
        )
    return None, []


def latest_intact_step(mngr: Any) -> int | None:
    """The newest step whose files match their checksums, for training to resume from. Damaged
    newer steps are named in a warning and deleted (training saves those steps again). None
    when there is no checkpoint; a :class:`CheckpointError` when every one is damaged."""
    step, damaged = _newest_intact(str(mngr.directory), list(mngr.all_steps()))
    for newer in damaged:  # training goes on from ``step`` and saves those steps again
        mngr.delete(newer)
    if damaged:
        log.warning("resuming from step %d, the newest intact checkpoint (damaged newer steps "
                    "deleted: %s)", step, ", ".join(map(str, damaged)))
    return step


def restore(mngr: Any, step: int, abstract_params: Any, abstract_opt_state: Any) -> tuple:
    """``(params, opt_state, meta)`` of ``step``, placed as the abstract trees' shardings say
    (whatever mesh or host count saved them: orbax reshards onto the target). A step that holds
    parameters alone (converted from T5X) is a :class:`CheckpointError` saying how to start
    from it instead."""
    if not paths.isdir(paths.join(step_dir(mngr, step), "opt_state")):
        raise CheckpointError(
            f"{step_dir(mngr, step)}: holds parameters only (no optimizer state: written by "
            "tw-jax t5x-checkpoint from-t5x), so a run cannot resume from it; start a new "
            f"MODEL_DIR from it with --gin.INITIAL_CHECKPOINT_PATH={step_dir(mngr, step)!r}")
    try:
        restored = mngr.restore(
            step,
            args=ocp.args.Composite(
                params=ocp.args.StandardRestore(abstract_params),
                opt_state=ocp.args.StandardRestore(abstract_opt_state),
                meta=ocp.args.JsonRestore(),
            ),
        )
    except (ValueError, OSError, KeyError, FileNotFoundError) as error:
        # the whole message on one line: orbax says what differs after its first line
        whole = " ".join(str(error).split()) or type(error).__name__
        raise CheckpointError(f"{step_dir(mngr, step)}: cannot be restored: {whole}") from error
    return restored["params"], restored["opt_state"], dict(restored["meta"])


def _has_params(folder: str) -> bool:
    return paths.isdir(paths.join(folder, "params"))


def step_folder(path: PathLike) -> str:
    """A checkpoint step folder from a step folder, a ``checkpoints`` folder or a MODEL_DIR
    (its newest intact step: a damaged newer one is skipped with a warning). A damaged step
    folder given by name is a :class:`CheckpointError`."""
    path = paths.resolve(path)
    if _has_params(path):
        problem = check_step(path)
        if problem:
            raise CheckpointError(f"{path}: damaged: {problem}")
        return path
    for root in (paths.join(path, CHECKPOINTS), path):
        if not paths.isdir(root):
            continue
        steps = [int(n.rstrip("/")) for n in paths.listdir(root) if n.rstrip("/").isdigit()]
        step, _ = _newest_intact(root, [s for s in steps if _has_params(paths.join(root, str(s)))])
        if step is not None:
            return paths.join(root, str(step))
    raise CheckpointError(
        f"{path}: neither a Hugging Face folder (config.json) nor an orbax checkpoint of tw_jax "
        f"(a step folder with params/, or a MODEL_DIR with {CHECKPOINTS}/<step>/params)"
    )


def is_hf_folder(path: PathLike) -> bool:
    return is_model_folder(path)


def _read_hf(folder: str) -> Any:
    model_type = read_config(folder).get("model_type")
    family = families_by_type().get(model_type)
    if family is None:
        raise CheckpointError(f"{paths.join(folder, 'config.json')}: model_type {model_type!r} "
                              "not supported")
    return family.load_hf(folder)[1]


def read_tree(directory: PathLike) -> Any:
    """An orbax pytree item (``params``, or any other saved with orbax's pytree handlers) as
    numpy arrays on the host, whatever device layout saved it."""
    as_numpy = jax.tree.map(
        lambda _: ocp.RestoreArgs(restore_type=np.ndarray), _saved_shapes(str(directory))
    )
    with ocp.PyTreeCheckpointer() as checkpointer:
        return checkpointer.restore(directory, args=ocp.args.PyTreeRestore(restore_args=as_numpy))


def saved_params(step_dir: str) -> Any:
    """The parameter tree (shapes and dtypes, no data) a checkpoint step holds."""
    return _saved_shapes(paths.join(step_dir, "params"))


def saved_meta(step_dir: str) -> dict[str, Any] | None:
    """The JSON ``meta`` item of a checkpoint step (step, seed, the model's settings), read
    alone; None when it is missing or unreadable."""
    try:
        meta = ocp.JsonCheckpointHandler().restore(paths.as_path(paths.join(step_dir, "meta")),
                                                   args=ocp.args.JsonRestore())
    except (OSError, ValueError):
        return None
    return dict(meta) if isinstance(meta, dict) else None


def model_record(model_config: Any) -> dict[str, Any]:
    """What a checkpoint records of its model: the config's class and every setting, as JSON."""
    settings = dataclasses.asdict(model_config) if dataclasses.is_dataclass(model_config) else {}
    return {"config": type(model_config).__name__,
            "settings": json.loads(json.dumps(settings, default=str))}


def setting_differences(recorded: Mapping[str, Any], requested: Mapping[str, Any]
                        ) -> list[tuple[str, Any, Any]]:
    """``(dotted name, recorded, requested)`` of each setting that differs between two
    :func:`model_record` records (``("model", class, class)`` for another config class)."""
    if recorded.get("config") != requested.get("config"):
        return [("model", recorded.get("config"), requested.get("config"))]
    old = traverse_util.flatten_dict(dict(recorded.get("settings", {})), sep=".")
    new = traverse_util.flatten_dict(dict(requested.get("settings", {})), sep=".")
    return [(name, old.get(name), new.get(name)) for name in sorted(set(old) | set(new))
            if old.get(name) != new.get(name)]


def setting_changes(recorded: Mapping[str, Any], requested: Mapping[str, Any]) -> list[str]:
    """``["n_layer 3 → 4", "lora.rank 8 → 16"]``: the settings that differ, dotted."""
    return [f"{name} {old!r} → {new!r}".replace("'", "")
            for name, old, new in setting_differences(recorded, requested)]


def _saved_shapes(params_dir: str) -> Any:
    """The checkpoint's parameter tree: ``{name: ...: ArrayMetadata}``, read from its metadata."""
    metadata = ocp.StandardCheckpointHandler().metadata(paths.as_path(params_dir))
    return metadata.tree


def read_params(path: PathLike) -> Any:
    """Unboxed parameters (numpy, on the host) of a Hugging Face folder or an orbax checkpoint
    of ours, whatever device layout saved it."""
    folder = paths.resolve(path)
    if not paths.exists(folder):
        raise CheckpointError(f"{folder}: initial checkpoint not found")
    if is_hf_folder(folder):
        return _read_hf(folder)
    return read_tree(paths.join(step_folder(folder), "params"))


def _target(saved: Any, abstract: Any, where: tuple[str, ...] = ()) -> Any:
    """The restore target: the checkpoint's tree with the model's shapes, dtypes and shardings.

    A checkpoint tensor the model lacks, or one of another shape, means the config does not fit
    the checkpoint: an error naming it."""
    if not isinstance(saved, dict):
        if abstract is None or isinstance(abstract, dict):
            raise CheckpointMismatchError(
                f"checkpoint tensor {'/'.join(where)} has no place in the model")
        if tuple(saved.shape) != tuple(abstract.shape):
            raise CheckpointMismatchError(
                f"checkpoint tensor {'/'.join(where)} has shape {tuple(saved.shape)}, the model "
                f"expects {tuple(abstract.shape)}"
            )
        return abstract
    abstract = abstract if isinstance(abstract, dict) else {}
    unexpected = sorted(set(saved) - set(abstract))
    if unexpected:
        raise CheckpointMismatchError(
            f"checkpoint has tensors the model lacks under {'/'.join(where) or 'the top level'}: "
            f"{unexpected}"
        )
    return {key: _target(value, abstract[key], (*where, key)) for key, value in saved.items()}


def _overlay(fresh: Any, loaded: Any, where: tuple[str, ...], missing: list[str]) -> Any:
    if isinstance(fresh, dict):
        loaded = loaded if isinstance(loaded, dict) else {}
        return {k: _overlay(v, loaded.get(k), (*where, k), missing) for k, v in fresh.items()}
    if loaded is None:
        missing.append("/".join(where))
        return fresh
    return loaded


def initial_params(
    fresh: Any | Callable[[], Any], path: PathLike, abstract_params: Any,
    check: Callable[[str, list[str]], None] | None = None,
) -> tuple[Any, list[str]]:
    """``fresh`` (unboxed, placed) with every tensor the checkpoint at ``path`` has replaced by
    it, in the shardings of ``abstract_params``; and the paths that kept their fresh values.

    ``fresh`` may be a function that makes them: it is called only when the checkpoint lacks a
    tensor, so a checkpoint that has them all skips initialising (and compiling the
    initialiser of) a model whose every value it replaces. ``check(folder, missing)``, when
    given, is called with the paths the checkpoint lacks before anything is initialised (it
    raises to refuse them).

    An orbax checkpoint is restored straight into the current mesh, whatever mesh or host count
    saved it; a Hugging Face folder is read on the host and placed.
    """
    folder = paths.resolve(path)
    if not paths.exists(folder):
        raise CheckpointError(f"{folder}: initial checkpoint not found")
    try:
        if is_hf_folder(folder):
            host = _read_hf(folder)
            loaded = jax.tree.map(
                lambda x, a: jax.device_put(np.asarray(x, a.dtype), a.sharding),
                host, _target(_shapes_of(host), abstract_params),
            )
        else:
            params_dir = paths.join(step_folder(folder), "params")
            target = _target(_saved_shapes(params_dir), abstract_params)
            with ocp.StandardCheckpointer() as checkpointer:
                loaded = checkpointer.restore(params_dir, target)
    except CheckpointError as error:  # the same kind, with the folder
        raise type(error)(f"{folder}: {error}") from error
    missing: list[str] = []
    merged = _overlay(abstract_params if callable(fresh) else fresh, loaded, (), missing)
    if check is not None:
        check(folder, missing)
    if callable(fresh) and missing:
        merged = _overlay(fresh(), loaded, (), [])
    if missing:
        log.info(
            "%s: %d tensors are not in the checkpoint and start fresh: %s", folder, len(missing),
            ", ".join(missing),
        )
    return merged, missing


def _shapes_of(tree: Any) -> Any:
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype), tree)
