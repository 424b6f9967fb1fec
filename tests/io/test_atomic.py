import errno
import json
import os
import shutil
from collections import namedtuple

import pytest
from fault_helpers import file_size_limit

from tw_jax.errors import OutputError
from tw_jax.io import atomic
from tw_jax.io.atomic import (
    FolderCommit,
    atomic_open,
    disk_full_errno,
    disk_full_reason,
    write_json,
)


def test_file_appears_only_on_success(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    with pytest.raises(RuntimeError), atomic_open(target) as handle:
        handle.write("half")
        raise RuntimeError("interrupted")
    assert not target.exists()
    assert list((tmp_path / "sub").iterdir()) == []
    with atomic_open(target) as handle:
        handle.write("whole")
    assert target.read_text() == "whole"


def test_write_json_replaces_previous(tmp_path):
    target = tmp_path / "stats.json"
    write_json(target, {"b": 1, "a": "ü"})
    write_json(target, {"c": 2})
    assert json.loads(target.read_text()) == {"c": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["stats.json"]


# --- a full disk and folders committed whole ---------------------------------------------------


def _listing(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def test_a_write_past_the_file_size_limit_names_the_final_path(tmp_path):
    target = tmp_path / "out" / "big.txt"
    with file_size_limit(3000), pytest.raises(OutputError) as raised, atomic_open(target) as out:
        out.write("x" * 10_000)
    assert str(raised.value) == (
        f"{target}: file too large while writing it (the file-size limit, ulimit -f, is "
        "2.9 KiB); nothing was left under its final name")
    assert raised.value.path == str(target)
    assert _listing(tmp_path) == ["out"]  # no temporary left
    with file_size_limit(3000), pytest.raises(OutputError, match=r"stats\.json: file too large"):
        write_json(tmp_path / "stats.json", {"x": "y" * 10_000})
    assert _listing(tmp_path) == ["out"]


def test_no_space_and_quota_name_the_free_space(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10 << 20, 0, 3 << 20))
    assert disk_full_reason(errno.ENOSPC, tmp_path / "missing" / "x.csv") == (
        "no space left on device while writing it (3 MiB free on that filesystem)")
    assert disk_full_reason(errno.EDQUOT, tmp_path) == (
        "disk quota exceeded while writing it (3 MiB free on that filesystem)")
    assert disk_full_reason(errno.ENOSPC, "gs://bucket/x") == (
        "no space left on device while writing it")

    def full(handle):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OutputError) as raised, atomic_open(tmp_path / "a.txt") as handle:
        handle.write("a")
    assert str(raised.value) == (
        f"{tmp_path / 'a.txt'}: no space left on device while writing it (3 MiB free on that "
        "filesystem); nothing was left under its final name")
    assert _listing(tmp_path) == []


def test_other_errors_pass_unchanged(tmp_path):
    with pytest.raises(PermissionError), atomic_open(tmp_path / "a.txt") as handle:
        handle.write("a")
        raise PermissionError(errno.EACCES, "denied")
    assert _listing(tmp_path) == []


def test_disk_full_errno_reads_chains_and_tensorstore_text():
    assert disk_full_errno(OSError(errno.EFBIG, "File too large")) == errno.EFBIG
    assert disk_full_errno(OSError(errno.ENOENT, "missing")) is None
    text = ValueError("OUT_OF_RANGE: Error writing ... Failed to write 8769536 bytes to file 25: "
                      "No space left on device [os_error_code='28']")
    assert disk_full_errno(text) == errno.ENOSPC
    try:
        try:
            raise OSError(errno.EDQUOT, "quota")
        except OSError as error:
            raise RuntimeError("wrapped") from error
    except RuntimeError as wrapped:
        assert disk_full_errno(wrapped) == errno.EDQUOT
    assert disk_full_errno(ValueError("plain")) is None


def test_a_folder_commits_every_file_together_stats_last(tmp_path, monkeypatch):
    renamed = []
    real_commit = atomic.commit
    monkeypatch.setattr(atomic, "commit",
                        lambda tmp, final: (renamed.append(os.path.basename(final)),
                                            real_commit(tmp, final)))
    after = []
    with FolderCommit(tmp_path) as folder:
        folder.write_json("stats.json", {"n": 2})
        with folder.open("a.csv") as handle:
            handle.write("a\n")
        assert all(name.startswith(".") for name in _listing(tmp_path))  # temporaries only
        with folder.open("sub/b.csv", "wb") as handle:
            handle.write(b"b\n")
        temporary = tmp_path / ".c.txt.tmp"
        temporary.write_text("c")
        folder.stage(temporary, tmp_path / "c.txt", after_renames=lambda: after.append(
            sorted(n for n in os.listdir(tmp_path) if not n.startswith("."))))
        assert not (tmp_path / "a.csv").exists()
    assert renamed == ["a.csv", "b.csv", "c.txt", "stats.json"]
    assert after == [["a.csv", "c.txt", "sub"]]  # every file but stats.json in place
    assert _listing(tmp_path) == ["a.csv", "c.txt", "stats.json", "sub", "sub/b.csv"]
    assert json.loads((tmp_path / "stats.json").read_text()) == {"n": 2}


def test_a_folder_that_fails_on_its_third_file_leaves_none(tmp_path):
    (tmp_path / "a.csv").write_text("old a\n")  # an earlier run's file stays as it was
    with (file_size_limit(4096), pytest.raises(OutputError) as raised,
          FolderCommit(tmp_path) as folder):
        for name, size in (("a.csv", 100), ("b.csv", 4000), ("c.csv", 5000)):
            with folder.open(name) as handle:
                handle.write("x" * size)
        folder.write_json("stats.json", {})
    assert raised.value.path == str(tmp_path / "c.csv")
    assert _listing(tmp_path) == ["a.csv"]
    assert (tmp_path / "a.csv").read_text() == "old a\n"

