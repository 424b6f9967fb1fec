"""An output folder held by one run: a read-only folder or a file in its place is one line and
exit 2; a second run on a folder refuses, naming the first; a lock left by a dead run is taken
over, saying so; temporaries and scratch folders of dead runs are removed when a run starts."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fault_helpers import file_size_limit

from tw_jax.cli import main
from tw_jax.errors import OutputError
from tw_jax.io import output_claim
from tw_jax.io.output_claim import LOCK_NAME, claimed, scratch_dir

SMALL_WORLD = ["--entities", "60"]


def _live_process() -> subprocess.Popen:
    """A process that runs until the test kills it (ten minutes at most, should one be left)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def _ended_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _lock(folder, pid: int, *, host: str | None = None, started: int | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    holder = {"host": host or socket.gethostname(), "pid": pid,
              "started": output_claim._start_time(pid) if started is None else started,
              "command": "tw-jax diffset", "since": "2026-11-25 10:00:00"}
    (folder / LOCK_NAME).write_text(json.dumps(holder))


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder no one may write into: chmod for a normal user; root writes through modes, so
    for root a read-only tmpfs (skipped where mounting is not allowed)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(folder)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"root without permission to mount a tmpfs: {mounted.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_read_only_out_is_one_line_and_exit_2(read_only_folder, capsys):
    for out in (read_only_folder, read_only_folder / "new"):
        with pytest.raises(SystemExit) as raised:
            main(["sample-world", "--out", str(out), *SMALL_WORLD])
        assert raised.value.code == 2
        line = _error_line(capsys)
        assert line.startswith("tw-jax sample-world: error: argument --out: ")
        assert f"{out}: cannot write into it" in line
    with pytest.raises(OutputError, match="cannot write into it"):
        output_claim.check_writable(str(read_only_folder))


def test_an_out_that_is_a_file_is_one_line_and_exit_2(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    with pytest.raises(SystemExit) as raised:
        main(["sample-world", "--out", str(taken), *SMALL_WORLD])
    assert raised.value.code == 2
    assert _error_line(capsys).endswith(f"{taken}: is a file, not a folder")
    assert taken.read_text() == "not a folder"


def test_a_second_run_on_a_held_folder_refuses_naming_the_first(tmp_path, capsys):
    holder = _live_process()
    try:
        _lock(tmp_path / "out", holder.pid)
        assert main(["sample-world", "--out", str(tmp_path / "out"), *SMALL_WORLD]) == 2
    finally:
        holder.kill()
        holder.wait()
    line = _error_line(capsys)
    assert line.startswith(f"tw-jax sample-world: error: {tmp_path / 'out'}: in use by "
                           f"`tw-jax diffset` (pid {holder.pid} on {socket.gethostname()}")
    assert f"rm {tmp_path / 'out' / LOCK_NAME}" in line
    assert not (tmp_path / "out" / "world.json").exists()


def test_a_run_holding_its_folder_makes_another_process_refuse(tmp_path):
    out = tmp_path / "out"
    with claimed(out, "tw-jax probes"):
        second = subprocess.run(
            [sys.executable, "-m", "tw_jax.cli", "sample-world", "--out", str(out), *SMALL_WORLD],
            capture_output=True, text=True,
        )
        assert second.returncode == 2
        assert f"in use by `tw-jax probes` (pid {os.getpid()}" in second.stderr
        assert "Traceback" not in second.stderr
    assert not (out / LOCK_NAME).exists()  # released when the run ends


def test_a_lock_of_a_host_that_cannot_be_checked_is_respected(tmp_path):
    _lock(tmp_path / "out", 12345, host="tpu-vm-worker-3", started=0)
    with pytest.raises(OutputError, match=r"pid 12345 on tpu-vm-worker-3"), \
            claimed(tmp_path / "out", "tw-jax train"):
        pass


def test_a_lock_of_a_dead_run_is_taken_over_saying_so(tmp_path, capsys):
    out = tmp_path / "out"
    dead = _ended_pid()
    _lock(out, dead)
    assert main(["sample-world", "--out", str(out), *SMALL_WORLD]) == 0
    err = capsys.readouterr().err
    assert (f"tw-jax: {out}: taking over the lock of `tw-jax diffset` (pid {dead} on "
            f"{socket.gethostname()}, since 2026-11-25 10:00:00), which has ended") in err
    assert (out / "world.json").exists()
    assert not (out / LOCK_NAME).exists()


def test_a_reused_pid_is_not_mistaken_for_the_holder(tmp_path, capsys):
    """The lock records the process's start time: a live process with the holder's pid but
    another start time is a new process, so the lock is stale."""
    _lock(tmp_path / "out", os.getpid(), started=1)
    with claimed(tmp_path / "out", "tw-jax ssm"):
        assert json.loads((tmp_path / "out" / LOCK_NAME).read_text())["command"] == "tw-jax ssm"
    assert "taking over the lock" in capsys.readouterr().err


def test_temporaries_of_dead_runs_are_removed_when_a_run_starts(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "0809" / "diffset").mkdir(parents=True)
    dead = _ended_pid()
    leftovers = [out / f".stats.json.tmp-{dead}-0123abcd",
                 out / "0809" / "diffset" / f".diffset.jsonl.tmp-{dead}-deadbeef",
                 out / "0809" / f"labels.sqlite.tmp-{dead}"]
    for path in leftovers:
        path.write_bytes(b"x" * 1024)
    live = out / f".full.jsonl.tmp-{os.getpid()}-0badf00d"  # a live writer's: kept
    live.write_bytes(b"y")
    kept = out / "0809" / "diffset" / "diffset.jsonl"
    kept.write_text("{}\n")
    with claimed(out, "tw-jax demo"):
        pass
    assert [path.exists() for path in leftovers] == [False, False, False]
    assert live.exists() and kept.exists()
    assert (f"tw-jax: {out}: removed 3 temporary file(s) (0.0 MiB) left by an interrupted run"
            in capsys.readouterr().err)


def test_claims_nest_within_one_process(tmp_path):
    with claimed(tmp_path, "tw-jax demo"), claimed(tmp_path, "tw-jax diffset"):
        assert (tmp_path / LOCK_NAME).exists()
    assert not (tmp_path / LOCK_NAME).exists()


def test_scratch_of_dead_processes_is_removed_from_tmpdir(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # what TMPDIR sets
    dead = _ended_pid()
    stale = tmp_path / f"tw_jax_diffset-{dead}-0-k2j3h4"
    stale.mkdir()
    (stale / "old.sqlite").write_bytes(b"\0" * 4096)
    other = tmp_path / "someone_elses"
    other.mkdir()
    with scratch_dir("probes") as scratch:
        assert os.path.dirname(scratch) == str(tmp_path)
        assert os.path.basename(scratch).startswith(f"tw_jax_probes-{os.getpid()}-")
        assert not stale.exists()
    assert not os.path.exists(scratch)
    assert other.exists()


def test_a_bucket_folder_is_held_too(gcs_bucket):
    from tw_jax.io import paths

    out = f"{gcs_bucket}/runs/kadapter"
    lock = f"{out}/{LOCK_NAME}"
    with claimed(out, "tw-jax lifelong"):
        assert json.loads(paths.read_text(lock))["pid"] == os.getpid()
    assert not paths.exists(lock)
    paths.write_text(lock, json.dumps({"host": "tpu-vm-worker-0", "pid": 4242, "started": 7,
                                       "command": "tw-jax lifelong", "since": "yesterday"}))
    with pytest.raises(OutputError, match=rf"in use by `tw-jax lifelong` \(pid 4242 on "
                       rf"tpu-vm-worker-0, since yesterday\).*gcloud storage rm {lock}"), \
            claimed(out, "tw-jax lifelong"):
        pass


def test_scratch_that_runs_out_of_space_is_one_line(tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(OutputError, match=r"scratch space ran out \(database or disk is full\); "
                       rf"free space in {tmp_path} or point TMPDIR at a larger disk"), \
            scratch_dir("probes"):
        raise sqlite3.OperationalError("database or disk is full")
    assert list(tmp_path.iterdir()) == []


def test_a_second_training_run_on_a_model_dir_refuses(data_bindings, tmp_path, capsys):
    holder = _live_process()
    model_dir = tmp_path / "model"
    try:
        _lock(model_dir, holder.pid)
        status = main(["train", "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin",
                       "--gin_file=runs/cpu_smoke.gin", f"--gin.MODEL_DIR={model_dir}",
                       *(f"--gin_bindings={b}" for b in data_bindings)])
    finally:
        holder.kill()
        holder.wait()
    assert status == 2
    assert _error_line(capsys) == (
        f"tw-jax train: error: {model_dir}: in use by `tw-jax diffset` (pid {holder.pid} on "
        f"{socket.gethostname()}, since 2026-11-25 10:00:00); wait for it, or if it is no longer "
        f"running: rm {model_dir / LOCK_NAME}")
    assert not (model_dir / "checkpoints").exists()


def test_the_lock_appears_with_its_holder_in_one_step(tmp_path, monkeypatch):
    """Created as a hard link of a written file: no reader ever finds it empty (an empty lock
    reads as a dead writer's and would be taken over, so two runs starting together both ran)."""
    lock = str(tmp_path / LOCK_NAME)
    seen = []
    real_link = os.link

    def link(source, target):
        seen.append(json.loads(Path(source).read_text(encoding="utf-8"))["pid"])
        real_link(source, target)

    monkeypatch.setattr(output_claim.os, "link", link)
    me = output_claim.Holder.of_this_process("tw-jax test")
    assert output_claim._write_lock(lock, me, exclusive=True)
    assert seen == [os.getpid()]  # whole before it had the lock's name
    assert json.loads(Path(lock).read_text(encoding="utf-8"))["pid"] == os.getpid()
    other = output_claim.Holder("elsewhere", 1, 0, "tw-jax other", "now")
    assert not output_claim._write_lock(lock, other, exclusive=True)  # held: untouched
    assert json.loads(Path(lock).read_text(encoding="utf-8"))["pid"] == os.getpid()
    assert sorted(os.listdir(tmp_path)) == [LOCK_NAME]  # no temporary left


def test_without_hard_links_the_lock_is_still_exclusive(tmp_path, monkeypatch):
    def no_links(source, target):
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(output_claim.os, "link", no_links)
    lock = str(tmp_path / LOCK_NAME)
    me = output_claim.Holder.of_this_process("tw-jax test")
    assert output_claim._write_lock(lock, me, exclusive=True)
    assert not output_claim._write_lock(lock, me, exclusive=True)
    assert sorted(os.listdir(tmp_path)) == [LOCK_NAME]


class _FullDisk:
    """A file whose writes fail as on a full disk (ENOSPC); the real file is created first,
    as ``open`` does, so the test sees what the writer leaves behind."""

    def __init__(self, real) -> None:
        self.real = real

    def write(self, _text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.real.close()


def _full_disk_writes(monkeypatch, *, by_name: bool = True) -> None:
    """The files output_claim writes are on a full disk: those it opens by name (the lock's
    temporary), and those it creates exclusively (the lock itself, without hard links)."""
    real_open, real_fdopen = open, os.fdopen

    def full_open(path, mode="r", **kwargs):
        handle = real_open(path, mode, **kwargs)
        return _FullDisk(handle) if "w" in mode else handle  # reads (/proc) as they are

    if by_name:
        monkeypatch.setattr(output_claim, "open", full_open, raising=False)
    monkeypatch.setattr(output_claim.os, "fdopen",
                        lambda *a, **k: _FullDisk(real_fdopen(*a, **k)))


def test_a_file_size_limit_while_taking_the_lock_is_one_line_and_changes_nothing(tmp_path,
                                                                                capsys):
    """A real EFBIG (RLIMIT_FSIZE, no root needed) on the lock's first byte: exit 2, one line
    naming the lock file, and the folder the run would have made is not there."""
    out = tmp_path / "out"
    with file_size_limit(10):
        status = main(["sample-world", "--out", str(out), *SMALL_WORLD])
    assert status == 2
    assert _error_line(capsys) == (
        f"tw-jax sample-world: error: {out / LOCK_NAME}: cannot take the folder's lock: file "
        "too large while writing it (the file-size limit, ulimit -f, is 10 bytes); nothing in "
        "the folder was changed and the run did not start")
    assert not out.exists()


@pytest.mark.parametrize("links", [True, False])
def test_a_full_disk_while_taking_the_lock_leaves_no_lock_and_no_temporary(
        tmp_path, monkeypatch, links):
    """ENOSPC while the lock is written, with hard links or without (then the lock itself is
    created first: an empty one would read as a dead run's): one OutputError naming the lock,
    and the folder holds what it held."""
    out = tmp_path / "out"
    (out / "kept.txt").parent.mkdir()
    (out / "kept.txt").write_text("earlier output")
    if not links:
        def no_links(source, target):
            raise PermissionError("hard links not supported")

        monkeypatch.setattr(output_claim.os, "link", no_links)
    _full_disk_writes(monkeypatch, by_name=links)  # without links: the lock's own write
    with pytest.raises(OutputError) as error, claimed(out, "tw-jax probes"):
        pass
    assert str(error.value).startswith(f"{out / LOCK_NAME}: cannot take the folder's lock: no "
                                       "space left on device while writing it (")
    assert sorted(os.listdir(out)) == ["kept.txt"]
    assert (out / "kept.txt").read_text() == "earlier output"


def test_a_full_disk_while_taking_over_a_dead_runs_lock_keeps_that_lock(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _lock(out, _ended_pid())
    before = (out / LOCK_NAME).read_bytes()
    _full_disk_writes(monkeypatch)
    with pytest.raises(OutputError, match=r"cannot take the folder's lock: no space left"), \
            claimed(out, "tw-jax probes"):
        pass
    assert (out / LOCK_NAME).read_bytes() == before  # the next run takes it over again
    assert sorted(os.listdir(out)) == [LOCK_NAME]
