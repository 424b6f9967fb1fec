"""A full disk: one line naming the output, exit 2, no traceback, and nothing of the failed run
left under a final name (no stats.json, no temporaries); training stops at the failed save and
a rerun with space resumes from the last good checkpoint.

A full disk is simulated on any Linux machine without root by a file-size limit
(``RLIMIT_FSIZE`` with SIGXFSZ ignored: a write past it fails with EFBIG); where the tests run
as root and may mount, one case also runs against a real tiny tmpfs (ENOSPC).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fault_helpers import file_size_limit

from tw_jax.errors import OutputError
from tw_jax.preprocess.probes.categorise import CATEGORIES
from tw_jax.preprocess.probes.outputs import write_probes_folder
from tw_jax.preprocess.probes.records import Probe
from tw_jax.runtime import checkpoints, gin_setup
from tw_jax.runtime.integrity import MANIFEST
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump
from tw_jax.train import trainer
from tw_jax.train.gin_config import train_config

# Runs argv[2:] with a file-size limit of argv[1] bytes; SIGXFSZ would kill it, so it is ignored
# (both survive exec).
_LIMITED = (
    "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    "limit = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)
# The same, for the asynchronous save that fails in the background: argv[2] is the module of the
# run's Saves, argv[3] a step; at that step's poll (the last before the next checkpoint period)
# the run first waits until the pending save has ended, so that poll sees the failure at the
# latest, however long the failing write takes on a loaded machine (instead of the test hoping
# it fails within that many training steps).
_LIMITED_SAVE_ENDED_BY = """\
import importlib, resource, runpy, signal, sys, time
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
saves, ended_by = importlib.import_module(sys.argv[2]).Saves, int(sys.argv[3])
poll = saves.poll

def poll_once_ended(self, done):
    if done == ended_by and self.pending is not None:
        deadline = time.monotonic() + 300
        while self.mngr.is_saving_in_progress():
            if time.monotonic() >= deadline:
                raise AssertionError(f"the save of step {self.pending} still runs after 300 s")
            time.sleep(0.05)
    poll(self, done)

saves.poll = poll_once_ended
del sys.argv[1:4]
runpy.run_module("tw_jax.cli", run_name="__main__", alter_sys=True)
"""
# Lines that native libraries (XLA, TensorFlow) print on start-up, whatever the run does.
_NATIVE_LOG = re.compile(r"^([IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] |WARNING: All log messages "
                         r"before absl::InitializeLog\(\) is called)")
TRAIN_FILES = ["diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"]


def _tw_jax(args: list[str], *, limit: int | None = None, env: dict | None = None,
            save_ended_by: int | None = None):
    command = [sys.executable, "-m", "tw_jax.cli", *args]
    if save_ended_by is not None:
        command = [sys.executable, "-c", _LIMITED_SAVE_ENDED_BY, str(limit),
                   checkpoints.__name__, str(save_ended_by), *args]
    elif limit is not None:
        command = [sys.executable, "-c", _LIMITED, str(limit), *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def _error_line(stderr: str) -> str:
    """The one line a failed command printed (native start-up logging aside)."""
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip() and not _NATIVE_LOG.match(line)]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def _listing(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 16 KiB tmpfs, and a function that gives it more room; skipped where this process is not
    root or may not mount."""
    folder = tmp_path / "tmpfs"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs root to mount a tmpfs (the file-size limit cases "
                    "cover the rest)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"root without permission to mount a tmpfs: {mounted.stderr.strip()}")

    def grow(size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(folder)], check=True)

    yield folder, grow
    subprocess.run(["umount", str(folder)], check=True)


# --- stages -------------------------------------------------------------------------------------


def test_diffset_past_a_file_size_limit_is_one_line_and_leaves_nothing(sample_world, tmp_path):
    world, _ = sample_world
    out = tmp_path / "diffset"
    result = _tw_jax(["diffset", "--new", str(wikipedia_dump(world, "2021-09")), "--out",
                      str(out), "--no-progress"], limit=32 << 10)
    assert result.returncode == 2
    assert _error_line(result.stderr) == (
        f"tw-jax diffset: error: {out}/diffset.tfrecord-?????-of-?????: file too large while "
        "writing it (the file-size limit, ulimit -f, is 32 KiB); nothing was left under its "
        "final name")
    assert _listing(out) == []  # no stats.json, no other file, no temporary


def _probe(category: str, index: int, text: str) -> Probe:
    return Probe(f"S{index}", "occupation", f"O{index}", f"Q{index}", "P106", f"Q{index + 1}",
                 "", text, f"S{index} works as ___.", category, f"Q{index + 1}")


def test_probes_folder_that_fails_on_its_third_file_leaves_none_of_its_files(tmp_path):
    """``write_probes_folder`` used to rename each file as it went: a failure on a later file
    left the earlier ones fresh under their final names, without stats.json."""
    out = tmp_path / "probes"
    small = {c: [_probe(c, i, "short text") for i in range(3)] for c in CATEGORIES}
    write_probes_folder(out, small, small, {"run": 1})  # an earlier, complete run
    before = {name: (out / name).read_bytes() for name in _listing(out) if name != "stats.json"}

    big = dict(small, new=[_probe("new", i, "x" * 2000) for i in range(3)])  # 6 KB: too big
    with file_size_limit(4096), pytest.raises(OutputError) as raised:
        write_probes_folder(out, big, big, {"run": 2})
    assert str(raised.value) == (
        f"{out}/new.csv: file too large while writing it (the file-size limit, ulimit -f, is "
        "4 KiB); nothing was left under its final name")
    # unchanged.* and updated.* of run 2 were written (they fit) but never renamed: the folder
    # holds run 1's files, byte for byte, and no stats.json (it is incomplete).
    assert _listing(out) == sorted(before)
    assert {name: (out / name).read_bytes() for name in before} == before


def test_probes_on_a_full_tmpfs_is_one_line_and_the_rerun_with_space_succeeds(sample_world,
                                                                              tiny_tmpfs,
                                                                              tmp_path):
    world, _ = sample_world
    folder, grow = tiny_tmpfs
    from tw_jax.preprocess.diffset.local import build_diffset

    diffset = tmp_path / "diffset"
    old, new = wikipedia_dump(world, "2021-08"), wikipedia_dump(world, "2021-09")
    build_diffset(old, new, diffset, workers=1, progress=False)
    out = folder / "probes"
    args = ["probes", "--old", str(wikidata_dump(world, "2021-08")),
            "--new", str(wikidata_dump(world, "2021-09")), "--wikipedia", str(new),
            "--old-wikipedia", str(old), "--diffset", str(diffset), "--out", str(out),
            "--workers", "1", "--no-progress"]
    result = _tw_jax(args)
    assert result.returncode == 2
    line = _error_line(result.stderr)
    assert re.fullmatch(
        rf"tw-jax probes: error: {re.escape(str(out))}/[a-z_]+(\.csv|\.tfrecord-\?{{5}}-of-\?{{5}}):"
        r" no space left on device while writing it \(\d+(\.\d)? (bytes|KiB) free on that "
        r"filesystem\); nothing was left under its final name", line), line
    assert _listing(out) == []

    grow("4m")
    result = _tw_jax(args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "stats.json").exists()
    assert not [name for name in _listing(out) if ".tmp-" in name]


# --- training -----------------------------------------------------------------------------------


def _train_env(train_data: dict, compile_cache: Path) -> dict:
    return dict(os.environ, TW_JAX_DATA_DIR=str(train_data["data_dir"]),
                TW_JAX_T5_VOCAB=str(train_data["t5"]), TW_JAX_GPT2_VOCAB=str(train_data["gpt2"]),
                JAX_COMPILATION_CACHE_DIR=str(compile_cache),
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PLATFORMS="cpu",
                TF_CPP_MIN_LOG_LEVEL="2")


def _train_args(model_dir: Path, steps: int, *extra: str) -> list[str]:
    return ["train", *(f"--gin_file={name}" for name in TRAIN_FILES),
            f"--gin.MODEL_DIR={model_dir}", f"--gin.TRAIN_STEPS={steps}",
            "--gin.CHECKPOINT_PERIOD=10", "--gin.SCHEDULE='constant'",
            "--gin.tw_jax.train.train.progress=False", *extra]


def _in_process(data_bindings: list[str], model_dir: Path, steps: int, period: int):
    gin_setup.parse(TRAIN_FILES, [*data_bindings, "SCHEDULE='constant'",
                                  f"CHECKPOINT_PERIOD={period}"])
    return trainer.train(train_config().replace(model_dir=str(model_dir),
                                                          train_steps=steps))


def _steps(model_dir: Path) -> list[str]:
    return sorted(p.name for p in (model_dir / "checkpoints").iterdir())


def test_a_checkpoint_past_the_file_size_limit_stops_training_and_the_rerun_resumes(
        tmp_path, train_data, compile_cache, data_bindings):
    run = tmp_path / "run"
    _in_process(data_bindings, run, steps=2, period=2)  # step 2: sealed, the last good one
    assert (run / "checkpoints" / "2" / MANIFEST).exists()
    env = _train_env(train_data, compile_cache)
    limit = 4 << 20  # the run's other files fit; the checkpoint's data files (~12 MB) do not

    # Asynchronous save (the default): its background write fails; training stops as soon as
    # that is seen, before the next checkpoint period (step 20). How many steps the failing
    # write takes depends on the machine: the run waits for it at step 19's poll if need be.
    result = _tw_jax(_train_args(run, 40), limit=limit, env=env, save_ended_by=19)
    assert result.returncode == 2
    line = _error_line(result.stderr)
    found = re.fullmatch(
        rf"tw-jax train: error: {re.escape(str(run))}/checkpoints/10: checkpoint not saved: "
        r"file too large while writing it \(the file-size limit, ulimit -f, is 4 MiB\); "
        r"training stopped at step (\d+), the last good checkpoint is step 2, which a rerun "
        r"resumes from", line)
    assert found, line
    stopped = int(found.group(1))
    assert 10 <= stopped < 20
    logged = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert logged[-1] == stopped
    # Nothing of step 10 is left: no folder a resume could take, no orbax temporary.
    assert _steps(run) == ["2"]
    assert checkpoints.step_folder(run) == str(run / "checkpoints" / "2")

    # Synchronous save: the save itself raises, at step 10 exactly.
    result = _tw_jax(_train_args(run, 40, "--gin.tw_jax.train.train.async_checkpoints=False"),
                     limit=limit, env=env)
    assert result.returncode == 2
    assert _error_line(result.stderr) == (
        f"tw-jax train: error: {run}/checkpoints/10: checkpoint not saved: file too large while "
        "writing it (the file-size limit, ulimit -f, is 4 MiB); training stopped at step 10, "
        "the last good checkpoint is step 2, which a rerun resumes from")
    assert _steps(run) == ["2"]

    # Space restored: the same command resumes from step 2.
    summary = _in_process(data_bindings, run, steps=12, period=10)
    assert (summary.start_step, summary.step, summary.resumed) == (2, 12, True)
    assert _steps(run) == ["10", "12"]
    assert all((run / "checkpoints" / step / MANIFEST).exists() for step in ("10", "12"))
