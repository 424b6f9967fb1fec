"""Checkpoint saves that fail (a full disk): one CheckpointSaveError naming the step, the reason
and the last good step; what the failed save left is removed, so it is never the step a resume
takes; orbax's own error logging of it is kept off the console."""

from __future__ import annotations

import errno
import logging
import sys
from collections import namedtuple
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import pytest

from tw_jax.io import atomic
from tw_jax.runtime import checkpoints
from tw_jax.runtime.checkpoints import CheckpointSaveError, Saves
from tw_jax.runtime.integrity import MANIFEST

_USAGE = namedtuple("usage", "total used free")
NO_SPACE = ValueError(
    'OUT_OF_RANGE: Error writing "w/0" in OCDBT database at local file "x": Failed to write '
    "8769536 bytes to file 25: No space left on device [os_error_code='28']")


def _state(value: float) -> tuple[dict, dict, dict]:
    return {"w": np.full((4,), value, np.float32)}, {"m": np.zeros((4,), np.float32)}, {}


@pytest.fixture
def three_mib_free(monkeypatch):
    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda path: _USAGE(1 << 30, 0, 3 << 20))


@pytest.fixture
def saved(tmp_path):
    """A manager whose step 1 is saved and sealed."""
    mngr = checkpoints.manager(tmp_path, keep=None)
    saves = Saves(mngr, last_good=None)
    params, opt_state, _ = _state(1.0)
    saves.start(1, params, opt_state, {"step": 1})
    saves.finish(1)
    assert (tmp_path / "checkpoints" / "1" / MANIFEST).exists()
    yield tmp_path, mngr, saves
    checkpoints.close(mngr, quietly=True)


def test_checksums_that_cannot_be_written_fail_the_save_and_remove_the_step(
        saved, monkeypatch, three_mib_free):
    model_dir, mngr, saves = saved

    def full(step_dir):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoints, "write_manifest", full)
    params, opt_state, _ = _state(2.0)
    saves.start(2, params, opt_state, {"step": 2})
    with pytest.raises(CheckpointSaveError) as raised:
        saves.finish(3)
    assert str(raised.value) == (
        f"{model_dir}/checkpoints/2: checkpoint not saved: no space left on device while writing "
        "it (3 MiB free on that filesystem); training stopped at step 3, the last good "
        "checkpoint is step 1, which a rerun resumes from")
    assert sorted(p.name for p in (model_dir / "checkpoints").iterdir()) == ["1"]
    assert saves.pending is None and saves.last_good == 1


def test_a_half_written_step_is_never_the_one_resumed(saved):
    model_dir, mngr, _ = saved
    checkpoints.close(mngr)
    half = model_dir / "checkpoints" / "2.orbax-checkpoint-tmp"  # a save that never finished
    (half / "params").mkdir(parents=True)
    (half / "params" / "data").write_bytes(b"partial")
    again = checkpoints.manager(model_dir, keep=None)
    try:
        assert list(again.all_steps()) == [1]
        assert checkpoints.latest_intact_step(again) == 1
        assert checkpoints.step_folder(model_dir) == str(model_dir / "checkpoints" / "1")
    finally:
        checkpoints.close(again)


def test_a_failed_background_save_stops_at_the_next_poll(saved, monkeypatch, three_mib_free):
    model_dir, mngr, saves = saved
    params, opt_state, _ = _state(2.0)
    saves.start(2, params, opt_state, {"step": 2})
    saves.finish(2)
    leftover = model_dir / "checkpoints" / "4.orbax-checkpoint-tmp"
    leftover.mkdir()
    saves.pending = 4  # as if step 4's save had started and failed in orbax's thread
    running = [True]
    monkeypatch.setattr(mngr, "is_saving_in_progress", lambda: running[0])

    def failed():
        raise NO_SPACE

    monkeypatch.setattr(mngr, "wait_until_finished", failed)
    saves.poll(5)  # still running: training goes on
    running[0] = False
    with pytest.raises(CheckpointSaveError) as raised:
        saves.poll(6)
    assert str(raised.value) == (
        f"{model_dir}/checkpoints/4: checkpoint not saved: no space left on device while writing "
        "it (3 MiB free on that filesystem); training stopped at step 6, the last good "
        "checkpoint is step 2, which a rerun resumes from")
    assert raised.value.__cause__ is NO_SPACE
    assert not leftover.exists()
    assert sorted(p.name for p in (model_dir / "checkpoints").iterdir()) == ["1", "2"]


def test_a_failed_synchronous_save_names_its_first_line(saved, monkeypatch):
    model_dir, mngr, saves = saved

    def refused(step, **kwargs):
        raise PermissionError("denied\nmore detail")

    monkeypatch.setattr(mngr, "save", refused)
    with pytest.raises(CheckpointSaveError) as raised:
        saves.start(2, *_state(2.0)[:2], {"step": 2})
    assert str(raised.value) == (
        f"{model_dir}/checkpoints/2: checkpoint not saved: denied; training stopped at step 2, "
        "the last good checkpoint is step 1, which a rerun resumes from")


def _record(name: str, level: int, msg: str, pathname: str = "/x/y.py", exc_info=None):
    return logging.LogRecord(name, level, pathname, 1, msg, (), exc_info)


def test_orbax_error_records_go_to_debug(caplog):
    noise = checkpoints._ORBAX_FILTER
    with caplog.at_level(logging.DEBUG, logger=checkpoints.log.name):
        assert not noise.filter(_record("absl", logging.ERROR, "[process=0] Failed to run 5 "
                                        "Handler Commit operations"))
        assert not noise.filter(_record("absl", logging.ERROR, "boom",
                                        pathname="/site-packages/orbax/checkpoint/future.py"))
        assert not noise.filter(_record(
            "asyncio", logging.ERROR, "Task was destroyed but it is pending!\ntask: <Task "
            "pending coro=<write_fragment() running at /site-packages/orbax/serialization.py:1>>"))
        # Seen in CI: a TensorStore write of a save past the file-size limit, never awaited.
        assert not noise.filter(_record(
            "asyncio", logging.ERROR, "Future exception was never retrieved\nfuture: <Future "
            "finished exception=ValueError('OUT_OF_RANGE: Error writing \"h_0.attn.query.kernel/"
            "0.0.0\" in OCDBT database at local file \"/run/checkpoints/10.orbax-checkpoint-tmp/"
            "params.orbax-checkpoint-tmp/ocdbt.process_0/\": File too large')>"))
    assert "orbax: [process=0] Failed to run 5 Handler Commit operations" in caplog.text
    assert noise.filter(_record("absl", logging.ERROR, "seqio: something else"))
    assert noise.filter(_record("absl", logging.WARNING, "[process=0] a warning"))
    assert noise.filter(_record("asyncio", logging.ERROR, "Task was destroyed: <other code>"))


def call_soon_threadsafe():  # the name of asyncio's method that raises on a closed loop
    raise RuntimeError("Event loop is closed")


def _unraisable(action):
    try:
        action()
    except RuntimeError as caught:
        return SimpleNamespace(exc_type=RuntimeError, exc_value=caught,
                               exc_traceback=caught.__traceback__, object=None)
    raise AssertionError("no error")


def elsewhere():
    raise RuntimeError("Event loop is closed")


def test_late_callbacks_into_a_closed_loop_are_not_printed():
    passed = []
    hook = checkpoints._QuietLateCallbacks(passed.append)
    late, other = _unraisable(call_soon_threadsafe), _unraisable(elsewhere)
    hook(late)
    hook(other)
    assert passed == [other]  # anything else goes on to the hook it replaced


def test_quieting_is_installed_once(tmp_path):
    checkpoints.close(checkpoints.manager(tmp_path / "a", keep=1))
    checkpoints.close(checkpoints.manager(tmp_path / "b", keep=1))
    assert isinstance(sys.unraisablehook, checkpoints._QuietLateCallbacks)
    assert not isinstance(sys.unraisablehook.previous, checkpoints._QuietLateCallbacks)
    assert logging.getLogger("absl").filters.count(checkpoints._ORBAX_FILTER) == 1


class _Clock:
    """``time`` for :func:`checkpoints.remove_failed_save`: seconds pass only in its sleeps, and
    the writes due by then happen during them (so the test never depends on how fast threads
    run on a loaded machine)."""

    def __init__(self, writes: list[tuple[float, Callable[[], None]]]) -> None:
        self.now = 0.0
        self.writes = sorted(writes, key=lambda write: write[0])

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        while self.writes and self.writes[0][0] <= self.now + 1e-9:
            self.writes.pop(0)[1]()


def test_what_late_writes_of_a_failed_save_bring_back_is_removed_too(tmp_path, monkeypatch):
    """Orbax raises on the first failed write while the other items' writes still run; those
    make the temporary folder again after the first removal. Removal goes on until nothing has
    come back for the settle time."""
    folder = tmp_path / "checkpoints" / "10"
    temporary = tmp_path / "checkpoints" / "10.orbax-checkpoint-tmp-17"
    (temporary / "params").mkdir(parents=True)
    unsealed = folder / "meta"
    recreated = []

    def late_write():
        (temporary / "opt_state").mkdir(parents=True, exist_ok=True)
        unsealed.mkdir(parents=True, exist_ok=True)
        recreated.append(True)

    clock = _Clock([(0.1, late_write), (0.2, late_write), (0.3, late_write)])  # 0.1 s apart
    monkeypatch.setattr(checkpoints, "time", clock)
    checkpoints.remove_failed_save(str(folder), settle=0.3)
    assert len(recreated) == 3  # all three came before the removal settled
    assert clock.now >= 0.6 - 1e-9  # and it waited the settle time after the last one
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == []
