"""One run per output folder: a lock that names its holder, and the leftovers of dead runs.

Two runs writing into one ``--out`` (or one ``MODEL_DIR``) interleave their files and duplicate
metrics lines, and a run killed by SIGKILL or a power cut leaves hidden temporaries (the
``.NAME.tmp-PID-HEX`` siblings of :mod:`tw_jax.io.atomic`, up to hundreds of MB) and SQLite
scratch folders in the OS temp dir that nothing else removes. :func:`claimed` is taken by a
command before it writes:

- the folder must be writable (a read-only mount or a file in its place is one line, exit 2);
- ``FOLDER/.tw_jax.lock`` holds host, pid, process start time and command; a second run
  refuses, naming the holder; a lock whose process has ended on this host (SIGKILL, a crash)
  is taken over with one line saying so;
- holding the lock, no other run writes into the folder, so every temporary file below it is a
  dead run's and is removed, as are ``tw_jax_*`` scratch folders of ended processes in the
  temp dir (:func:`scratch_dir`, which honours ``TMPDIR``).

A full disk or a file-size limit while the lock is written (ENOSPC, EDQUOT, EFBIG) is one
:class:`~tw_jax.errors.OutputError` naming the lock file, and the folder is left as it was: no
half-written lock (which a later run would take over as a dead run's), no temporary beside it.

The lock is re-entrant within one process (the demo and the lifelong runner claim folders
inside folders they hold). In a bucket the lock is best effort: written if absent (object
stores have no exclusive create through our path layer), and a holder on another host cannot
be checked, so it is refused with the command that removes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

from tw_jax.errors import OutputError
from tw_jax.io import paths
from tw_jax.io.atomic import disk_full_errno, disk_full_reason
from tw_jax.io.paths import PathLike

LOCK_NAME = ".tw_jax.lock"
# atomic.temporary_sibling's hidden ".NAME.tmp-PID-HEX" and labels' "NAME.tmp-PID" index files
_TEMPORARY = re.compile(r"^(?:\..+\.tmp-(\d+)-[0-9a-f]{8}|.+\.tmp-(\d+))$")
_SCRATCH = re.compile(r"^tw_jax_[a-z_]+-(\d+)-(\d+)-")
_held: dict[str, int] = {}  # lock path -> claims of it open in this process


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    started: int  # the process's start time (clock ticks since boot), 0 where unknown
    command: str
    since: str

    @classmethod
    def of_this_process(cls, command: str) -> Holder:
        return cls(socket.gethostname(), os.getpid(), _start_time(os.getpid()), command,
                   time.strftime("%Y-%m-%d %H:%M:%S"))

    def describe(self) -> str:
        return f"`{self.command}` (pid {self.pid} on {self.host}, since {self.since})"

    def is_this_process(self) -> bool:
        return (self.host == socket.gethostname() and self.pid == os.getpid()
                and self.started in (0, _start_time(self.pid)))

    def has_ended(self) -> bool:
        """True only when that process has surely ended (it ran on this host, and no process
        with its pid and start time exists); a holder on another host is assumed alive."""
        if self.host != socket.gethostname():
            return False
        return not _alive(self.pid, self.started)


def _start_time(pid: int) -> int:
    """Field 22 of /proc/PID/stat: tells a live holder from a new process that reused its pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _alive(pid: int, started: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    return not (started and _start_time(pid) not in (0, started))


def check_writable(folder: str) -> None:
    """Creates ``folder`` and writes (then removes) a probe file in it: access(2) says a
    read-only mount is writable to root, and a writable folder may still refuse new files."""
    if paths.is_url(folder):
        return
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise OutputError(folder, "is a file, not a folder")
    try:
        os.makedirs(folder, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".tw_jax-write-check-", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise OutputError(folder, f"cannot write into it ({error.strerror or error})") from None


def _read_holder(lock: str) -> Holder | None:
    """The lock's holder; None for a lock that cannot be read (a writer killed mid-write)."""
    try:
        data = json.loads(paths.read_text(lock))
        return Holder(str(data["host"]), int(data["pid"]), int(data.get("started", 0)),
                      str(data["command"]), str(data.get("since", "?")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_lock(lock: str, holder: Holder, *, exclusive: bool) -> bool:
    """Writes the lock; with ``exclusive``, False when one exists already. A full disk is an
    :class:`OutputError` naming the lock, after whatever this write created is removed."""
    text = json.dumps(holder.__dict__, indent=2) + "\n"
    try:
        return _write_lock_text(lock, text, exclusive=exclusive)
    except OSError as error:
        number = disk_full_errno(error)
        if number is None:
            raise
        raise OutputError(lock, f"cannot take the folder's lock: {disk_full_reason(number, lock)}"
                          "; nothing in the folder was changed and the run did not start"
                          ) from None


def _write_whole(path: str, text: str) -> None:
    """``text`` as the new file ``path``; a write that fails removes the file."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def _write_lock_text(lock: str, text: str, *, exclusive: bool) -> bool:
    if paths.is_url(lock):
        if exclusive and paths.exists(lock):
            return False
        paths.write_text(lock, text)
        return True
    if not exclusive:
        temporary = f"{lock}.{os.getpid()}"
        _write_whole(temporary, text)
        os.replace(temporary, lock)
        return True
    # The lock appears with its content in one step (a hard link of a written file), so another
    # run never reads it empty and takes it over as a dead writer's.
    temporary = f"{lock}.tmp-{os.getpid()}"  # a leftover of a killed run matches _TEMPORARY
    _write_whole(temporary, text)
    try:
        os.link(temporary, lock)
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: create exclusively, then write
        return _create_then_write(lock, text)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    return True


def _create_then_write(lock: str, text: str) -> bool:
    try:
        descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
    except BaseException:  # an empty lock would pass for a dead writer's: none is left
        with contextlib.suppress(OSError):
            os.unlink(lock)
        raise
    return True


def _acquire(folder: str, lock: str, command: str) -> None:
    me = Holder.of_this_process(command)
    if _write_lock(lock, me, exclusive=True):
        return
    holder = _read_holder(lock)
    if holder is not None and holder.is_this_process():
        return
    if holder is None or holder.has_ended():
        who = "an unreadable lock" if holder is None else f"the lock of {holder.describe()}"
        print(f"tw-jax: {folder}: taking over {who}, which has ended", file=sys.stderr)
        _write_lock(lock, me, exclusive=False)
        return
    remove = f"gcloud storage rm {lock}" if paths.is_url(lock) else f"rm {lock}"
    raise OutputError(
        folder, f"in use by {holder.describe()}; wait for it, or if it is no longer running: "
        f"{remove}"
    )


def _release(lock: str) -> None:
    holder = _read_holder(lock)
    if holder is not None and holder.is_this_process():
        paths.remove(lock, missing_ok=True)


def leftover_temporaries(folder: str) -> list[str]:
    """Temporaries anywhere below a local ``folder`` whose writer has ended (a live one may be
    a run holding a subfolder: its files are its own)."""
    if paths.is_url(folder) or not os.path.isdir(folder):
        return []
    found = []
    for root, _dirs, files in os.walk(folder):
        for name in files:
            match = _TEMPORARY.match(name)
            if match and not _alive(int(match[1] or match[2]), 0):
                found.append(os.path.join(root, name))
    return sorted(found)


def _remove_leftovers(folder: str) -> None:
    leftovers = leftover_temporaries(folder)
    if not leftovers:
        return
    size = 0
    for path in leftovers:
        with contextlib.suppress(OSError):
            size += os.path.getsize(path)
            os.unlink(path)
    print(f"tw-jax: {folder}: removed {len(leftovers)} temporary file(s) ({size / 2**20:.1f} MiB) "
          "left by an interrupted run", file=sys.stderr)


def remove_dead_scratch(temp_dir: str | None = None) -> list[str]:
    """Removes :func:`scratch_dir` folders whose process has ended; returns them."""
    temp_dir = temp_dir or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for name in os.listdir(temp_dir):
            match = _SCRATCH.match(name)
            if match and not _alive(int(match[1]), int(match[2])):
                shutil.rmtree(os.path.join(temp_dir, name), ignore_errors=True)
                removed.append(name)
    return removed


@contextlib.contextmanager
def scratch_dir(stage: str) -> Iterator[str]:
    """A temporary folder for a stage's SQLite indexes, in the OS temp dir (``TMPDIR``), named
    with its pid and start time so a later run can tell it was left by a dead process."""
    remove_dead_scratch()
    pid = os.getpid()
    folder = tempfile.mkdtemp(prefix=f"tw_jax_{stage}-{pid}-{_start_time(pid)}-")
    try:
        yield folder
    except (sqlite3.OperationalError, OSError) as error:
        if not _out_of_space(error):
            raise
        raise OutputError(folder, f"scratch space ran out ({error}); free space in "
                          f"{tempfile.gettempdir()} or point TMPDIR at a larger disk") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _out_of_space(error: BaseException) -> bool:
    """SQLite says "database or disk is full" (or "disk I/O error" when a write fails); an
    OSError carries ENOSPC, EDQUOT or EFBIG (:func:`tw_jax.io.atomic.disk_full_errno`)."""
    if isinstance(error, sqlite3.OperationalError):
        return any(text in str(error) for text in ("disk is full", "disk I/O error"))
    return disk_full_errno(error) is not None


@contextlib.contextmanager
def claimed(folder: PathLike, command: str) -> Iterator[str]:
    """Holds ``folder`` for one run of ``command`` (see the module docstring); yields it."""
    folder = paths.resolve(folder)
    created = not paths.is_url(folder) and not os.path.exists(folder)
    check_writable(folder)
    lock = paths.join(folder, LOCK_NAME)
    if _held.get(lock):
        _held[lock] += 1
    else:
        try:
            _acquire(folder, lock, command)
        except BaseException:
            if created:  # the folder this claim made, left as it was found: absent
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            raise
        _held[lock] = 1
        _remove_leftovers(folder)
    try:
        yield folder
    finally:
        _held[lock] -= 1
        if not _held[lock]:
            del _held[lock]
            _release(lock)
            if created:  # a run that stopped before writing anything leaves no empty folder
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
