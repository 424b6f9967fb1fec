"""Hosts as local processes: two `tw-jax train` processes with one CPU device each (coordinator
on 127.0.0.1, the explicit JAX_* variables) train exactly as one process with two devices, write
one checkpoint and one metrics stream, and a run checkpointed on 2 hosts continues on 1 along the
uninterrupted run's loss curve. Also: which launch each environment describes.

The tiny GPT-2 has the data's vocabulary size (as ``tw-jax demo`` trains it): gpt2_tiny.gin's
50,257-wide output layer was most of each step's work, and no check here depends on it."""

from __future__ import annotations

import socket
import subprocess
import sys

import numpy as np
import pytest
from train_helpers import read_metrics, subprocess_env

from tw_jax.runtime.distributed import DistributedStartError, Launch, detect_launch

STEPS, SPLIT = 6, 3


def _vocab_size(train_data: dict) -> int:
    from tw_jax.data.vocabularies import gpt2_vocabulary

    return int(gpt2_vocabulary(str(train_data["gpt2"])).vocab_size)


def _command(model_dir, steps, vocab_size=None):
    model = [f"--gin.tw_jax.models.GPT2Config.vocab_size={vocab_size}"] if vocab_size else []
    return [
        sys.executable, "-m", "tw_jax.cli", "train",
        "--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin", "--gin_file=runs/cpu_smoke.gin",
        f"--gin.MODEL_DIR={model_dir}", f"--gin.TRAIN_STEPS={steps}",
        f"--gin.CHECKPOINT_PERIOD={SPLIT}", "--gin.BATCH_SIZE=8", "--gin.SCHEDULE='constant'",
        "--gin.tw_jax.train.train.progress=False", *model,
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _one_process(model_dir, steps, env, vocab_size):
    result = subprocess.run(_command(model_dir, steps, vocab_size), env=env, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _hosts(model_dir, steps, env, vocab_size, count=2):
    port = _free_port()
    processes = []
    for index in range(count):
        host_env = dict(env, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
                        JAX_NUM_PROCESSES=str(count), JAX_PROCESS_ID=str(index),
                        TW_JAX_COORDINATOR_TIMEOUT="120")
        processes.append(subprocess.Popen(
            _command(model_dir, steps, vocab_size), env=host_env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        ))
    outputs = [process.communicate(timeout=600) for process in processes]
    for process, (_, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr[-3000:]
    return outputs


def _steps_saved(model_dir):
    folder = model_dir / "checkpoints"
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def test_two_hosts_train_as_one_host_with_two_devices_and_resume_on_one(
    tmp_path, train_data, compile_cache
):
    two_devices = subprocess_env(train_data, compile_cache, devices=2)
    one_device = subprocess_env(train_data, compile_cache, devices=1)
    vocab_size = _vocab_size(train_data)

    straight = tmp_path / "straight"
    _one_process(straight, STEPS, two_devices, vocab_size)
    expected = [m["loss"] for m in read_metrics(straight)]
    assert len(expected) == STEPS

    hosts = tmp_path / "hosts"
    outputs = _hosts(hosts, SPLIT, one_device, vocab_size)
    assert all(f"trained to step {SPLIT}" in stdout for stdout, _ in outputs)
    metrics = read_metrics(hosts)
    # Process 0 alone writes the metrics and TensorBoard; both write their shards of one
    # checkpoint.
    assert [m["step"] for m in metrics] == list(range(1, SPLIT + 1))
    assert len(list((hosts / "train").iterdir())) == 1
    assert _steps_saved(hosts) == [SPLIT]
    np.testing.assert_allclose([m["loss"] for m in metrics], expected[:SPLIT], rtol=1e-5)

    # The 2-host checkpoint continues in one process (two devices): the same curve.
    resumed = _one_process(hosts, STEPS, two_devices, vocab_size)
    assert f"started at step {SPLIT}" in resumed.stdout
    after = read_metrics(hosts)
    assert [m["step"] for m in after] == list(range(1, STEPS + 1))
    np.testing.assert_allclose([m["loss"] for m in after], expected, rtol=1e-5)
    assert _steps_saved(hosts) == [SPLIT, STEPS]


def test_an_unreachable_coordinator_is_one_line(tmp_path, train_data, compile_cache):
    env = dict(subprocess_env(train_data, compile_cache),
               JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{_free_port()}", JAX_NUM_PROCESSES="2",
               JAX_PROCESS_ID="1", TW_JAX_COORDINATOR_TIMEOUT="3")
    result = subprocess.run(_command(tmp_path / "run", 2), env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("tw-jax")]
    assert len(lines) == 1
    assert "no coordinator answered at 127.0.0.1:" in lines[0] and "within 3 s" in lines[0]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({"JAX_COORDINATOR_ADDRESS": "10.0.0.2:8476", "JAX_NUM_PROCESSES": "4",
          "JAX_PROCESS_ID": "3"}, Launch("explicit", "10.0.0.2:8476", 4, 3)),
        ({"JAX_COORDINATOR_ADDRESS": "10.0.0.2:8476", "JAX_NUM_PROCESSES": "1",
          "JAX_PROCESS_ID": "0"}, None),
        ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"}, Launch("slurm")),
        ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1"}, None),
        ({"OMPI_COMM_WORLD_SIZE": "8"}, Launch("openmpi")),
        ({"TW_JAX_DISTRIBUTED": "1"}, Launch("requested")),
    ],
)
def test_each_environment_describes_its_launch(environ, expected):
    assert detect_launch(environ) == expected


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"JAX_COORDINATOR_ADDRESS": "h:1"}, "JAX_NUM_PROCESSES is not"),
        ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2"}, "JAX_PROCESS_ID is not"),
        ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2"},
         r"JAX_PROCESS_ID=2 must be in \[0, JAX_NUM_PROCESSES=2\)"),
        ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "two", "JAX_PROCESS_ID": "0"},
         "JAX_NUM_PROCESSES='two' is not an integer"),
    ],
)
def test_incomplete_explicit_settings_are_refused(environ, message):
    with pytest.raises(DistributedStartError, match=message):
        detect_launch(environ)
